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

export function staleMerchantApi(fresh: (merchant: Merchant | undefined) => Merchant | undefined) {
  const inner = new MemoryStorage(contractSeed());
  const lookups: string[] = [];
  const storage = Object.assign(inner, {
    getMerchant: async (id: string, lookup?: MerchantLookup) => {
      const merchant = await MemoryStorage.prototype.getMerchant.call(inner, id);
      lookups.push(lookup?.refresh ? 'refresh' : 'cached');
      if (lookup?.refresh) return fresh(merchant);
      return merchant && { ...merchant, status: 'active' as const, keys: ['key-old'] };
    },
  });
  const api = createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, tracing: false });
  return { api, lookups };
}
