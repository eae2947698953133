/**
 * Rules that hold for all inputs, searched with fast-check through
 * api.fetch: signing round trips over any Unicode, any single change to a
 * signed request is refused, and tenants stay apart on random data through
 * every page, cursor and single lookup. A failure prints its seed and the
 * shrunk counterexample. Requests are signed and their queries written by the
 * independent signer (test/support/test-signer.ts, Python's `quote`) as well as
 * by the library's `signUrl`: a library that signed its own URLs in a way of
 * its own (`~` as %7E) would still agree with itself.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { signUrl } from '../../src/signing/index.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { merchantIdProblem, type UserRecord } from '../../src/storage/contract.js';
import { user } from '../support/seeds.js';
import { hmacSha224, queryString, signatureMessage } from '../support/test-signer.js';

const NOW_MS = 1_700_000_000_000;
/** Hundreds of handlers each: about 20 s on a busy 2-core machine, so the default 30 s was too tight a bound. */
const PROPERTY_TIMEOUT_MS = 180_000;
const BASE = 'https://api.test';
const RESERVED = new Set(['cp', 'ts', 'salt', 'hmac', 'gettoken']);

/** Any Unicode text (whole code points, so it has a UTF-8 form), NUL excluded: the handler refuses NUL. */
const text = (minLength = 0) => fc.string({ unit: fc.oneof(fc.constantFrom('+', '&', '=', '%', ' ', '~', '/', '?', '#'), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 })), minLength, maxLength: 24 }).filter((s) => !s.includes('\u0000'));
/** Any id a merchant may have (`merchantIdProblem`: 1-128 code units, no colon, no control character). */
const id = text(1).filter((s) => merchantIdProblem(s) === undefined);
const extraPairs = fc.array(fc.tuple(text(1).filter((k) => !RESERVED.has(k)), text()), { maxLength: 5 });

function apiFor(merchants: { id: string; keys: string[] }[]) {
  const storage = new MemoryStorage();
  for (const merchant of merchants) storage.putMerchant({ ...merchant, status: 'active' });
  return createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, tracing: false, throttle: false });
}

let salt = 0;
const freshSalt = () => `prop-salt-${++salt}`;

describe('signing, for all inputs', () => {
  it('a request signed with the merchant key validates, whatever its id, key, parameter names and values', async () => {
    await fc.assert(
      fc.asyncProperty(id, text(1), extraPairs, fc.constantFrom('GET', 'HEAD'), fc.constantFrom('library', 'independent'), async (merchantId, key, extra, method, signer) => {
        const api = apiFor([{ id: merchantId, keys: [key] }]);
        const params: [string, string][] = [['cp', merchantId], ['ts', String(NOW_MS / 1000)], ['salt', freshSalt()], ...extra];
        const endpoint = `${BASE}/validatesignature`;
        const url =
          signer === 'library'
            ? signUrl(key, endpoint, params, { method })
            : `${endpoint}?${queryString([...params, ['hmac', hmacSha224(key, signatureMessage(method, endpoint, params))]])}`;
        const response = await api.fetch(new Request(url, { method }));
        expect(response.status).toBe(200);
        if (method === 'GET') expect(await response.json()).toEqual({ status: 'ok', is_valid: true });
      }),
      { numRuns: 200 },
    );
  }, PROPERTY_TIMEOUT_MS);

  it('any single change to the method, the path, a parameter or the hmac is refused', async () => {
    const change = fc.constantFrom('method', 'host', 'parameter value', 'parameter added', 'hmac');
    await fc.assert(
      fc.asyncProperty(id, text(1), extraPairs, change, fc.nat(), async (merchantId, key, extra, what, n) => {
        const storage = new MemoryStorage();
        storage.putMerchant({ id: merchantId, status: 'active', keys: [key] });
        const checked = createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, tracing: false, throttle: false, publicUrl: BASE });
        const params: [string, string][] = [['cp', merchantId], ['ts', String(NOW_MS / 1000)], ['salt', freshSalt()], ...extra];
        let method = 'GET';
        let signedBase = BASE;
        const sent = params.map(([k, v]) => [k, v] as [string, string]);
        if (what === 'method') method = 'HEAD';
        if (what === 'host') signedBase = 'https://other.test';
        let hmac = hmacSha224(key, signatureMessage(method, `${signedBase}/validatesignature`, params));
        if (what === 'parameter value') {
          const i = 3 + (extra.length ? n % extra.length : 0);
          if (i < sent.length) sent[i]![1] += 'x';
          else sent[2]![1] += 'x'; // the salt
        }
        if (what === 'parameter added') sent.push(['added', String(n)]);
        if (what === 'hmac') {
          const at = n % hmac.length;
          hmac = hmac.slice(0, at) + (hmac[at] === '0' ? '1' : '0') + hmac.slice(at + 1);
        }
        const query = queryString([...sent, ['hmac', hmac]]);
        const response = await checked.fetch(new Request(`${BASE}/validatesignature?${query}`));
        expect(response.status).toBe(400);
        expect(await response.json()).toEqual({ status: 'error', message: 'Signature does not match.', is_valid: false });
      }),
      { numRuns: 300 },
    );
  }, PROPERTY_TIMEOUT_MS);
});

