/**
 * The failed-authentication throttle shared between instances on MySQL
 * (docs/security.md#sharing-the-counters-on-mysql): two handlers, each on its own
 * MysqlStorage and pool, on one real MariaDB database; the SQL rules against
 * the local throttle's; pruning; MySQL cut off by a TCP proxy. And the sharing
 * layer against a store it controls: when it writes, and what it does when
 * the store fails or falls behind.
 */
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMerchantApi, type MerchantApiOptions } from '../../src/api.js';
import { StorageUnavailableError } from '../../src/errors.js';
import { silentLogger, type Logger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { createMysqlKysely, importSeed, MysqlStorage } from '../../src/storage/mysql/index.js';
import type { MysqlThrottleOptions } from '../../src/storage/mysql/throttle/throttle-store.js';
import { FailureThrottle } from '../../src/limits/throttle.js';
import { MAX_REPORTS_IN_FLIGHT, MAX_REPORTS_QUEUED } from '../../src/limits/throttle-sharing.js';
import type { ThrottleRecord, ThrottleStore, ThrottleStoreListener } from '../../src/storage/throttle-store.js';
import { basic, NOW, NOW_MS, ORIGIN, signedUrl } from '../support/api.js';
import { createTestDatabase, MYSQL_URL, mysqlAvailable, urlOf, type TestDatabase } from '../support/mysql.js';
import { CLI, RUNTIMES, startServer, type ServerProcess } from '../support/processes.js';
import { contractSeed } from '../support/seeds.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { assertStoreCountsAsTheLocalThrottle, assertStoreReservesAsTheModel } from '../support/throttle-store-rules.js';
import { recordingLogger } from '../support/recording.js';

const available = await mysqlAvailable();
const POLL_MS = 50;
/**
 * Waits until `one` refuses `merchant` from `address` (a block it made or read
 * from the others' changes). The probe names the merchant with an empty key:
 * a block in force refuses it first; until then it is a malformed 401, which
 * counts for the address alone and never for the merchant.
 */
async function untilRefused(one: { call(path: string, headers: Record<string, string>, address: string): Promise<Response> }, merchant: string, address: string): Promise<void> {
  await vi.waitFor(async () => expect((await one.call('/merchant/users', basic(merchant, ''), address)).status).toBe(429), { timeout: 10_000, interval: POLL_MS });
}

describe.skipIf(!available)('the throttle shared by two instances on MySQL', () => {
  let database: TestDatabase;
  const open: MysqlStorage[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, contractSeed());
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((storage) => storage.close()));
  });
  afterAll(async () => {
    await database?.drop();
  });

  /** One instance: its own pool and storage, the handler's clock fixed at NOW. */
  function instance(options: { sharing?: MysqlThrottleOptions; api?: Partial<MerchantApiOptions>; url?: string } = {}) {
    const db = createMysqlKysely(options.url ?? database.url, { connectTimeout: 1000, queryTimeout: 1000 });
    const storage = new MysqlStorage({ db, masterKey: database.masterKey, destroyOnClose: true, throttleSharing: { pollIntervalMs: POLL_MS, ...options.sharing } });
    open.push(storage);
    const api = createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, accessLog: false, tracing: false, ...options.api });
    const call = (path: string, headers: Record<string, string>, address: string) =>
      api.fetch(new Request(path.startsWith('http') ? path : `${ORIGIN}${path}`, { headers }), { clientAddress: address });
    return { storage, call };
  }

  /** A started TCP proxy to MariaDB, and this database's URL through it: a test cuts MySQL off by stopping it. */
  async function throughProxy(): Promise<{ proxy: TcpProxy; proxied: URL }> {
    const target = new URL(MYSQL_URL);
    const proxy = new TcpProxy(target.hostname, Number(target.port || 3306));
    await proxy.start();
    const proxied = new URL(urlOf(database.name));
    proxied.hostname = '127.0.0.1';
    proxied.port = String(proxy.port);
    return { proxy, proxied };
  }

  async function rows(address: string) {
    const { rows } = await sql<{ scope: string; merchant_id: string; failures: number; blocks: number; blocked_until: string }>`
      SELECT scope, merchant_id, failures, blocks, blocked_until FROM auth_failures WHERE address = ${address} ORDER BY scope, merchant_id`.execute(database.db);
    return rows.map((row) => ({ ...row, blocked_until: Number(row.blocked_until) }));
  }
  const pairRow = async (address: string, merchant = 'm1') => (await rows(address)).find((row) => row.scope === 'pair' && row.merchant_id === merchant);

  it('blocks a pair on both instances after 10 bad keys split across them', async () => {
    const [a, b] = [instance(), instance()];
    const address = '203.0.113.1';
    for (let i = 0; i < 9; i++) expect((await (i % 2 ? a : b).call('/merchant/users', basic('m1', `wrong-${i}`), address)).status).toBe(401);
    // Every write answered first: b can learn the block the tenth failure makes on a only by reading a's change.
    await vi.waitFor(async () => expect(await pairRow(address)).toMatchObject({ failures: 9 }));
    expect((await a.call('/merchant/users', basic('m1', 'wrong-9'), address)).status).toBe(401);
    await vi.waitFor(async () => expect(await pairRow(address)).toMatchObject({ failures: 0, blocks: 1, blocked_until: NOW + 300 }));
    await untilRefused(b, 'm1', address);
    for (const one of [a, b]) {
      const refused = await one.call('/merchant/users', basic('m1', 'key-one'), address);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('300');
    }
    expect((await a.call('/merchant/users', basic('m2', 'key-two'), address)).status).toBe(200);
  });

  it('keeps one row for an IPv6 /64, whichever of its addresses fails, and refuses the whole /64 on the other instance', async () => {
    const [a, b] = [instance(), instance()];
    for (let i = 0; i < 9; i++) expect((await (i % 2 ? a : b).call('/merchant/users', basic('m1', `wrong-${i}`), `2001:db8:7:7::${i + 1}`)).status).toBe(401);
    await vi.waitFor(async () => expect(await pairRow('2001:db8:7:7::/64')).toMatchObject({ failures: 9 }));
    expect((await a.call('/merchant/users', basic('m1', 'wrong-9'), '2001:db8:7:7:ffff::1')).status).toBe(401);
    await vi.waitFor(async () => expect(await pairRow('2001:db8:7:7::/64')).toMatchObject({ failures: 0, blocks: 1 }));
    const { rows: addresses } = await sql<{ address: string }>`SELECT DISTINCT address FROM auth_failures WHERE address LIKE '2001:db8:7:7:%'`.execute(database.db);
    expect(addresses).toEqual([{ address: '2001:db8:7:7::/64' }]);
    await untilRefused(b, 'm1', '2001:db8:7:7:abcd::99');
    expect((await b.call('/merchant/users', basic('m1', 'key-one'), '2001:db8:7:7:abcd::99')).status).toBe(429);
    expect((await b.call('/merchant/users', basic('m1', 'key-one'), '2001:db8:7:8::1')).status).toBe(200);
  });

  it('refuses on the other instance, even with the right key, a block made by one; and on an instance started later', async () => {
    const [a, b] = [instance(), instance()];
    const address = '203.0.113.2';
    for (let i = 0; i < 10; i++) await a.call(signedUrl({ key: 'wrong-key' }), {}, address);
    await vi.waitFor(async () => expect(await pairRow(address)).toMatchObject({ blocks: 1, blocked_until: NOW + 300 }));
    await untilRefused(b, 'm1', address);
    const right = await b.call(signedUrl(), {}, address);
    expect(right.status).toBe(429);
    expect(await right.json()).toMatchObject({ status: 'error', is_valid: false });
    // Started after the block, reading no changes for a minute: it reads the blocks in force at start.
    const later = instance({ sharing: { pollIntervalMs: 60_000 } });
    await untilRefused(later, 'm1', address);
    expect((await later.call('/merchant/users', basic('m1', 'key-one'), address)).status).toBe(429);
    expect(await pairRow(address)).toMatchObject({ failures: 0, blocks: 1 });
  });

  it('resets the count for both instances on a success on either', async () => {
    const [a, b] = [instance(), instance()];
    const address = '203.0.113.3';
    for (let i = 0; i < 9; i++) await a.call('/merchant/users', basic('m1', 'nope'), address);
    await vi.waitFor(async () => expect(await pairRow(address)).toMatchObject({ failures: 9 }));
    // b resets the pair in the store on a success once it has read a's failures (within its poll
    // interval): a success before that resets nothing (a write per success would cost every request one).
    await vi.waitFor(
      async () => {
        expect((await b.call('/merchant/users', basic('m1', 'key-one'), address)).status).toBe(200);
        expect(await pairRow(address)).toMatchObject({ failures: 0, blocks: 0 });
      },
      { timeout: 10_000, interval: POLL_MS },
    );
    // a may not have read the reset yet: the store's answer to its next failure carries it.
    for (let i = 0; i < 9; i++) expect((await a.call('/merchant/users', basic('m1', 'nope'), address)).status).toBe(401);
    await vi.waitFor(async () => expect(await pairRow(address)).toMatchObject({ failures: 9 }));
    expect((await a.call('/merchant/users', basic('m1', 'key-one'), address)).status).toBe(200);
    expect((await b.call('/merchant/users', basic('m1', 'key-one'), address)).status).toBe(200);
  });

  it('blocks an address on both instances after 100 failures split across them, and writes no row for an unknown merchant', async () => {
    const [a, b] = [instance(), instance()];
    // An IPv6 client, counted (and stored) by its /64.
    const address = '2001:db8:0:4::4';
    const network = '2001:db8:0:4::/64';
    for (let i = 0; i < 100; i++) {
      if (i === 99) await vi.waitFor(async () => expect((await rows(network))[0]).toMatchObject({ failures: 99 }));
      const response = await (i % 2 ? a : b).call(i % 3 ? '/merchant/users' : signedUrl({ cp: `invented-${i}` }), i % 3 ? basic(`invented-${i}`, 'x') : {}, address);
      expect(response.status).not.toBe(429);
    }
    await vi.waitFor(async () => expect(await rows(network)).toEqual([{ scope: 'address', merchant_id: '', failures: 0, blocks: 0, blocked_until: NOW + 3600 }]));
    for (const one of [a, b]) await untilRefused(one, 'm2', address);
    for (const one of [a, b]) {
      const refused = await one.call('/merchant/users', basic('m2', 'key-two'), address);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('3600');
    }
    expect((await b.call('/merchant/users', basic('m2', 'key-two'), '2001:db8:0:5::4')).status).toBe(200);
    const { rows: pairs } = await sql<{ merchant_id: string }>`SELECT DISTINCT merchant_id FROM auth_failures WHERE scope = 'pair'`.execute(database.db);
    expect(pairs.every((row) => ['m1', 'M1', 'm2', 'off'].includes(row.merchant_id))).toBe(true);
  });

  it('never loses a count of failures made at once on both instances', async () => {
    const limits = { pairFailures: 1000, addressFailures: 1000 };
    const [a, b] = [instance({ api: { throttle: limits } }), instance({ api: { throttle: limits } })];
    const address = '203.0.113.6';
    await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 ? a : b).call('/merchant/users', basic('m1', `bad-${i}`), address)));
    await vi.waitFor(async () => expect((await rows(address)).map((row) => row.failures)).toEqual([60, 60]), { timeout: 5000 });
    // And straight at the stores, over two pools, far more than the pool has connections.
    const rules = new FailureThrottle(limits).rules;
    const stores = [a.storage.throttleStore()!, b.storage.throttleStore()!];
    await Promise.all(Array.from({ length: 200 }, (_, i) => stores[i % 2]!.recordFailure({ address: '203.0.113.7', merchantId: 'm2', now: NOW }, rules)));
    expect((await rows('203.0.113.7')).map((row) => row.failures)).toEqual([200, 200]);
  });

  it('writes the SQL rules exactly as the local throttle counts, over random failures, successes and time', async () => {
    const store = instance().storage.throttleStore()!;
    await assertStoreCountsAsTheLocalThrottle(store, NOW);
  });

  it('reserves key checks exactly within what is left before the block, over random reservations, failures and releases', async () => {
    const store = instance().storage.throttleStore()!;
    await assertStoreReservesAsTheModel(store, NOW);
  });

  it('keeps rows only while they mean something, and prunes them in bounded batches', async () => {
    const a = instance();
    const store = a.storage.throttleStore()!;
    const rules = new FailureThrottle({ pairFailures: 1 }).rules;
    const addresses = Array.from({ length: 5 }, (_, i) => `192.0.2.${100 + i}`);
    for (const address of addresses) await store.recordFailure({ address, merchantId: 'm2', now: NOW }, rules);
    const { rows: kept } = await sql<{ scope: string; seconds: number }>`SELECT scope, TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), expires_at) AS seconds
      FROM auth_failures WHERE address = ${addresses[0]} ORDER BY scope`.execute(database.db);
    // The address row until its window ends; the pair row (blocked at once, pairFailures 1) a day after its last failure.
    expect(kept.map((row) => [row.scope, Math.round(Number(row.seconds) / 10) * 10])).toEqual([
      ['address', 3600],
      ['pair', 86_400],
    ]);
    await sql`UPDATE auth_failures SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE address IN (${sql.join(addresses.slice(0, 4))})`.execute(database.db);
    const small = instance({ sharing: { batchSize: 3, maxBatches: 2, pruneIntervalMs: 60_000 } }).storage.throttleStore()!;
    // At most batchSize x maxBatches rows a run. The instances of the earlier tests prune in the
    // background too (once a minute, which a slow run can reach), so the runs here may find fewer.
    // Rows of the earlier tests that live seconds (reservations, lifted blocks) may have ended too on a slow
    // run: the runs may take those as well, never a row that lives on (checked below by addresses[4]'s).
    const { rows: ending } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM auth_failures WHERE expires_at < UTC_TIMESTAMP(6) + INTERVAL 60 SECOND`.execute(database.db);
    // Until none of these rows is left, not until a run finds nothing: a run whose batch another instance's
    // prune took (this test's instances prune in the background too) deletes nothing and stops, the rest
    // left for its next interval.
    const expiredLeft = async () =>
      Number((await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM auth_failures WHERE address IN (${sql.join(addresses.slice(0, 4))})`.execute(database.db)).rows[0]!.n);
    const runs: number[] = [];
    do runs.push(await small.prune());
    while ((await expiredLeft()) > 0 && runs.length < 10);
    expect(runs.every((pruned) => pruned <= 6)).toBe(true);
    expect(runs.reduce((sum, pruned) => sum + pruned, 0)).toBeLessThanOrEqual(Number(ending[0]!.n));
    for (const address of addresses.slice(0, 4)) expect(await rows(address)).toEqual([]);
    expect(await rows(addresses[4]!)).toHaveLength(2);
    // In the background, by an instance that listens.
    await sql`UPDATE auth_failures SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE address = ${addresses[4]}`.execute(database.db);
    instance({ sharing: { pruneIntervalMs: 10 } });
    await vi.waitFor(async () => expect(await rows(addresses[4]!)).toEqual([]));
  });

  it('answers as before when MySQL is cut off during failures: the instance decides alone, logs once, and shares again when MySQL is back', async () => {
    const { proxy, proxied } = await throughProxy();
    const { logger, lines } = recordingLogger();
    const a = instance({ url: proxied.toString(), api: { logger } });
    const address = '203.0.113.9';
    try {
      // The merchants' keys are cached: authentication goes on without MySQL, the throttle's writes cannot.
      expect((await a.call('/merchant/users/a-001', basic('m1', 'key-one'), '192.0.2.1')).status).toBe(200);
      expect((await a.call('/merchant/users/a-001', basic('m2', 'key-two'), '192.0.2.1')).status).toBe(200);
      await proxy.stop();
      for (let i = 0; i < 10; i++) expect((await a.call('/merchant/users/a-001', basic('m1', 'wrong'), address)).status).toBe(401);
      expect((await a.call('/merchant/users/a-001', basic('m1', 'key-one'), address)).status).toBe(429);
      await vi.waitFor(() => expect(lines.some((line) => line.event === 'throttle_store_unavailable')).toBe(true));
      // Further writes fail as well (other addresses, so that the counts checked below stay as they are): still one line.
      for (let i = 0; i < 5; i++) expect((await a.call('/merchant/users/a-001', basic('m2', 'wrong'), `203.0.113.${20 + i}`)).status).toBe(401);
      // Under load this once held two lines (rare, not reproduced in isolation): the message names every throttle line, and their order, for the next time.
      const throttleLines = JSON.stringify(lines.filter((line) => String(line.event).startsWith('throttle_')).map(({ event, error, code }) => ({ event, error, code })));
      expect(lines.filter((line) => line.event === 'throttle_store_unavailable'), throttleLines).toEqual([expect.objectContaining({ level: 'error', error: 'StorageUnavailableError' })]);
      expect(await rows(address)).toEqual([]);
      await proxy.start();
      await vi.waitFor(() => expect(lines.some((line) => line.event === 'throttle_store_recovered')).toBe(true), { timeout: 5000 });
      expect((await a.call('/merchant/users/a-001', basic('m2', 'wrong'), address)).status).toBe(401);
      await vi.waitFor(async () => expect(await pairRow(address, 'm2')).toMatchObject({ failures: 1 }));
    } finally {
      await proxy.stop();
    }
  });

  it('closes cleanly when MySQL resets a throttle write under way: the storage waits for it, and never rejects with a raw driver error', async () => {
    // Found under load: the test above may end (and reset the proxy) while its last failure's census
    // admission still runs; the pool's end then queued a QUIT behind it, which got the raw ECONNRESET.
    const { proxy, proxied } = await throughProxy();
    const a = instance({ url: proxied.toString(), sharing: { pollIntervalMs: 60_000 } });
    const store = a.storage.throttleStore()!;
    const rules = new FailureThrottle({}).rules;
    try {
      // A connection open through the proxy, idle in the pool for the write below.
      await store.recordFailure({ address: '203.0.113.30', merchantId: 'm1', now: NOW }, rules);
      proxy.hang();
      const write = store.recordFailure({ address: '203.0.113.31', merchantId: 'm1', now: NOW }, rules).then(() => 'answered', (error: unknown) => error);
      // On the wire (the proxy drops it): the pool's end now finds the statement running on its connection.
      await vi.waitFor(() => expect(proxy.droppedBytes).toBeGreaterThan(0));
      const closing = a.storage.close().then(() => 'closed', (error: unknown) => error);
      // Everything close() does without waiting on MySQL has run (without the wait, the pool's end was asked for).
      await new Promise((resolve) => setImmediate(resolve));
      await proxy.stop();
      expect(await write).toBeInstanceOf(StorageUnavailableError);
      expect(await closing).toBe('closed');
    } finally {
      await proxy.stop();
    }
  });
});

