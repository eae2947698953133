/**
 * An API over a storage that answers a stale copy of each merchant (active, with only the key
 * `key-old`) unless asked to refresh: what an instance holds in its key cache after a rotation
 * made on another instance. `fresh` is what a refresh finds; `lookups` records each read.
 */
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import type { Merchant, MerchantLookup } from '../../src/storage/contract.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { NOW_MS } from './api.js';
import { contractSeed } from './seeds.js';

/**
 * `held`: the stale copy is also what `cachedMerchant` answers, synchronously (as the MySQL storage's
 * cache does), so the handler's first read takes no promise; without it the storage has no
 * `cachedMerchant` and every read is `getMerchant`. `lookups` says `held` for a synchronous read, `cached` for a first `getMerchant`.
 */
export function staleMerchantApi(fresh: (merchant: Merchant | undefined) => Merchant | undefined, options: { held?: boolean } = {}) {
  const inner = new MemoryStorage(contractSeed());
  // What the synchronous read copies from (the inner storage's own answers the overridden getMerchant).
  const source = new MemoryStorage(contractSeed());
  const lookups: string[] = [];
  const stale = (merchant: Merchant | undefined) => merchant && { ...merchant, status: 'active' as const, keys: ['key-old'] };
  const storage = Object.assign(inner, {
    getMerchant: async (id: string, lookup?: MerchantLookup) => {
      const merchant = await MemoryStorage.prototype.getMerchant.call(inner, id);
      lookups.push(lookup?.refresh ? 'refresh' : 'cached');
      if (lookup?.refresh) return fresh(merchant);
      return stale(merchant);
    },
    cachedMerchant: options.held
      ? (id: string) => {
          const merchant = stale(source.cachedMerchant(id));
          if (merchant !== undefined) lookups.push('held');
          return merchant;
        }
      : undefined,
  });
  const api = createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, tracing: false });
  return { api, lookups };
}
