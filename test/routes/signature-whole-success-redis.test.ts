/**
 * Only a whole success is a success with the throttle shared on Redis
 * (docs/security.md#only-a-whole-success-is-a-success): two instances on one
 * real redis-server, each with the real clock. A captured URL, used once, then
 * replayed after 9 wrong signatures, and a captured expired URL after 9 more:
 * neither resets the pair's count, so each completes a block that every
 * instance refuses (the replay and the expired URL were shared failures, not
 * shared resets).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { createRedisConnection, withRedisState } from '../../src/storage/redis/index.js';
import { basic, ORIGIN, signedUrl } from '../support/api.js';
import { redisAvailable, useRedis } from '../support/redis.js';
import { contractSeed } from '../support/seeds.js';

describe.skipIf(!redisAvailable())('a captured URL on Redis, two instances', () => {
  const redis = useRedis({ flushAfterEach: true });
  const closing: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await Promise.all(closing.splice(0).map((close) => close()));
  });

  function instance(address: string) {
    const storage = withRedisState(new MemoryStorage(contractSeed()), createRedisConnection(redis.url), { closeConnection: true });
    closing.push(() => storage.close());
    const api = createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false });
    return (url: string, headers: Record<string, string> = {}) => api.fetch(new Request(url.startsWith('http') ? url : `${ORIGIN}${url}`, { headers }), { clientAddress: address }).then((response) => response.status);
  }
  /** A second ahead of the clock: after the life marker a fresh Redis writes (docs/scaling.md#the-life-marker). */
  const now = () => Math.floor(Date.now() / 1000) + 1;

  /** Waits until both instances refuse the pair (the probe names m1 with an empty key, refused first when the pair is blocked). */
  async function blockedOnBoth(...instances: ReturnType<typeof instance>[]) {
    for (const one of instances) await vi.waitFor(async () => expect(await one('/merchant/users', basic('m1', ''))).toBe(429), { timeout: 6000, interval: 200 });
  }

  it('a replayed URL after 9 wrong signatures blocks the pair on both instances', async () => {
    const [a, b] = [instance('203.0.113.41'), instance('203.0.113.41')];
    // b's first signed request writes the first life markers at its own clock, to the ms (docs/scaling.md#the-first-marker):
    // on a busy machine that can fall in the very second a URL signed before it names, which is then refused 400 ("before
    // the replay store began", its salt not recorded), and so is every retry of that same URL. So b validates a throwaway
    // URL, a fresh one at each attempt, before the captured URL is signed; that one is used exactly once.
    await vi.waitFor(async () => expect(await b(signedUrl({ ts: now() }))).toBe(200), { interval: 200 });
    const captured = signedUrl({ ts: now() });
    expect(await b(captured)).toBe(200);
    for (let i = 0; i < 9; i++) expect(await a(signedUrl({ ts: now(), key: `wrong-${i}` }))).toBe(400);
    expect(await b(captured)).toBe(400);
    await blockedOnBoth(b, a);
    expect(await a(signedUrl({ ts: now() }))).toBe(429);
  });

  it('an expired URL after 9 wrong signatures blocks the pair on both instances', async () => {
    const [a, b] = [instance('203.0.113.42'), instance('203.0.113.42')];
    for (let i = 0; i < 9; i++) expect(await a(signedUrl({ ts: now(), key: `wrong-${i}` }))).toBe(400);
    expect(await b(signedUrl({ ts: now() - 1000 }))).toBe(400);
    await blockedOnBoth(b, a);
    expect(await b(signedUrl({ ts: now() }))).toBe(429);
  });
});
