/**
 * Ten key checks, even all at once (docs/security.md#throttling): a burst of
 * wrong keys for one merchant from one address, every request sent before
 * any is answered, gets at most 10 comparisons (answers other than 429),
 * whatever the storage (memory, MySQL, Redis far away) and however many
 * processes count together: each check is reserved in the shared store before
 * its key is compared (seen failing before: 20 of 50 with two instances). The
 * same for the per-address limit (set to 5 here, below the pair's 10). A
 * merchant's own burst of right keys is never refused for being a burst.
 */
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi, type MerchantApiOptions } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import type { Storage } from '../../src/storage/contract.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { importSeed, MysqlStorage, createMysqlKysely } from '../../src/storage/mysql/index.js';
import { createRedisConnection, withRedisState } from '../../src/storage/redis/index.js';
import { basic, NOW_MS, ORIGIN, signedUrl } from '../support/api.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { redisAvailable, useRedis } from '../support/redis.js';
import { contractSeed } from '../support/seeds.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const BURST = 50;

/** The answers' statuses counted, e.g. `{ 401: 10, 429: 40 }`. */
async function statuses(answers: Promise<Response>[]): Promise<Record<number, number>> {
  const counts: Record<number, number> = {};
  for (const answer of await Promise.all(answers)) {
    counts[answer.status] = (counts[answer.status] ?? 0) + 1;
    await answer.body?.cancel();
  }
  return counts;
}

const checked = (counts: Record<number, number>) => Object.entries(counts).filter(([status]) => status !== '429').reduce((sum, [, n]) => sum + n, 0);

/** One instance over `storage`, its clock fixed. */
function instance(storage: Storage, options: Partial<MerchantApiOptions> = {}) {
  const api = createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, accessLog: false, tracing: false, ...options });
  return (url: string, headers: Record<string, string>, address: string) => api.fetch(new Request(url.startsWith('http') ? url : `${ORIGIN}${url}`, { headers }), { clientAddress: address });
}

type Call = ReturnType<typeof instance>;

/**
 * The bursts every shape must pass; `instances` are the processes, the requests spread across
 * them in turn. `processes`: how many count apart (each gets the limit); 1 wherever they share a store.
 */
function bursts(name: string, instances: (options?: Partial<MerchantApiOptions>) => Promise<Call[]>, processes = 1) {
  describe(name, () => {
    it(`checks at most ${10 * processes} of ${BURST} wrong Basic keys sent at once for one merchant from one address`, async () => {
      const calls = await instances();
      const counts = await statuses(Array.from({ length: BURST }, (_, i) => calls[i % calls.length]!('/merchant/users', basic('m1', `wrong-${i}`), '203.0.113.50')));
      expect(checked(counts)).toBeLessThanOrEqual(10 * processes);
      expect(counts[401]).toBeGreaterThanOrEqual(1);
    });

    it(`checks at most ${10 * processes} of 30 bad signatures sent at once`, async () => {
      const calls = await instances();
      const counts = await statuses(Array.from({ length: 30 }, (_, i) => calls[i % calls.length]!(signedUrl({ key: 'not-the-key' }), {}, '203.0.113.51')));
      expect(checked(counts)).toBeLessThanOrEqual(10 * processes);
      expect(checked(counts)).toBeGreaterThanOrEqual(1);
    });

    it(`checks at most ${5 * processes} of a burst naming many merchants from one address (the address limit of 5)`, async () => {
      const calls = await instances({ throttle: { addressFailures: 5 } });
      const counts = await statuses(Array.from({ length: 40 }, (_, i) => calls[i % calls.length]!('/merchant/users', basic(`nobody-${i}`, 'wrong'), '203.0.113.52')));
      expect(checked(counts)).toBeLessThanOrEqual(5 * processes);
    });

    it(`answers a merchant's own burst of ${BURST} right keys from one address, none refused`, async () => {
      const calls = await instances();
      const counts = await statuses(Array.from({ length: BURST }, (_, i) => calls[i % calls.length]!('/merchant/users/a-001', basic('m1', 'key-one'), '203.0.113.53')));
      expect(counts).toEqual({ 200: BURST });
    });
  });
}

