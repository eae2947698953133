/**
 * Basic auth (src/auth/basic-auth.ts) for a merchant whose keys this instance cached before a
 * rotation on another instance: a key added since is found by reading the merchant again once.
 */
import { describe, expect, it } from 'vitest';
import type { Merchant } from '../../src/storage/contract.js';
import { basic, call, ORIGIN } from '../support/api.js';
import { staleMerchantApi } from '../support/stale-merchant.js';

function staleApi(fresh: (merchant: Merchant | undefined) => Merchant | undefined, held: boolean) {
  const { api, lookups } = staleMerchantApi(fresh, { held });
  return { users: (key: string) => call(api, `${ORIGIN}/merchant/users/a-001`, { headers: basic('m1', key) }), lookups };
}

// held: the stale copy comes from the storage's synchronous cachedMerchant (no promise for the first read); else from getMerchant.
describe.each([false, true])('Basic auth with keys cached before a rotation (held in memory: %s)', (held) => {
  // The first read of each request: synchronous when held, else a getMerchant.
  const first = held ? 'held' : 'cached';
  it('accepts a key added since after reading the merchant again once; the cached key needs no second read', async () => {
    const { users, lookups } = staleApi((merchant) => merchant, held);
    expect((await users('key-one')).status).toBe(200);
    expect(lookups).toEqual([first, 'refresh']);
    expect((await users('key-old')).status).toBe(200);
    expect(lookups).toEqual([first, 'refresh', first]);
  });

  it('refuses a key the merchant read again does not hold either, or when it is gone', async () => {
    const stale = staleApi((merchant) => merchant, held);
    expect((await stale.users('never-a-key')).status).toBe(401);
    expect(stale.lookups).toEqual([first, 'refresh']);
    expect((await staleApi(() => undefined, held).users('key-one')).status).toBe(401);
  });
});