describe.skipIf(!available)('two servers on MySQL share blocks, on every runtime', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, { merchants: RUNTIMES.map((runtime) => ({ id: `${runtime}-shop`, status: 'active' as const, keys: [`${runtime}-key`] })), users: [] });
  });
  afterAll(async () => {
    await database?.drop();
  });

  for (const runtime of RUNTIMES) {
    it(`on ${runtime}: 10 bad keys split across two servers block the merchant on both; both stop cleanly`, async () => {
      const env = { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText, ACCESS_LOG: 'false' };
      const servers: ServerProcess[] = [];
      try {
        servers.push(await startServer(runtime, CLI[runtime], env), await startServer(runtime, CLI[runtime], env));
        const users = (server: ServerProcess, key: string) => fetch(`${server.url}/merchant/users`, { headers: basic(`${runtime}-shop`, key) });
        const failures = async () =>
          (await sql<{ failures: number }>`SELECT failures FROM auth_failures WHERE scope = 'pair' AND merchant_id = ${`${runtime}-shop`}`.execute(database.db)).rows[0]?.failures;
        for (let i = 0; i < 9; i++) expect((await users(servers[i % 2]!, 'wrong')).status).toBe(401);
        // The first server's writes are in: it can learn the block the tenth failure makes on the second only by reading it.
        await vi.waitFor(async () => expect(await failures()).toBe(9), { timeout: 10_000 });
        expect((await users(servers[1]!, 'wrong')).status).toBe(401);
        // Each server reads the others' changes once a second; the probe (an empty key) counts for the address alone.
        for (const server of servers) {
          await vi.waitFor(async () => expect((await users(server, '')).status).toBe(429), { timeout: 10_000, interval: 100 });
          expect((await users(server, `${runtime}-key`)).status).toBe(429);
        }
      } finally {
        const codes = await Promise.all(servers.map((server) => server.stop()));
        expect(codes).toEqual(servers.map(() => 0));
      }
    }, 60_000);
  }
});