bursts('on the memory storage', async (options) => [instance(new MemoryStorage(contractSeed()), options)]);

describe.skipIf(!(await mysqlAvailable()))('on MySQL', () => {
  let database: TestDatabase;
  const open: MysqlStorage[] = [];
  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, contractSeed());
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((storage) => storage.close()));
    await sql`DELETE FROM auth_failures`.execute(database.db);
  });
  afterAll(async () => database?.drop());
  const mysql = (options?: Partial<MerchantApiOptions>) => {
    const storage = new MysqlStorage({ db: createMysqlKysely(database.url), masterKey: database.masterKey, destroyOnClose: true, throttleSharing: { pollIntervalMs: 50 } });
    open.push(storage);
    return instance(storage, options);
  };
  bursts('one instance', async (options) => [mysql(options)]);
  bursts('two instances on one database', async (options) => [mysql(options), mysql(options)]);
});

describe.skipIf(!redisAvailable())('on Redis 40 ms away (an 80 ms round trip)', () => {
  const redis = useRedis({ flushAfterEach: true });
  const proxies: TcpProxy[] = [];
  const closing: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await Promise.all(closing.splice(0).map((close) => close()));
    await Promise.all(proxies.splice(0).map((proxy) => proxy.stop()));
  });
  const far = async (options?: Partial<MerchantApiOptions>) => {
    const proxy = new TcpProxy('127.0.0.1', redis.port, 40);
    await proxy.start();
    proxies.push(proxy);
    const storage = withRedisState(new MemoryStorage(contractSeed()), createRedisConnection(`redis://127.0.0.1:${proxy.port}`), { closeConnection: true, expiryMarginSeconds: 0 });
    closing.push(() => storage.close());
    return instance(storage, options);
  };
  bursts('one instance', async (options) => [await far(options)]);
  bursts('two instances', async (options) => [await far(options), await far(options)]);
});

/**
 * What the reservation costs a merchant (docs/security.md#ten-checks-even-all-at-once): once a
 * merchant succeeded from an address, its parallel calls from there reserve nothing (no script
 * call on Redis); a failure of that pair ends it, and the next burst reserves again.
 */
describe.skipIf(!redisAvailable())('the reservation and a merchant\'s own parallel calls, on Redis', () => {
  const redis = useRedis({ flushAfterEach: true });
  const closing: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await Promise.all(closing.splice(0).map((close) => close()));
  });
  const scriptCalls = () => Number(/cmdstat_evalsha:calls=(\d+)/.exec(redis.cli('info', 'commandstats'))?.[1] ?? 0) + Number(/cmdstat_eval:calls=(\d+)/.exec(redis.cli('info', 'commandstats'))?.[1] ?? 0);

  it('makes no Redis call for 32 parallel right keys after a success, and reserves again after a failure', async () => {
    const storage = withRedisState(new MemoryStorage(contractSeed()), createRedisConnection(redis.url), { closeConnection: true });
    closing.push(() => storage.close());
    const call = instance(storage);
    const parallel = () => statuses(Array.from({ length: 32 }, () => call('/merchant/users/a-001', basic('m1', 'key-one'), '203.0.113.60')));
    expect(await statuses([call('/merchant/users/a-001', basic('m1', 'key-one'), '203.0.113.60')])).toEqual({ 200: 1 });
    const before = scriptCalls();
    expect(await parallel()).toEqual({ 200: 32 });
    expect(scriptCalls() - before).toBe(0);
    expect(await statuses([call('/merchant/users/a-001', basic('m1', 'wrong'), '203.0.113.60')])).toEqual({ 401: 1 });
    const afterFailure = scriptCalls();
    expect(await parallel()).toEqual({ 200: 32 });
    expect(scriptCalls() - afterFailure).toBeGreaterThan(0);
  });
});
