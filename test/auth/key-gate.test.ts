/**
 * A key's limits after it matched (src/auth/key-gate.ts), through the whole handler on the memory
 * storage: each scope on each endpoint, an allowlist from inside and outside (IPv4, an IPv6 /48,
 * an IPv4 client on a dual-stack socket), an expired key, and `last_used_at` written in batches,
 * at most once a minute per key.
 */
import { describe, expect, it, vi } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { createMerchantClient, MerchantResponseError } from '../../src/client/index.js';
import { silentLogger } from '../../src/observe/logger.js';
import type { KeyUse } from '../../src/storage/contract.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import type { Seed } from '../../src/storage/seed/seed.js';
import { basic, call, NOW_MS, ORIGIN, signedUrl } from '../support/api.js';
import { user } from '../support/seeds.js';

const seed: Seed = {
  merchants: [
    {
      id: 'shop',
      status: 'active',
      keys: ['every-scope-key', 'signing-only-key', 'reading-only-key', 'office-key', 'expired-key', 'ending-later-key'],
      keyDetails: [
        undefined,
        { name: 'checkout', limits: { scopes: ['signature'] } },
        { name: 'reports', limits: { scopes: ['users:read'] } },
        { limits: { allowFrom: ['203.0.113.0/24', '2001:db8:42::/48'] } },
        // One second before the handler's clock, and one second after.
        { limits: { expiresAt: new Date(NOW_MS - 1000).toISOString().replace('Z', '000+00:00') } },
        { limits: { expiresAt: new Date(NOW_MS + 1000).toISOString().replace('Z', '000+00:00') } },
      ],
    },
  ],
  users: [user('shop', 'u-1')],
};

function handler(options: { now?: () => number; writes?: KeyUse[][] } = {}) {
  const storage = new MemoryStorage(seed);
  if (options.writes) {
    const record = storage.recordKeyUse.bind(storage);
    storage.recordKeyUse = async (uses) => {
      options.writes!.push([...uses]);
      return record(uses);
    };
  }
  const api = createMerchantApi({ storage, now: options.now ?? (() => NOW_MS), logger: silentLogger, throttle: { pairFailures: 3, addressFailures: 100 } });
  return { api, storage };
}

const user1 = `${ORIGIN}/merchant/users/u-1`;
const from = (clientAddress: string) => ({ clientAddress });
const basicGet = (api: ReturnType<typeof handler>['api'], key: string, url = user1, address = '192.0.2.1') => call(api, url, { headers: basic('shop', key) }, from(address));
const signed = (api: ReturnType<typeof handler>['api'], key: string, address = '192.0.2.1') => call(api, signedUrl({ cp: 'shop', key }), undefined, from(address));

describe('scopes', () => {
  it('a key with every scope signs and reads, as before', async () => {
    const { api } = handler();
    expect((await basicGet(api, 'every-scope-key')).status).toBe(200);
    expect((await signed(api, 'every-scope-key')).text).toBe('{"status":"ok","is_valid":true}');
  });

  it('a key without users:read is refused on the users and keys endpoints with 403 insufficient_scope naming it', async () => {
    const { api } = handler();
    for (const url of [user1, `${ORIGIN}/merchant/users`, `${ORIGIN}/merchant/keys`]) {
      const { status, body } = await basicGet(api, 'signing-only-key', url);
      expect(status).toBe(403);
      expect(body.errors[0].code).toBe('insufficient_scope');
      expect(body.errors[0].message).toContain('users:read');
    }
    expect((await signed(api, 'signing-only-key')).status).toBe(200);
  });

  it('a key without signature is refused by /validatesignature with 403 naming it, and reads users', async () => {
    const { api } = handler();
    const { status, body } = await signed(api, 'reading-only-key');
    expect(status).toBe(403);
    expect(body).toEqual({ status: 'error', message: 'This API key lacks the scope signature, which this endpoint needs.', is_valid: false });
    expect((await basicGet(api, 'reading-only-key')).status).toBe(200);
  });

  it('a refused scope is not a failed authentication: the throttle does not count it', async () => {
    const { api } = handler();
    for (let i = 0; i < 5; i++) expect((await basicGet(api, 'signing-only-key')).status).toBe(403);
    expect((await basicGet(api, 'every-scope-key')).status).toBe(200);
  });
});

describe('allow_from', () => {
  it('works from inside its networks: IPv4, an IPv6 /48, an IPv4 client of a dual-stack socket', async () => {
    const { api } = handler();
    for (const address of ['203.0.113.7', '203.0.113.255', '2001:db8:42:ffff::1', '2001:db8:42::', '::ffff:203.0.113.9']) {
      expect((await basicGet(api, 'office-key', user1, address)).status, address).toBe(200);
      expect((await signed(api, 'office-key', address)).status, address).toBe(200);
    }
  });

  it('answers 403 address_not_allowed from outside, counted by the throttle like a failure', async () => {
    const { api } = handler();
    for (const address of ['203.0.114.1', '2001:db8:43::1', '2001:db8:41:ffff:ffff:ffff:ffff:ffff']) {
      const basicAnswer = await basicGet(api, 'office-key', user1, address);
      expect(basicAnswer.status, address).toBe(403);
      expect(basicAnswer.body.errors[0].code).toBe('address_not_allowed');
      const signedAnswer = await signed(api, 'office-key', address);
      expect(signedAnswer.status, address).toBe(403);
      expect(signedAnswer.body).toEqual({ status: 'error', message: 'This API key may not be used from this address.', is_valid: false });
    }
    // pairFailures: 3 — the fourth try of the pair from one outside address is refused before any key is compared.
    const outside = '198.51.100.20';
    for (let i = 0; i < 3; i++) expect((await basicGet(api, 'office-key', user1, outside)).status).toBe(403);
    expect((await basicGet(api, 'office-key', user1, outside)).status).toBe(429);
  });

  it('refuses a client whose address the adapter did not tell', async () => {
    const { api } = handler();
    const { status, body } = await call(api, user1, { headers: basic('shop', 'office-key') });
    expect(status).toBe(403);
    expect(body.errors[0].code).toBe('address_not_allowed');
  });
});

