/**
 * `X-Forwarded-For` behind a trusted proxy (TRUST_PROXY), through the
 * standalone server on Node, Bun and Deno (docs/protocol.md#forwarded-addresses):
 * the last entry is the client, read with its port dropped (`a.b.c.d:p`,
 * `[v6]:p`), so a key allowed only from the proxy's own network is refused
 * for a client the proxy names with a port. A last entry that is no address
 * is a 400 naming the header, never taken as the socket's (the proxy's)
 * address; nothing of it reaches the log. An address kept is bounded.
 */
import { describe, expect, it } from 'vitest';
import { basic } from '../support/basic-auth.js';
import { send } from '../support/http-client.js';
import { RUNTIMES, useCliServer } from '../support/processes.js';
import { conformanceSeed, MERCHANTS } from '../support/seeds.js';

const { main } = MERCHANTS;
const JUNK = 'x'.repeat(4000);
/** A merchant whose key works only from the proxy's own address, as a key for a job on the same host. */
const LOCAL = { id: 'shop-local', key: 'local-only-key' };

function seed() {
  const base = conformanceSeed();
  return { ...base, merchants: [...base.merchants, { id: LOCAL.id, status: 'active' as const, keys: [LOCAL.key], keyDetails: [{ limits: { allowFrom: ['127.0.0.1/32'] } }] }] };
}

for (const runtime of RUNTIMES) {
  describe(`X-Forwarded-For on ${runtime} with TRUST_PROXY`, () => {
    const server = useCliServer(runtime, seed(), { TRUST_PROXY: 'true', AUTH_BLOCK_SECONDS: '120' });
    const users = () => `${server.url}/merchant/users?limit=1`;

    /** The access line of the request with this id, parsed, once the server wrote it. */
    const accessLine = async (requestId: string) => {
      const [line] = await server.process.waitFor(new RegExp(`\\{[^\\n]*"event":"request","request_id":"${requestId}"[^\\n]*\\}`));
      return JSON.parse(line) as { client_address?: string; status?: number };
    };

    it('reads an address with a port as the address: a key allowed only from 127.0.0.1/32 is refused for the client the proxy names', async () => {
      const local = basic(LOCAL.id, LOCAL.key);
      // No header: the socket's address is the client's (a request that did not pass the proxy).
      expect((await send(users(), { headers: local })).status).toBe(200);
      expect((await send(users(), { headers: { ...local, 'x-forwarded-for': '127.0.0.1:5555' } })).status).toBe(200);
      for (const forwarded of ['8.8.8.8:1234', '10.0.0.1, 8.8.8.8:1234', '[2001:db8::8]:443', '[2001:db8::8]', '2001:db8::8']) {
        const answer = await send(users(), { headers: { ...local, 'x-forwarded-for': forwarded } });
        expect(answer.status, forwarded).toBe(403);
      }
    });

    it('answers 400 naming the header for a last entry that is no address, before any key is compared, and logs none of it', async () => {
      const good = basic(main.id, main.keys[0]!);
      for (const [n, forwarded] of ['not-an-ip', `10.0.0.1, client-${JUNK}`, '192.0.2.9, ', 'unknown', '8.8.8.8:99999', '8.8.8.8:', '[2001:db8::1', '[2001:db8::1]x', '1.2.3.4:5:6', '[192.0.2.1]:80'].entries()) {
        const answer = await send(users(), { headers: { ...good, 'x-request-id': `xff-bad-${n}`, 'x-forwarded-for': forwarded } });
        expect(answer.status, forwarded).toBe(400);
        const body = JSON.parse(answer.body) as { errors: Array<{ code: string; message: string }> };
        expect(body.errors[0]!.code).toBe('malformed_request');
        expect(body.errors[0]!.message).toContain('X-Forwarded-For');
        const line = await accessLine(`xff-bad-${n}`);
        expect(line.status).toBe(400);
        expect(line.client_address).toBeUndefined();
      }
      expect(server.process.output()).not.toContain('x'.repeat(100));
    });

    it('counts wrong keys under the client\'s address whatever its port, and answers 429 after the limit', async () => {
      for (let i = 0; i < 10; i++) {
        const answer = await send(users(), { headers: { ...basic(main.id, `wrong-${i}`), 'x-forwarded-for': `10.0.0.1, 192.0.2.9:${1000 + i}` } });
        expect(answer.status).toBe(401);
      }
      expect((await send(users(), { headers: { ...basic(main.id, main.keys[0]!), 'x-forwarded-for': '192.0.2.9:2000' } })).status).toBe(429);
      expect((await send(users(), { headers: { ...basic(main.id, main.keys[0]!), 'x-forwarded-for': '192.0.2.9' } })).status).toBe(429);
      // Another client, whose count is its own; nor is the proxy's socket blocked.
      expect((await send(users(), { headers: { ...basic(main.id, main.keys[0]!), 'x-forwarded-for': '192.0.2.10:1000' } })).status).toBe(200);
      expect((await send(users(), { headers: basic(main.id, main.keys[0]!) })).status).toBe(200);
    });

    it('logs the address the proxy wrote, without its port or brackets, and never more than 64 characters of one', async () => {
      const cases: Array<[string, string]> = [
        ['[2001:db8::1]', '2001:db8::1'],
        ['[2001:db8::2]:8443', '2001:db8::2'],
        ['10.0.0.1,  198.51.100.7 ', '198.51.100.7'],
        ['198.51.100.8:41234', '198.51.100.8'],
      ];
      for (const [n, [forwarded, logged]] of cases.entries()) {
        await send(`${server.url}/healthz`, { headers: { 'x-request-id': `xff-ok-${n}`, 'x-forwarded-for': forwarded } });
        expect((await accessLine(`xff-ok-${n}`)).client_address, forwarded).toBe(logged);
      }
      // An IPv6 zone is any run of letters and digits to isIP: the address kept is cut.
      await send(`${server.url}/healthz`, { headers: { 'x-request-id': 'xff-zone', 'x-forwarded-for': `fe80::1%${'z'.repeat(4000)}` } });
      const zoned = (await accessLine('xff-zone')).client_address!;
      expect(zoned.startsWith('fe80::1%zzz')).toBe(true);
      expect(zoned.length).toBeLessThanOrEqual(64);
      expect(server.process.output()).not.toContain('z'.repeat(100));
    });
  });
}