describe('tenant isolation, for all datasets', () => {
  const merchantIds = ['m-a', 'm-b', 'm-c'];
  const dataset = fc.uniqueArray(fc.tuple(fc.constantFrom(...merchantIds), fc.constantFrom('u1', 'u2', 'shared', 'ü', '😀', 'a b', 'x/y', 'Z', 'z'), fc.boolean()), {
    selector: ([merchant, userId]) => `${merchant}\u0000${userId}`,
    maxLength: 27,
  });

  it('every merchant sees exactly its own users, through every page size, every cursor and every single lookup', async () => {
    await fc.assert(
      fc.asyncProperty(dataset, fc.integer({ min: 1, max: 5 }), fc.constantFrom(undefined, 'true', 'false'), async (rows, limit, active) => {
        const storage = new MemoryStorage();
        for (const merchant of merchantIds) storage.putMerchant({ id: merchant, status: 'active', keys: [`key-${merchant}`] });
        const owned = new Map<string, UserRecord[]>();
        for (const [merchant, userId, deactivated] of rows) {
          const { merchant_id: _, ...record } = user(merchant, userId, { first_name: `${merchant}'s ${userId}`, deactivated_at: deactivated ? '2024-01-01T00:00:00.000000+00:00' : null });
          storage.putUser(merchant, record);
          owned.set(merchant, [...(owned.get(merchant) ?? []), record]);
        }
        const api = createMerchantApi({ storage, logger: silentLogger, tracing: false, throttle: false, cursorSecret: 'properties-cursor-secret-of-32-bytes!' });
        for (const merchant of merchantIds) {
          const auth = { authorization: `Basic ${btoa(`${merchant}:key-${merchant}`)}` };
          const expected = (owned.get(merchant) ?? [])
            .filter((u) => active === undefined || (u.deactivated_at === null) === (active === 'true'))
            .map((u) => u.first_name)
            .sort();
          const seen: string[] = [];
          let url: string | undefined = `${BASE}/merchant/users?limit=${limit}${active ? `&active=${active}` : ''}`;
          while (url) {
            const body = await (await api.fetch(new Request(url, { headers: auth }))).json();
            seen.push(...body.data.map((u: UserRecord) => u.first_name));
            url = body.next_cursor ? `${BASE}/merchant/users?cursor=${encodeURIComponent(body.next_cursor)}${active ? `&active=${active}` : ''}` : undefined;
          }
          expect(seen.sort()).toEqual(expected);
          for (const [, userId] of rows) {
            const response = await api.fetch(new Request(`${BASE}/merchant/users/${encodeURIComponent(userId)}`, { headers: auth }));
            const mine = (owned.get(merchant) ?? []).find((u) => u.shared_user_id === userId);
            expect(response.status).toBe(mine ? 200 : 404);
            if (mine) expect((await response.json()).data[0].first_name).toBe(mine.first_name);
          }
        }
      }),
      { numRuns: 100 },
    );
  }, PROPERTY_TIMEOUT_MS);
});
