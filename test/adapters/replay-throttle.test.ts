/**
 * Only a whole success is a success, over real HTTP on Node, Bun and Deno
 * (the standalone server of each, TRUST_PROXY on): 9 wrong signatures, a
 * captured expired URL, and the next check is 429 (the captured URL counted
 * as a failure, not a reset); a burst of parallel replays of one URL is
 * accepted once and blocks the pair; a malformed X-Forwarded-Host is a 400
 * malformed_request, never a 500. The same rules through api.fetch, in
 * detail: test/routes/signature-whole-success.test.ts and
 * test/http/public-url.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { signUrl } from '../../src/signing/index.js';
import { send } from '../support/http-client.js';
import { RUNTIMES, useCliServer } from '../support/processes.js';
import { conformanceSeed, MERCHANTS } from '../support/seeds.js';

const { main, other } = MERCHANTS;

for (const runtime of RUNTIMES) {
  describe(`on ${runtime}`, () => {
    const server = useCliServer(runtime, conformanceSeed(), { TRUST_PROXY: 'true' });
    const signed = (key: string, cp: string, options: { now?: () => number } = {}) => signUrl(key, `${server.url}/validatesignature`, { cp }, options);
    // Each test speaks for a client address of its own (TRUST_PROXY: the last X-Forwarded-For entry).
    const from = (address: string) => ({ headers: { 'x-forwarded-for': address } });

    it('9 wrong signatures and a captured expired URL: the next check is 429, not a fresh count', async () => {
      const client = from('192.0.2.10');
      for (let i = 0; i < 9; i++) expect((await send(signed(`wrong-${i}`, main.id), client)).status).toBe(400);
      const expired = await send(signed(main.keys[0], main.id, { now: () => Date.now() - 3_600_000 }), client);
      expect(expired.status).toBe(400);
      expect(expired.body).toBe('{"status":"error","message":"Invalid timestamp: ts is outside the accepted window of 300 seconds from the server\'s time.","is_valid":false}');
      expect((await send(signed('wrong-9', main.id), client)).status).toBe(429);
      // Another client address of the same merchant is not affected.
      expect((await send(signed(main.keys[0], main.id), from('192.0.2.11'))).status).toBe(200);
    });

    it('a burst of 12 parallel sends of one URL: accepted once, the 11 replays count as failures and block the pair', async () => {
      const client = from('192.0.2.20');
      const url = signed(other.keys[0], other.id);
      const statuses = (await Promise.all(Array.from({ length: 12 }, () => send(url, client)))).map((answer) => answer.status).sort();
      // Accepted once; each replay refused, as a replay or, once 10 are counted, as the blocked pair.
      expect(statuses.filter((status) => status === 200)).toHaveLength(1);
      expect(statuses.filter((status) => status !== 200 && status !== 400 && status !== 429)).toEqual([]);
      const next = await send(signed(other.keys[0], other.id), client);
      expect(next.status).toBe(429);
      expect(next.headers['retry-after']).toBeDefined();
    });

    it('a malformed X-Forwarded-Host is a 400 malformed_request, not a 500', async () => {
      for (const host of ['1.2.3.999', 'a:99999', '[::1::]']) {
        const answer = await send(signed(main.keys[0], main.id), { headers: { 'x-forwarded-for': '192.0.2.30', 'x-forwarded-proto': 'https', 'x-forwarded-host': host } });
        expect(answer.status, host).toBe(400);
        expect(JSON.parse(answer.body)).toEqual({ status: 'error', message: 'The X-Forwarded-Host header is not a host name or address with a valid port.', is_valid: false });
      }
    });
  });
}
