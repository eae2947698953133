/**
 * `X-Forwarded-For` behind a trusted proxy (TRUST_PROXY), through the
 * standalone server on Node, Bun and Deno: a last entry that is not an IP
 * address is not one a proxy wrote, so the socket's address is used (a
 * client cannot spread its failures over invented "addresses", nor fill the
 * throttle's maps and the log with 4 KB values); an address kept is bounded.
 */
import { describe, expect, it } from 'vitest';
import { basic } from '../support/basic-auth.js';
import { send } from '../support/http-client.js';
import { RUNTIMES, useCliServer } from '../support/processes.js';
import { conformanceSeed, MERCHANTS } from '../support/seeds.js';

const { main } = MERCHANTS;
const JUNK = 'x'.repeat(4000);

for (const runtime of RUNTIMES) {
  describe(`X-Forwarded-For on ${runtime} with TRUST_PROXY`, () => {
    const server = useCliServer(runtime, conformanceSeed(), { TRUST_PROXY: 'true', AUTH_BLOCK_SECONDS: '120' });
    const users = () => `${server.url}/merchant/users?limit=1`;

    /** The access line of the request with this id, parsed, once the server wrote it. */
    const accessLine = async (requestId: string) => {
      const [line] = await server.process.waitFor(new RegExp(`\\{[^\\n]*"event":"request","request_id":"${requestId}"[^\\n]*\\}`));
      return JSON.parse(line) as { client_address?: string };
    };

    it('counts wrong keys sent with values that are not an IP under the socket address, and answers 429 after the limit', async () => {
      for (let i = 0; i < 10; i++) {
        const answer = await send(users(), { headers: { ...basic(main.id, `wrong-${i}`), 'x-forwarded-for': `10.0.0.1, client-${i}-${JUNK}` } });
        expect(answer.status).toBe(401);
      }
      expect((await send(users(), { headers: { ...basic(main.id, main.keys[0]!), 'x-forwarded-for': 'not-an-ip' } })).status).toBe(429);
      expect((await send(users(), { headers: basic(main.id, main.keys[0]!) })).status).toBe(429);
      // An address the proxy wrote is another client, whose count is its own.
      expect((await send(users(), { headers: { ...basic(main.id, main.keys[0]!), 'x-forwarded-for': '192.0.2.9' } })).status).toBe(200);
      expect((await send(users(), { headers: { ...basic(main.id, main.keys[0]!), 'x-forwarded-for': 'junk, 2001:db8::9 ' } })).status).toBe(200);
    });

    it('logs the socket address for a value that is not an IP, the proxy\'s IP otherwise, and never more than 64 characters of one', async () => {
      await send(`${server.url}/healthz`, { headers: { 'x-request-id': 'xff-junk', 'x-forwarded-for': JUNK } });
      expect((await accessLine('xff-junk')).client_address).toBe('127.0.0.1');
      await send(`${server.url}/healthz`, { headers: { 'x-request-id': 'xff-bracketed', 'x-forwarded-for': '[2001:db8::1]' } });
      expect((await accessLine('xff-bracketed')).client_address).toBe('127.0.0.1');
      await send(`${server.url}/healthz`, { headers: { 'x-request-id': 'xff-ip', 'x-forwarded-for': '10.0.0.1,  198.51.100.7 ' } });
      expect((await accessLine('xff-ip')).client_address).toBe('198.51.100.7');
      // An IPv6 zone is any run of letters and digits to isIP: the address kept is cut.
      await send(`${server.url}/healthz`, { headers: { 'x-request-id': 'xff-zone', 'x-forwarded-for': `fe80::1%${'z'.repeat(4000)}` } });
      const zoned = (await accessLine('xff-zone')).client_address!;
      expect(zoned.startsWith('fe80::1%zzz')).toBe(true);
      expect(zoned.length).toBeLessThanOrEqual(64);
      // Nothing of the 4 KB values reached the log: not the access lines, not the auth_failed events.
      expect(server.process.output()).not.toContain('x'.repeat(100));
      expect(server.process.output()).not.toContain('z'.repeat(100));
    });
  });
}
