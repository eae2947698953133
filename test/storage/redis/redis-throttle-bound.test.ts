/**
 * The throttle's footprint in Redis is bounded whatever the number of attacking addresses
 * (issue 34 §2, docs/scaling.md#the-throttles-keys). The attack as found: 9,000 wrong Basic keys
 * from 3,000 IPv6 /64s naming the existing merchants, on a real redis-server. Before the census
 * every /64 left an address key and a pair key per merchant named (7,790 keys for this attack,
 * 24 h each), and a Redis near its `maxmemory` then refused every salt (503). Now the throttle
 * holds at most `maxEntries` counter keys (here 1,000), a second wave of 3,000 fresh /64s adds
 * nothing, and with `maxmemory` just above the footprint signed requests still validate.
 */
import { describe, expect, it, vi } from 'vitest';
import { createMerchantApi } from '../../../src/api.js';
import type { Logger } from '../../../src/observe/logger.js';
import { silentLogger } from '../../../src/observe/logger.js';
import { MemoryStorage } from '../../../src/storage/memory/index.js';
import { withRedisState } from '../../../src/storage/redis/index.js';
import { RedisKeys } from '../../../src/storage/redis/keys.js';
import { RedisThrottleStore } from '../../../src/storage/redis/throttle-store.js';
import { DEFAULTS } from '../../../src/defaults.js';
import { throttleFullCount } from '../../../src/storage/throttle-store.js';
import { basic, NOW, NOW_MS, ORIGIN, signedUrl } from '../../support/api.js';
import { redisAvailable, useRedis } from '../../support/redis.js';
import { contractSeed } from '../../support/seeds.js';

const CAP = 1000;
// Requests at once: few enough that the store keeps up (MAX_REPORTS_IN_FLIGHT), so every failure is reported.
const BATCH = 4;
const MERCHANTS = ['m1', 'm2', 'gone-key'];

