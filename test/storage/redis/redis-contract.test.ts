/**
 * The storage contract (test/suites/storage-contract.ts) over the memory
 * storage with its salts on a real redis-server: wrapping a storage in the
 * Redis state keeps every answer the handler relies on. Salts expire by
 * Redis's clock (a key's expiry), which the contract checks in real time.
 */
import { describe } from 'vitest';
import { MemoryStorage } from '../../../src/storage/memory/index.js';
import { createRedisConnection, withRedisState } from '../../../src/storage/redis/index.js';
import { storageContract } from '../../suites/storage-contract.js';
import { redisAvailable, startRedis } from '../../support/redis.js';

describe.skipIf(!redisAvailable())('the Redis state over the memory storage', () => {
  storageContract('memory with salts and throttle on Redis', async (seed) => {
    const redis = await startRedis();
    const memory = new MemoryStorage(seed);
    // No margin: a salt recorded for one second is forgotten one second later, which the contract waits for.
    const storage = withRedisState(memory, createRedisConnection(redis.url), { closeConnection: true, expiryMarginSeconds: 0 });
    return {
      storage,
      realTimeSaltExpiry: true,
      listWebhookDeliveries: async (options) => memory.listWebhookDeliveries(options),
      cleanup: () => redis.stop(),
      async add({ merchants, users }) {
        for (const merchant of merchants) memory.putMerchant(merchant);
        for (const { merchant_id, ...record } of users) memory.putUser(merchant_id, record);
      },
    };
  });
});