/** A store the test answers by hand, recording what it is asked. */
function fakeStore() {
  const calls: string[] = [];
  const pending: { resolve: (records: ThrottleRecord[]) => void; reject: (error: Error) => void }[] = [];
  let listener: ThrottleStoreListener | undefined;
  const ask = (name: string) => {
    calls.push(name);
    return new Promise<ThrottleRecord[]>((resolve, reject) => pending.push({ resolve, reject }));
  };
  const store: ThrottleStore = {
    recordFailure: (failure) => ask(`failure ${failure.merchantId ?? '-'}`),
    resetPair: (_address, merchantId) => ask(`reset ${merchantId}`),
    activeBlocks: async () => [],
    subscribe(given) {
      listener = given;
      return () => undefined;
    },
  };
  return { store, calls, pending, listener: () => listener! };
}

describe('the sharing layer, against a store it cannot see into', () => {
  function sharedApi(store: ThrottleStore, logger: Logger = silentLogger) {
    const storage = Object.assign(new MemoryStorage(contractSeed()), { throttleStore: () => store });
    const api = createMerchantApi({ storage, now: () => NOW_MS, logger, accessLog: false, tracing: false });
    return (headers: Record<string, string>, address = '203.0.113.20') => api.fetch(new Request(`${ORIGIN}/merchant/users`, { headers }), { clientAddress: address });
  }

  it('writes on failures, and on a success only when a count for its pair may exist', async () => {
    const { store, calls, pending } = fakeStore();
    const call = sharedApi(store);
    await call(basic('m1', 'key-one'));
    expect(calls).toEqual([]);
    await call(basic('m1', 'nope'));
    await call(basic('ghost', 'nope'));
    await call(basic('m1', 'key-one'));
    await call(basic('m1', 'key-one'));
    expect(calls).toEqual(['failure m1', 'failure -', 'reset m1']);
    for (const p of pending) p.resolve([]);
  });

  it('learns a block another instance made, and lifts a block counted here alone when its own write says otherwise', async () => {
    const { store, pending, listener } = fakeStore();
    const call = sharedApi(store);
    const record = (fields: Partial<ThrottleRecord>): ThrottleRecord => ({
      scope: 'pair', address: '203.0.113.20', merchantId: 'm1', failures: 0, windowStart: NOW, blocks: 0, blockedUntil: 0, version: '2030-01-01 00:00:00.000001', ...fields,
    });
    listener().learn([record({ blocks: 1, blockedUntil: NOW + 300 })]);
    expect((await call(basic('m1', 'key-one'))).status).toBe(429);
    // An older copy changes nothing; a newer one from elsewhere never shortens a block here.
    listener().learn([record({ blockedUntil: 0, version: '2030-01-01 00:00:00.000000' }), record({ blockedUntil: NOW + 10, version: '2030-01-01 00:00:00.000002' })]);
    expect((await call(basic('m1', 'key-one'))).headers.get('retry-after')).toBe('300');
    // m2: nine failures learned, then a success elsewhere this instance has not heard of; the tenth here blocks...
    listener().learn([record({ merchantId: 'm2', failures: 9, version: '2030-01-01 00:00:00.000003' })]);
    await call(basic('m2', 'nope'));
    expect((await call(basic('m2', 'key-two'))).status).toBe(429);
    // ...until its own write answers: one failure since the reset.
    pending.at(-1)!.resolve([record({ merchantId: 'm2', failures: 1, version: '2030-01-01 00:00:00.000004' })]);
    await vi.waitFor(async () => expect((await call(basic('m2', 'key-two'))).status).toBe(200));
  });

  it('lifts a block counted here alone when the poll read the same row before its own write answered', async () => {
    const { store, pending, listener } = fakeStore();
    const call = sharedApi(store);
    const record = (fields: Partial<ThrottleRecord>): ThrottleRecord => ({
      scope: 'pair', address: '203.0.113.20', merchantId: 'm1', failures: 0, windowStart: NOW, blocks: 0, blockedUntil: 0, version: '2030-01-01 00:00:00.000001', ...fields,
    });
    // Nine failures learned; a success elsewhere reset them; the tenth here blocks this instance alone.
    listener().learn([record({ failures: 9 })]);
    const tenth = call(basic('m1', 'nope'));
    await vi.waitFor(() => expect(pending).toHaveLength(1));
    // The poll reads the row this failure wrote (one failure since the reset) before the write's own answer
    // arrives: a copy from a poll keeps the block counted here...
    const afterReset = record({ failures: 1, version: '2030-01-01 00:00:00.000003' });
    listener().learn([afterReset]);
    // ...and the write's answer, the same version, is what lifts it (it was once skipped as "not newer").
    pending.at(-1)!.resolve([afterReset]);
    expect((await tenth).status).toBe(401);
    expect((await call(basic('m1', 'key-one'))).status).toBe(200);
  });

  it('answers the same when the store fails, and logs that once', async () => {
    const { store, pending } = fakeStore();
    const { logger, lines } = recordingLogger();
    const call = sharedApi(store, logger);
    for (let i = 0; i < 10; i++) {
      expect((await call(basic('m1', 'nope'))).status).toBe(401);
      pending.shift()!.reject(new Error('connection refused'));
    }
    expect((await call(basic('m1', 'key-one'))).status).toBe(429);
    await vi.waitFor(() => expect(lines.filter((line) => line.event === 'throttle_store_unavailable')).toHaveLength(1));
  });

  it('holds a bounded number of writes when the store stops answering', async () => {
    const { store, calls } = fakeStore();
    const { logger, lines } = recordingLogger();
    const call = sharedApi(store, logger);
    for (let i = 0; i < MAX_REPORTS_IN_FLIGHT + MAX_REPORTS_QUEUED + 50; i++) await call(basic('ghost', 'nope'), `10.1.${i >> 8}.${i & 255}`);
    expect(calls).toHaveLength(MAX_REPORTS_IN_FLIGHT);
    expect(lines.filter((line) => line.event === 'throttle_store_behind')).toHaveLength(1);
  });
});