describe.skipIf(!redisAvailable())('the throttle keys on Redis, bounded whatever the number of attackers', () => {
  const redis = useRedis({ flushAfterEach: true });
  const throttleKeys = () => redis.cli('eval', "return #redis.call('KEYS', ARGV[1])", '0', 'merchant-api:{a:*').trim();
  const usedMemory = () => Number(/used_memory:(\d+)/.exec(redis.cli('info', 'memory'))![1]);

  async function attack(call: (path: string, headers: Record<string, string>, address: string) => Promise<Response>, firstNetwork: number, networks: number) {
    const jobs: (() => Promise<number>)[] = [];
    for (let n = firstNetwork; n < firstNetwork + networks; n++) {
      const prefix = `2001:db8:${(n >> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
      // One failure per existing merchant, each from another address of the /64 (one key for all: address-key.ts).
      MERCHANTS.forEach((merchant, i) => jobs.push(async () => (await call('/merchant/users', basic(merchant, `wrong-${n}`), `${prefix}::${i + 1}`)).status));
    }
    const statuses: Record<number, number> = {};
    for (let i = 0; i < jobs.length; i += BATCH) {
      for (const status of await Promise.all(jobs.slice(i, i + BATCH).map((job) => job()))) statuses[status] = (statuses[status] ?? 0) + 1;
    }
    return statuses;
  }

  it('keeps at most maxEntries counter keys through 9,000 failures from 3,000 /64s and 9,000 more, and signed requests validate with maxmemory just above', async () => {
    const events: Record<string, unknown>[] = [];
    const logger: Logger = { ...silentLogger, warn: (fields: object) => void events.push(fields as Record<string, unknown>) };
    const connection = redis.connect();
    const storage = withRedisState(new MemoryStorage(contractSeed()), connection);
    const api = createMerchantApi({ storage, now: () => NOW_MS, logger, accessLog: false, tracing: false, throttle: { maxEntries: CAP } });
    await vi.waitFor(() => connection.ping(), { timeout: 5000 });
    const call = (path: string, headers: Record<string, string>, address: string) => api.fetch(new Request(`${ORIGIN}${path}`, { headers }), { clientAddress: address });
    const fullBefore = throttleFullCount();

    expect(await attack(call, 0, 3000)).toEqual({ 401: 9000 });
    // Full: the census holds CAP members, and the keys are no more once the checks in flight ended
    // (a hash of reservations alone goes with its last check, or at most 16 s after: RESERVATION_SECONDS).
    // Waited for: a 401 waits for its report at most REPORT_WAIT_MS, so on a busy machine the attack
    // ends with reports still queued (one run read an empty census here); they land afterwards.
    await vi.waitFor(() => expect(Number(redis.cli('zcard', 'merchant-api:{census}').trim())).toBe(CAP), { timeout: 20_000, interval: 250 });
    await vi.waitFor(() => expect(Number(throttleKeys())).toBeLessThanOrEqual(CAP), { timeout: 20_000, interval: 250 });
    const afterFirst = Number(throttleKeys());
    expect(afterFirst).toBeGreaterThan(CAP / 2);
    expect(throttleFullCount() - fullBefore).toBeGreaterThan(0);
    expect(events.filter((e) => e.event === 'throttle_full')).toEqual([expect.objectContaining({ event: 'throttle_full', cap: CAP })]);
    const footprint = Number(redis.cli('memory', 'usage', 'merchant-api:{census}').trim());
    expect(footprint).toBeGreaterThan(0);

    // Redis as full as it may be but for 1 MB: a second wave of fresh /64s must not take that room
    // from the salts (without the census it took 1.4 MB here, and signed requests then got 503).
    const before = usedMemory();
    redis.cli('config', 'set', 'maxmemory', String(before + 1024 * 1024));
    try {
      expect(await attack(call, 3000, 3000)).toEqual({ 401: 9000 });
      await vi.waitFor(() => expect(Number(throttleKeys())).toBeLessThanOrEqual(CAP), { timeout: 20_000, interval: 250 });
      expect(usedMemory() - before).toBeLessThan(256 * 1024);
      for (let i = 0; i < 20; i++) {
        const response = await api.fetch(new Request(signedUrl({ ts: NOW })), { clientAddress: `198.51.100.${i + 1}` });
        expect(response.status).toBe(200);
      }
    } finally {
      redis.cli('config', 'set', 'maxmemory', '0');
    }
  }, 120_000);

  it('admits a counter already in the census however full it is, refuses new ones, and forgets ended members', async () => {
    const connection = redis.connect();
    await vi.waitFor(() => connection.ping(), { timeout: 5000 });
    const store = new RedisThrottleStore(connection, new RedisKeys());
    const rules = { ...DEFAULTS.throttle, maxEntries: 3 };
    const full: number[] = [];
    const listener = { learn: () => undefined, failed: () => undefined, full: (cap: number) => void full.push(cap) };
    store.subscribe(listener);
    // One address with a merchant: two counters (its own and the pair's).
    expect((await store.recordFailure({ address: '203.0.113.1', merchantId: 'm1', now: NOW }, rules)).map((r) => r.scope)).toEqual(['address', 'pair']);
    expect((await store.recordFailure({ address: '203.0.113.2', merchantId: undefined, now: NOW }, rules)).map((r) => r.scope)).toEqual(['address']);
    expect(full).toEqual([]);
    // Full: a new address's counters go again at once (its instance counts it alone), and it is said so.
    await store.recordFailure({ address: '203.0.113.3', merchantId: 'm1', now: NOW }, rules);
    expect(full).toEqual([3]);
    expect(redis.cli('exists', 'merchant-api:{a:203.0.113.3}:address', 'merchant-api:{a:203.0.113.3}:pair:m1').trim()).toBe('0');
    // A counter already admitted keeps counting.
    const again = await store.recordFailure({ address: '203.0.113.1', merchantId: 'm1', now: NOW + 1 }, rules);
    expect(again.map((r) => [r.scope, r.failures])).toEqual([['address', 2], ['pair', 2]]);
    expect(store.fullCount).toBe(1);
    // Each key's admission covers its longest life: the census entries end after the keys.
    const admitted = Number(/admitted\n(\d+)/.exec(redis.cli('hgetall', 'merchant-api:{a:203.0.113.1}:pair:m1'))![1]);
    const ttl = Number(redis.cli('ttl', 'merchant-api:{a:203.0.113.1}:pair:m1').trim());
    expect(admitted).toBeGreaterThanOrEqual(NOW + ttl);
    // Members that ended leave room (scored in the past here: as after their keys' life).
    redis.cli('zadd', 'merchant-api:{census}', String(NOW - 10), '203.0.113.2');
    expect((await store.recordFailure({ address: '203.0.113.4', merchantId: undefined, now: NOW + 2 }, rules)).map((r) => r.scope)).toEqual(['address']);
    expect(Number(redis.cli('zcard', 'merchant-api:{census}').trim())).toBe(3);
    store.close();
  });
});
