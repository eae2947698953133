/**
 * The failed-authentication throttle shared on a real redis-server
 * (docs/security.md#sharing-the-counters-on-redis): two handlers, each with a
 * connection of its own; a block made on one is refused on the other as soon
 * as its message arrives (there is no polling to wait for); an instance
 * started later reads the blocks in force; the Lua rules count exactly as the
 * local throttle does; a subscription that breaks catches up on blocks.
 */
import { describe, expect, it, vi } from 'vitest';
import { createMerchantApi, type MerchantApiOptions } from '../../../src/api.js';
import { FailureThrottle } from '../../../src/limits/throttle.js';
import { silentLogger } from '../../../src/observe/logger.js';
import { MemoryStorage } from '../../../src/storage/memory/index.js';
import { withRedisState } from '../../../src/storage/redis/index.js';
import { basic, NOW, NOW_MS, ORIGIN, signedUrl } from '../../support/api.js';
import { redisAvailable, useRedis } from '../../support/redis.js';
import { contractSeed } from '../../support/seeds.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { assertStoreCountsAsTheLocalThrottle, assertStoreReservesAsTheModel } from '../../support/throttle-store-rules.js';
import { sleep } from '../../support/sleep.js';

const available = redisAvailable();

describe.skipIf(!available)('the throttle shared on Redis', () => {
  const redis = useRedis({ flushAfterEach: true });

  async function instance(options: { api?: Partial<MerchantApiOptions>; url?: string } = {}) {
    const connection = redis.connect(options.url);
    const storage = withRedisState(new MemoryStorage(contractSeed()), connection);
    const api = createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, accessLog: false, tracing: false, ...options.api });
    await vi.waitFor(() => connection.ping(), { timeout: 5000 });
    const call = (path: string, headers: Record<string, string>, address: string) =>
      api.fetch(new Request(path.startsWith('http') ? path : `${ORIGIN}${path}`, { headers }), { clientAddress: address });
    return { storage, call, connection };
  }

  const record = (address: string, merchant?: string) => redis.cli('hgetall', merchant ? `merchant-api:{a:${address}}:pair:${merchant}` : `merchant-api:{a:${address}}:address`);

  it('refuses on the other instance a block made by one, as soon as the block is written, without polling', async () => {
    const [a, b] = [await instance(), await instance()];
    const address = '203.0.113.1';
    // b's subscription is up once it has heard something: a's first failure.
    expect((await a.call('/merchant/users', basic('m1', 'wrong-0'), address)).status).toBe(401);
    for (let i = 1; i < 10; i++) expect((await (i % 2 ? a : b).call('/merchant/users', basic('m1', `wrong-${i}`), address)).status).toBe(401);
    // The tenth failure, split across both, made the block in Redis.
    await vi.waitFor(() => expect(record(address, 'm1')).toMatch(/^blockedUntil\n1700000300$/m), { timeout: 5000, interval: 10 });
    await vi.waitFor(async () => expect((await b.call('/merchant/users', basic('m1', 'key-one'), address)).status).toBe(429), { timeout: 5000, interval: 5 });
    await vi.waitFor(async () => expect((await a.call('/merchant/users', basic('m1', 'key-one'), address)).status).toBe(429), { timeout: 5000, interval: 5 });
    const refused = await b.call('/merchant/users', basic('m1', 'key-one'), address);
    expect(refused.headers.get('retry-after')).toBe('300');
    expect((await b.call('/merchant/users', basic('m2', 'key-two'), address)).status).toBe(200);
  });

  it('counts an IPv6 /64 under one key, whichever of its addresses fails, and refuses the whole /64 on the other instance', async () => {
    const [a, b] = [await instance(), await instance()];
    expect((await a.call('/merchant/users', basic('m1', 'wrong-0'), '2001:db8:7:7::1')).status).toBe(401);
    for (let i = 1; i < 10; i++) expect((await (i % 2 ? a : b).call('/merchant/users', basic('m1', `wrong-${i}`), `2001:db8:7:7:${i}::${i}`)).status).toBe(401);
    await vi.waitFor(() => expect(record('2001:db8:7:7::/64', 'm1')).toMatch(/^blockedUntil\n1700000300$/m), { timeout: 5000, interval: 10 });
    expect(redis.cli('keys', '*2001:db8:7:7*').split('\n').filter(Boolean).sort()).toEqual(['merchant-api:{a:2001:db8:7:7::/64}:address', 'merchant-api:{a:2001:db8:7:7::/64}:pair:m1']);
    await vi.waitFor(async () => expect((await b.call('/merchant/users', basic('m1', 'key-one'), '2001:db8:7:7:abcd::99')).status).toBe(429), { timeout: 5000, interval: 5 });
    expect((await b.call('/merchant/users', basic('m1', 'key-one'), '2001:db8:7:8::1')).status).toBe(200);
  });

  it('refuses on an instance started later the blocks in force, read at its start', async () => {
    const a = await instance();
    const address = '203.0.113.2';
    for (let i = 0; i < 10; i++) await a.call(signedUrl({ key: 'wrong-key' }), {}, address);
    await vi.waitFor(() => expect(record(address, 'm1')).toMatch(/^blockedUntil\n1700000300$/m), { timeout: 5000, interval: 10 });
    await vi.waitFor(() => expect(redis.cli('zcard', 'merchant-api:{blocks}').trim()).toBe('1'), { timeout: 5000, interval: 10 });
    const later = await instance();
    await vi.waitFor(async () => expect((await later.call(signedUrl(), {}, address)).status).toBe(429), { timeout: 5000, interval: 10 });
  });

  it('resets the count on both instances after a success on either', async () => {
    const [a, b] = [await instance(), await instance()];
    const address = '203.0.113.3';
    for (let i = 0; i < 9; i++) await a.call('/merchant/users', basic('m1', 'nope'), address);
    await vi.waitFor(() => expect(record(address, 'm1')).toMatch(/^failures\n9$/m), { timeout: 5000, interval: 10 });
    // b learned the count from a's messages, so its success resets the shared one.
    await vi.waitFor(async () => {
      expect((await b.call('/merchant/users', basic('m1', 'key-one'), address)).status).toBe(200);
      expect(record(address, 'm1')).toMatch(/^failures\n0$/m);
    }, { timeout: 5000, interval: 20 });
    // a hears of the reset by its message; until then its own count would still stand.
    await sleep(100);
    for (let i = 0; i < 9; i++) expect((await a.call('/merchant/users', basic('m1', 'nope'), address)).status).toBe(401);
    await vi.waitFor(() => expect(record(address, 'm1')).toMatch(/^failures\n9$/m), { timeout: 5000, interval: 10 });
  });

  it('never loses a count of failures made at once from both instances', async () => {
    const limits = { pairFailures: 1000, addressFailures: 1000 };
    const [a, b] = [await instance({ api: { throttle: limits } }), await instance({ api: { throttle: limits } })];
    const rules = new FailureThrottle(limits).rules;
    const stores = [a.storage.throttleStore!()!, b.storage.throttleStore!()!];
    await Promise.all(Array.from({ length: 200 }, (_, i) => stores[i % 2]!.recordFailure({ address: '203.0.113.7', merchantId: 'm2', now: NOW }, rules)));
    expect(record('203.0.113.7')).toMatch(/^failures\n200$/m);
    expect(record('203.0.113.7', 'm2')).toMatch(/^failures\n200$/m);
  });

  it('counts in Lua exactly as the local throttle does, over random failures, successes and time', async () => {
    const store = (await instance()).storage.throttleStore!()!;
    await assertStoreCountsAsTheLocalThrottle(store, NOW);
  });

  it('reserves key checks exactly within what is left before the block, over random reservations, failures and releases', async () => {
    const store = (await instance()).storage.throttleStore!()!;
    await assertStoreReservesAsTheModel(store, NOW);
  });

  it('keeps counters only while they mean something, and a bounded index of blocks', async () => {
    const store = (await instance()).storage.throttleStore!()!;
    const rules = new FailureThrottle({ pairFailures: 1 }).rules;
    await store.recordFailure({ address: '192.0.2.1', merchantId: 'm2', now: NOW }, rules);
    expect(Number(redis.cli('ttl', 'merchant-api:{a:192.0.2.1}:address'))).toBeGreaterThan(3590);
    expect(Number(redis.cli('ttl', 'merchant-api:{a:192.0.2.1}:pair:m2'))).toBeGreaterThan(86_390);
    // Addresses that are not printable ASCII of 64 characters at most are counted locally only.
    expect(await store.recordFailure({ address: 'x'.repeat(65), merchantId: undefined, now: NOW }, rules)).toEqual([]);
    const blocks = await store.activeBlocks(NOW);
    expect(blocks).toEqual([expect.objectContaining({ scope: 'pair', address: '192.0.2.1', merchantId: 'm2', blockedUntil: NOW + 300 })]);
    expect(await store.activeBlocks(NOW + 300)).toEqual([]);
  });

  it('catches up on blocks made while it was cut off from Redis, and logs the outage and the recovery once each', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = { ...silentLogger, error: (fields: object) => void lines.push(fields as Record<string, unknown>), info: (fields: object) => void lines.push(fields as Record<string, unknown>) };
    const proxy = new TcpProxy('127.0.0.1', redis.port);
    await proxy.start();
    try {
      const a = await instance();
      const b = await instance({ api: { logger }, url: `redis://127.0.0.1:${proxy.port}` });
      const address = '203.0.113.9';
      await b.call('/merchant/users', basic('m1', 'first'), address);
      await vi.waitFor(() => expect(record(address, 'm1')).toMatch(/^failures\n1$/m), { timeout: 15_000, interval: 10 });
      // b loses Redis (its subscription too); meanwhile a blocks the pair; no message can reach b.
      await proxy.stop();
      for (let i = 0; i < 10; i++) await a.call('/merchant/users', basic('m1', `wrong-${i}`), address);
      await vi.waitFor(() => expect(record(address, 'm1')).toMatch(/^blockedUntil\n1700000300$/m), { timeout: 15_000, interval: 10 });
      expect((await b.call('/merchant/users', basic('m1', 'key-one'), address)).status).toBe(200);
      await proxy.start();
      // Subscribed again, b reads the blocks in force.
      await vi.waitFor(async () => expect((await b.call('/merchant/users', basic('m1', 'key-one'), address)).status).toBe(429), { timeout: 15_000, interval: 20 });
      // b may learn the outage only from a command that fails, and the recovery from one that answers:
      // an unknown merchant's failure from the address is one (the address itself is far from its
      // limit). Its command connection may still be reconnecting when the subscription is back (a
      // command then fails at once, with no offline queue), so failures are sent until one answers.
      await vi.waitFor(() => expect(lines.map((line) => line.event)).toContain('throttle_store_unavailable'), { timeout: 15_000 });
      await vi.waitFor(
        async () => {
          expect((await b.call('/merchant/users', basic('nobody', 'wrong'), address)).status).toBe(401);
          expect(lines.map((line) => line.event), JSON.stringify(lines)).toEqual(['throttle_store_unavailable', 'throttle_store_recovered']);
        },
        { timeout: 15_000, interval: 500 },
      );
    } finally {
      await proxy.stop();
    }
  }, 60_000);
});