describe('expiry', () => {
  it('an expired key no longer matches, as a revoked one: 401 for Basic, a mismatch for signatures', async () => {
    const { api } = handler();
    const basicAnswer = await basicGet(api, 'expired-key');
    expect(basicAnswer.status).toBe(401);
    expect(basicAnswer.body.errors[0].code).toBe('unauthorized');
    const signedAnswer = await signed(api, 'expired-key');
    expect(signedAnswer.status).toBe(400);
    expect(signedAnswer.body).toEqual({ status: 'error', message: 'Signature does not match.', is_valid: false });
  });

  it('a key works until its end, by the handler\'s clock', async () => {
    let now = NOW_MS;
    const { api } = handler({ now: () => now });
    expect((await basicGet(api, 'ending-later-key')).status).toBe(200);
    now = NOW_MS + 1000;
    expect((await basicGet(api, 'ending-later-key')).status).toBe(401);
  });
});

describe('last_used_at', () => {
  it('is written in batches, at most once a minute per key, never per request', async () => {
    let now = NOW_MS;
    const writes: KeyUse[][] = [];
    const { api, storage } = handler({ now: () => now, writes });
    for (let i = 0; i < 50; i++) expect((await basicGet(api, 'every-scope-key')).status).toBe(200);
    for (let i = 0; i < 20; i++) expect((await signed(api, 'signing-only-key')).status).toBe(200);
    await vi.waitFor(() => expect(writes).toHaveLength(1), { timeout: 10_000, interval: 50 });
    // One write of the two keys used, whatever the number of requests.
    expect(writes[0]!.map((use) => use.at)).toEqual(['2023-11-14T22:13:20.000000+00:00', '2023-11-14T22:13:20.000000+00:00']);
    const keys = await storage.listKeys('shop');
    expect(keys.filter((key) => key.last_used_at !== null)).toHaveLength(2);

    // 59 seconds on: still nothing to write; a minute on: one more write.
    now = NOW_MS + 59_000;
    for (let i = 0; i < 10; i++) await basicGet(api, 'every-scope-key');
    now = NOW_MS + 60_500;
    for (let i = 0; i < 10; i++) await basicGet(api, 'every-scope-key');
    await vi.waitFor(() => expect(writes).toHaveLength(2), { timeout: 10_000, interval: 50 });
    expect(writes[1]!).toEqual([{ merchantId: 'shop', keyId: keys[0]!.key_id, at: '2023-11-14T22:14:20.500000+00:00' }]);
    expect((await storage.listKeys('shop'))[0]!.last_used_at).toBe('2023-11-14T22:14:20.500000+00:00');
    // No write for a refused key.
    await basicGet(api, 'signing-only-key');
    await basicGet(api, 'office-key', user1, '198.51.100.1');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(writes).toHaveLength(2);
  });
});

describe('GET /merchant/keys', () => {
  it("answers the merchant's own keys that still work, never a secret", async () => {
    const { api } = handler();
    const { status, body, text } = await basicGet(api, 'reading-only-key', `${ORIGIN}/merchant/keys`);
    expect(status).toBe(200);
    expect(body.status).toBe('ok');
    expect(body.errors).toEqual([]);
    // The keys past their end are not listed (the storage's clock is the real one: both ended in 2023).
    expect(body.data).toHaveLength(4);
    expect(body.data.map((key: { name: string | null }) => key.name)).toEqual([null, 'checkout', 'reports', null]);
    expect(Object.keys(body.data[0])).toEqual(['key_id', 'name', 'scopes', 'created_at', 'expires_at', 'last_used_at', 'allow_from', 'mode']);
    expect(body.data[3].allow_from).toEqual(['203.0.113.0/24', '2001:db8:42::/48']);
    expect(text).not.toMatch(/-key/);
  });

  it('takes no query parameters', async () => {
    const { api } = handler();
    const { status, body } = await basicGet(api, 'every-scope-key', `${ORIGIN}/merchant/keys?x=1`);
    expect(status).toBe(400);
    expect(body.errors[0].code).toBe('unknown_parameter');
  });
});

describe('the client', () => {
  it('keys() reads GET /merchant/keys; a key without the scope gets insufficient_scope, from signatures too', async () => {
    const { api } = handler();
    const fetchThrough = (key: string) =>
      createMerchantClient({ baseUrl: ORIGIN, merchantId: 'shop', apiKey: key, retries: false, now: () => NOW_MS, fetch: ((input: RequestInfo | URL, init?: RequestInit) => api.fetch(new Request(input, init), { clientAddress: '192.0.2.1' })) as typeof fetch });
    const keys = await fetchThrough('reading-only-key').keys();
    expect(keys.map((key) => key.name)).toEqual([null, 'checkout', 'reports', null]);
    const refused = await fetchThrough('signing-only-key').keys().catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(MerchantResponseError);
    expect((refused as MerchantResponseError).code).toBe('insufficient_scope');
    const unsigned = await fetchThrough('reading-only-key').validateSignature().catch((error: unknown) => error);
    expect((unsigned as MerchantResponseError).code).toBe('insufficient_scope');
  });
});
