/**
 * A salt's key on Redis lives exactly as long as its URL can be replayed (docs/scaling.md#salts):
 * `expiresAt - now` of the handler's clock, rounded up to whole seconds, plus the margin
 * (`expiryMarginSeconds`, 2 by default). With margin 0 a key one second short would let a URL
 * through again in the last second of its window; redis-salts.test.ts accepts a TTL of 296-302 s,
 * so only this suite sees that.
 *
 * The handler's clock is fixed here; Redis's is not. So the key's life is measured on Redis's own
 * clock: `TIME` before and after the salt is recorded, and `PEXPIRETIME` of its key, give the life
 * to within the time between the two readings. When that time is under a second, one whole number
 * of seconds fits, and it must be the expected one; on a machine so busy that it is not, the salt
 * is recorded again under another name until it is (never an easier check).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStorage } from '../../../src/storage/memory/index.js';
import { withRedisState, type RedisStateOptions } from '../../../src/storage/redis/index.js';
import { NOW, NOW_MS } from '../../support/api.js';
import { redisAvailable, useRedis } from '../../support/redis.js';
import { contractSeed } from '../../support/seeds.js';

const available = redisAvailable();

describe.skipIf(!available)('the life of a salt\'s key on Redis', () => {
  const redis = useRedis({ flushAfterEach: true });
  let raw: Redis;
  beforeAll(() => {
    raw = new Redis(redis.url);
  });
  afterAll(() => raw?.disconnect());

  /** Redis's clock, in milliseconds. */
  const redisNow = async () => {
    const [seconds, micros] = await raw.time();
    return Number(seconds) * 1000 + Number(micros) / 1000;
  };
  /** Every salt key (not the groups' life markers and boot keys). */
  const saltKeys = async () => (await raw.keys('merchant-api:*')).filter((key) => !key.endsWith('life') && !key.endsWith('boot') && !key.endsWith('seq'));

  /** The whole seconds Redis gave the key of the salt `record` writes, measured as described above. */
  async function lifeOf(storage: ReturnType<typeof withRedisState>, record: { expiresAt: number; now: number; ts: number }, name: string): Promise<number> {
    for (let attempt = 0; attempt < 50; attempt++) {
      const known = new Set(await saltKeys());
      const before = await redisNow();
      expect(await storage.recordSalt({ merchantId: 'm1', salt: `${name}-${attempt}`, ...record })).toBe(true);
      const after = await redisNow();
      const [key, ...others] = (await saltKeys()).filter((k) => !known.has(k));
      expect(others).toEqual([]);
      const expiresAtMs = Number(await raw.pexpiretime(key!));
      // Written between `before` and `after` (Redis counts from its clock in whole ms, cut down:
      // `before` is cut down too): its life in ms lies between these two.
      const shortest = Math.ceil((expiresAtMs - Math.ceil(after)) / 1000);
      const longest = Math.floor((expiresAtMs - Math.floor(before)) / 1000);
      if (shortest === longest) return shortest;
      expect(shortest).toBeLessThan(longest);
    }
    throw new Error('Redis took more than a second to answer 50 times in a row');
  }

  function instance(options: RedisStateOptions) {
    const storage = withRedisState(new MemoryStorage(contractSeed()), redis.connect(), { now: () => NOW_MS, ...options });
    return storage;
  }

  it('with margin 0: exactly expiresAt - now, rounded up to whole seconds', async () => {
    const storage = instance({ expiryMarginSeconds: 0 });
    await storage.redisReady();
    // The first salt writes every group's life marker at NOW: the later ts are not before it.
    expect(await lifeOf(storage, { ts: NOW, now: NOW, expiresAt: NOW + 300 }, 'at-now')).toBe(300);
    expect(await lifeOf(storage, { ts: NOW, now: NOW + 100, expiresAt: NOW + 300 }, 'later')).toBe(200);
    expect(await lifeOf(storage, { ts: NOW + 60, now: NOW, expiresAt: NOW + 360 }, 'signed-ahead')).toBe(360);
    expect(await lifeOf(storage, { ts: NOW, now: NOW + 299, expiresAt: NOW + 300 }, 'last-second')).toBe(1);
    // A clock between two seconds: 299.75 s left, so 300 (never a moment short).
    expect(await lifeOf(storage, { ts: NOW, now: NOW + 0.25, expiresAt: NOW + 300 }, 'fraction')).toBe(300);
    await storage.close();
  });

  it('with the default margin: two seconds more', async () => {
    const storage = instance({});
    await storage.redisReady();
    expect(await lifeOf(storage, { ts: NOW, now: NOW, expiresAt: NOW + 300 }, 'default')).toBe(302);
    expect(await lifeOf(storage, { ts: NOW, now: NOW + 100, expiresAt: NOW + 300 }, 'default-later')).toBe(202);
    await storage.close();
  });
});
