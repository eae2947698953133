/**
 * The throttle's rows in MySQL (`auth_failures`) are bounded whatever the number of attacking
 * addresses (issue 34 §2, docs/scaling.md#the-throttles-keys), as its keys on Redis are. The
 * attack as found, scaled down: wrong Basic keys from many IPv6 /64s naming the existing merchants,
 * on the real MariaDB. Without the census every /64 left a row for itself and one per merchant
 * named (900 rows here, 12,000 for the 3,000 /64s of the issue, each kept a day); with it the table
 * holds at most `maxEntries` of them, a full census degrades the throttle to per-process counting
 * (`throttle_full`, `merchant_api_throttle_full_total`), and signed requests keep validating.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../../src/api.js';
import { silentLogger, type Logger } from '../../../src/observe/logger.js';
import { createMysqlKysely, importSeed, MysqlStorage } from '../../../src/storage/mysql/index.js';
import { censusHeld } from '../../../src/storage/mysql/throttle/throttle-queries.js';
import type { MysqlThrottleStore } from '../../../src/storage/mysql/throttle/throttle-store.js';
import { throttleFullCount } from '../../../src/storage/throttle-store.js';
import { DEFAULTS } from '../../../src/defaults.js';
import { basic, NOW, NOW_MS, ORIGIN, signedUrl } from '../../support/api.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../../support/mysql.js';
import { contractSeed } from '../../support/seeds.js';

const available = await mysqlAvailable();
const CAP = 160;
const NETWORKS = 300;
const BATCH = 4;
const MERCHANTS = ['m1', 'm2', 'gone-key'];

describe.skipIf(!available)('the throttle rows on MySQL, bounded whatever the number of attackers', () => {
  let database: TestDatabase;
  let storage: MysqlStorage;

  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, contractSeed());
  });
  afterAll(async () => {
    await storage?.close();
    await database?.drop();
  });

  const count = async (where = sql`1 = 1`) => Number((await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM auth_failures WHERE ${where}`.execute(database.db)).rows[0]!.n);

  it('keeps at most maxEntries rows through failures from many /64s, degrades to counting per process, and signed requests validate', async () => {
    const events: Record<string, unknown>[] = [];
    const logger: Logger = { ...silentLogger, warn: (fields: object) => void events.push(fields as Record<string, unknown>) };
    storage = new MysqlStorage({ db: createMysqlKysely(database.url), masterKey: database.masterKey, destroyOnClose: true, throttleSharing: { pollIntervalMs: 200 } });
    const api = createMerchantApi({ storage, now: () => NOW_MS, logger, accessLog: false, tracing: false, throttle: { maxEntries: CAP } });
    const call = (path: string, headers: Record<string, string>, address: string) => api.fetch(new Request(path.startsWith('http') ? path : `${ORIGIN}${path}`, { headers }), { clientAddress: address });
    const fullBefore = throttleFullCount();

    const jobs: (() => Promise<number>)[] = [];
    for (let n = 0; n < NETWORKS; n++) {
      // One failure per merchant named, each from another address of the /64 (one row for all: address-key.ts).
      MERCHANTS.forEach((merchant, i) => jobs.push(async () => (await call('/merchant/users', basic(merchant, `wrong-${n}`), `2001:db8:0:${n.toString(16)}::${i + 1}`)).status));
    }
    const statuses: Record<number, number> = {};
    for (let i = 0; i < jobs.length; i += BATCH) {
      for (const status of await Promise.all(jobs.slice(i, i + BATCH).map((job) => job()))) statuses[status] = (statuses[status] ?? 0) + 1;
    }
    expect(statuses).toEqual({ 401: NETWORKS * MERCHANTS.length });

    // At most the cap, and near it (16 stripes drawn at random fill unevenly); the census counts exactly the rows it admitted.
    const rows = await count();
    expect(rows).toBeLessThanOrEqual(CAP);
    expect(rows).toBeGreaterThan(CAP / 2);
    expect(await censusHeld(database.db)).toBe(await count(sql`census_stripe IS NOT NULL`));
    expect(throttleFullCount() - fullBefore).toBeGreaterThan(0);
    expect(events.filter((e) => e.event === 'throttle_full')).toEqual([expect.objectContaining({ event: 'throttle_full', cap: CAP })]);

    // Signed requests validate; salts are never what a full throttle degrades.
    for (let i = 0; i < 20; i++) expect((await call(signedUrl({ ts: NOW }), {}, `198.51.100.${i + 1}`)).status).toBe(200);
    // A new address is still throttled, by an instance alone (one that starts now: this one's own table is as full as the store): 10 wrong keys, then 429 even with the right one.
    const other = createMerchantApi({ storage, now: () => NOW_MS, logger, accessLog: false, tracing: false, throttle: { maxEntries: CAP } });
    const otherCall = (path: string, headers: Record<string, string>, address: string) => other.fetch(new Request(`${ORIGIN}${path}`, { headers }), { clientAddress: address });
    for (let i = 0; i < 10; i++) expect((await otherCall('/merchant/users', basic('m1', `wrong-new-${i}`), '203.0.113.77')).status).toBe(401);
    expect((await otherCall('/merchant/users', basic('m1', 'key-one'), '203.0.113.77')).status).toBe(429);
    expect(await count(sql`address = '203.0.113.77' AND census_stripe IS NOT NULL`)).toBeLessThanOrEqual(2);
    expect(await count()).toBeLessThanOrEqual(CAP);
  }, 180_000);

  it('gives the rows the pruning deletes back to their stripes, and the room to new addresses', async () => {
    await sql`UPDATE auth_failures SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE census_stripe IS NOT NULL`.execute(database.db);
    const store = storage.throttleStore() as MysqlThrottleStore;
    expect(await store.prune()).toBeGreaterThan(CAP / 2);
    expect(await censusHeld(database.db)).toBe(await count(sql`census_stripe IS NOT NULL`));
    expect(await censusHeld(database.db)).toBe(0);
    const rules = { ...DEFAULTS.throttle, maxEntries: CAP };
    await store.recordFailure({ address: '192.0.2.200', merchantId: 'm1', now: NOW }, rules);
    expect(await count(sql`address = '192.0.2.200' AND census_stripe IS NOT NULL`)).toBe(2);
    expect(await censusHeld(database.db)).toBe(2);
  });
});
