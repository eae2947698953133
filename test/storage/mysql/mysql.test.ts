/**
 * The storage contract on real MariaDB, plus what only MySQL can get wrong:
 * truncated microseconds, lost emoji, collations, races between instances,
 * keys in plain text, stale key caches, unbounded salt tables.
 */
import { CompiledQuery, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { StorageUnavailableError } from '../../../src/errors.js';
import {
  addMerchant,
  createMysqlKysely,
  createMigrator,
  generateMasterKey,
  importSeed,
  listWebhookDeliveries,
  MasterKeyError,
  migrateToLatest,
  MysqlStorage,
  parseMasterKey,
  parseMysqlUrl,
  rotateMerchantKey,
  sealApiKey,
  setMerchantStatus,
} from '../../../src/storage/mysql/index.js';
import { MerchantCache } from '../../../src/storage/sql/merchant-cache.js';
import { selectUserPage } from '../../../src/storage/mysql/statements/user-queries.js';
import { toSqlDatetime } from '../../../src/storage/mysql/sql-values.js';
import type { UserPageQuery } from '../../../src/storage/contract.js';
import { storageContract } from '../../suites/storage-contract.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../../support/mysql.js';
import { user } from '../../support/seeds.js';
import { sleep } from '../../support/sleep.js';

const available = await mysqlAvailable();
const now = 1_700_000_000;

describe.skipIf(!available)('MySQL storage', () => {
  storageContract('mysql', async (seed, plan) => {
    const database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, seed);
    // The import stamps its own time; a seed's updated_at is set as given, as the memory storage
    // keeps it: how the contract puts stamps ahead of the clock, where a clock set back leaves them.
    for (const { merchant_id, shared_user_id, updated_at } of seed.users) {
      if (updated_at !== undefined) await database.db.updateTable('user_shares').set({ updated_at: toSqlDatetime(updated_at) }).where('merchant_id', '=', merchant_id).where('shared_user_id', '=', shared_user_id).execute();
    }
    return {
      storage: new MysqlStorage({ db: database.db, masterKey: database.masterKey, pagePlan: plan }),
      cleanup: database.drop,
      add: async (more) => void (await importSeed(database.db, database.masterKey, more)),
      listWebhookDeliveries: (options) => listWebhookDeliveries(database.db, options),
      // A second share of the same users row.
      share: async (from, to) => {
        const row = await database.db.selectFrom('user_shares').selectAll().where('merchant_id', '=', from.merchantId).where('shared_user_id', '=', from.sharedUserId).executeTakeFirstOrThrow();
        await database.db.insertInto('user_shares').values({ ...row, user_id: String(row.user_id), merchant_id: to.merchantId, shared_user_id: to.sharedUserId }).execute();
      },
    };
  });

  describe('MySQL specifics', () => {
    let database: TestDatabase;
    let storage: MysqlStorage;

    beforeAll(async () => {
      database = await createTestDatabase();
      await importSeed(database.db, database.masterKey, {
        merchants: [
          { id: 'shop', status: 'active', keys: ['shop-secret-key-1'] },
          { id: 'other', status: 'active', keys: ['other-secret-key-2'] },
          { id: '店-🛒', status: 'active', keys: ['unicode-merchant-key-3'] },
        ],
        users: [],
      });
      storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey, keyCacheTtlMs: 0 });
    });
    afterAll(async () => {
      await storage?.close();
      await database?.drop();
    });

    it('states its pool size, so that one merchant is given at most half of it', () => {
      expect(storage.concurrency).toBe(10);
      expect(new MysqlStorage({ db: database.db, masterKey: database.masterKey, poolSize: 4 }).concurrency).toBe(4);
    });

    it('keeps every microsecond, from year 1 to 9999', async () => {
      const stamps = ['0001-01-01T00:00:00.000000+00:00', '1999-12-31T23:59:59.999999+00:00', '2019-12-12T12:19:17.193961+00:00', '2038-01-19T03:14:08.000001+00:00', '9999-12-31T23:59:59.999999+00:00'];
      await importSeed(database.db, database.masterKey, {
        merchants: [],
        users: stamps.map((stamp, i) => user('shop', `time-${i}`, { date_joined: stamp, deactivated_at: stamp, agreed_to_terms_and_conditions: stamp, agreed_to_marketing: stamp })),
      });
      for (const [i, stamp] of stamps.entries()) {
        expect(await storage.getUser('shop', `time-${i}`)).toMatchObject({ date_joined: stamp, deactivated_at: stamp, agreed_to_terms_and_conditions: stamp, agreed_to_marketing: stamp });
      }
      const page = await storage.listUsers({ merchantId: 'shop', filter: { joinedAfter: stamps[1], joinedBefore: stamps[3] }, after: 'time-', limit: 10 });
      expect(page.map((u) => u.date_joined)).toEqual([stamps[2]]);
    });

    it('keeps emoji, CJK and combining marks in every text field and id', async () => {
      const text = '😀 東京 ﬁ é (e\u0301) 𝄞 한국어';
      const record = user('店-🛒', `${text}-id`, { first_name: text, last_name: text, street: text, city: text, state: text, email_address: `${text}@例え.jp` });
      await importSeed(database.db, database.masterKey, { merchants: [], users: [record] });
      const { merchant_id: _, ...expected } = record;
      expect(await storage.getUser('店-🛒', `${text}-id`)).toEqual(expected);
      expect((await storage.getMerchant('店-🛒'))!.keys).toEqual(['unicode-merchant-key-3']);
      // A decomposed é is a different id from the composed one (binary collation, no normalisation).
      expect(await storage.getUser('店-🛒', `${text.replace('(e\u0301)', '(é)')}-id`)).toBeUndefined();
    });

    it('shows one person shared with two merchants under each merchant\'s own id', async () => {
      const inserted = await database.db.insertInto('users').values({ ...columnsOf(user('x', 'x', { first_name: 'Grace' })) }).executeTakeFirstOrThrow();
      const id = String(inserted.insertId);
      const joined = sqlTime(user('x', 'x').date_joined);
      await database.db.insertInto('user_shares').values([
        { merchant_id: 'shop', shared_user_id: 'grace-at-shop', user_id: id, is_active: 1, date_joined: joined },
        { merchant_id: 'other', shared_user_id: 'g-7', user_id: id, is_active: 1, date_joined: joined },
      ]).execute();
      expect(await storage.getUser('shop', 'grace-at-shop')).toMatchObject({ shared_user_id: 'grace-at-shop', first_name: 'Grace' });
      expect(await storage.getUser('other', 'g-7')).toMatchObject({ shared_user_id: 'g-7', first_name: 'Grace' });
      expect(await storage.getUser('shop', 'g-7')).toBeUndefined();
      expect(await storage.getUser('other', 'grace-at-shop')).toBeUndefined();
      // Importing the person through one share updates the one record both merchants see.
      await importSeed(database.db, database.masterKey, { merchants: [], users: [user('shop', 'grace-at-shop', { first_name: 'Grace H.' })] });
      expect((await storage.getUser('other', 'g-7'))!.first_name).toBe('Grace H.');
      expect(await database.db.selectFrom('users').select('id').where('first_name', 'like', 'Grace%').execute()).toHaveLength(1);
      // ... and the filter columns of both shares follow the person.
      const deactivated = '2024-05-06T07:08:09.000010+00:00';
      await importSeed(database.db, database.masterKey, { merchants: [], users: [user('shop', 'grace-at-shop', { first_name: 'Grace H.', deactivated_at: deactivated, date_joined: deactivated })] });
      const shares = await database.db.selectFrom('user_shares').select(['merchant_id', 'is_active', 'date_joined']).where('user_id', '=', id).orderBy('merchant_id').execute();
      expect(shares).toEqual([
        { merchant_id: 'other', is_active: 0, date_joined: sqlTime(deactivated) },
        { merchant_id: 'shop', is_active: 0, date_joined: sqlTime(deactivated) },
      ]);
      expect((await storage.listUsers({ merchantId: 'other', filter: { active: false }, limit: 10 })).map((u) => u.shared_user_id)).toEqual(['g-7']);
    });

    it('lets exactly one of two instances (two pools) win each salt, also when taking over an expired one', async () => {
      const other = createMysqlKysely(database.url);
      const second = new MysqlStorage({ db: other, masterKey: database.masterKey, destroyOnClose: true });
      try {
        for (let trial = 0; trial < 300; trial++) {
          const record = { merchantId: 'shop', salt: `two-pools-${trial}`, expiresAt: now + 300, now };
          if (trial % 3 === 0) await database.db.insertInto('used_salts').values({ merchant_id: 'shop', salt: record.salt, expires_at: '2000-01-01 00:00:00.000000' }).execute();
          const results = await Promise.all([storage.recordSalt(record), second.recordSalt(record), storage.recordSalt(record), second.recordSalt(record)]);
          expect(results.filter(Boolean), `trial ${trial}`).toHaveLength(1);
        }
      } finally {
        await second.close();
      }
    });

    it('accepts salts longer than 128 characters whole, never cut', async () => {
      const long = 'L'.repeat(300);
      expect(await storage.recordSalt({ merchantId: 'shop', salt: long, expiresAt: now + 300, now })).toBe(true);
      expect(await storage.recordSalt({ merchantId: 'shop', salt: `${long}x`, expiresAt: now + 300, now })).toBe(true);
      expect(await storage.recordSalt({ merchantId: 'shop', salt: long, expiresAt: now + 300, now })).toBe(false);
      expect(await storage.recordSalt({ merchantId: 'shop', salt: long.slice(0, 128), expiresAt: now + 300, now })).toBe(true);
    });

    it('answers new unknown ids from its list of merchant ids, without a query, and knows a merchant added meanwhile within the TTL', async () => {
      let queries = 0;
      const counted = database.db.withPlugin({
        transformQuery: (args) => {
          queries++;
          return args.node;
        },
        transformResult: async (args) => args.result,
      });
      const listed = new MysqlStorage({ db: counted, masterKey: database.masterKey, keyCacheTtlMs: 500 });
      expect(await listed.getMerchant('guess-first')).toBeUndefined();
      // The list of ids is read in the background after the first miss: once it is in, a miss asks nothing.
      await vi.waitFor(async () => {
        const before = queries;
        expect(await listed.getMerchant('guess-probe')).toBeUndefined();
        expect(queries).toBe(before);
      });
      const afterFirst = queries;
      for (let i = 0; i < 1000; i++) expect(await listed.getMerchant(`guess-${i}`)).toBeUndefined();
      expect(queries - afterFirst).toBe(0);
      expect((await listed.getMerchant('shop'))!.keys).toEqual(['shop-secret-key-1']);
      expect(await listed.getMerchant('店-🛒')).toMatchObject({ id: '店-🛒' });

      // Added by another process: unknown until the list is read again, within the TTL.
      await importSeed(database.db, database.masterKey, { merchants: [{ id: 'listed-later', status: 'active', keys: ['listed-later-key'] }], users: [] });
      await vi.waitFor(async () => expect((await listed.getMerchant('listed-later'))?.keys).toEqual(['listed-later-key']), { timeout: 10_000, interval: 20 });
      await listed.close();
    });

    it('answers ids longer than any stored one as absent', async () => {
      expect(await storage.getMerchant('m'.repeat(129))).toBeUndefined();
      expect(await storage.getUser('shop', 'u'.repeat(129))).toBeUndefined();
      expect(await storage.listUsers({ merchantId: 'm'.repeat(129), filter: {}, limit: 5 })).toEqual([]);
    });

    it('stores no API key in plain text or any plain encoding, in any table', async () => {
      const added = await addMerchant(database.db, database.masterKey, 'plain-text-check');
      const rotated = await rotateMerchantKey(database.db, database.masterKey, 'plain-text-check', { revokeOld: true });
      const keys = ['shop-secret-key-1', 'other-secret-key-2', 'unicode-merchant-key-3', added.apiKey, rotated.apiKey];
      const { rows: tables } = await sql<Record<string, string>>`SHOW TABLES`.execute(database.db);
      expect(tables.length).toBeGreaterThanOrEqual(7);
      let dump = '';
      for (const table of tables.map((row) => Object.values(row)[0]!)) {
        const { rows } = await sql`SELECT * FROM ${sql.table(table)}`.execute(database.db);
        dump += JSON.stringify(rows);
      }
      expect(dump).toContain('plain-text-check');
      for (const key of keys) {
        for (const form of [key, Buffer.from(key).toString('base64'), Buffer.from(key).toString('base64url'), Buffer.from(key).toString('hex')]) {
          expect(dump.includes(form), `a form of a key is in the tables`).toBe(false);
        }
      }
    });

    it('serves rotated keys, drops revoked ones, and caches no longer than the TTL', async () => {
      // A TTL long enough that the checks right after a change still find the entry cached on a busy machine.
      const cached = new MysqlStorage({ db: database.db, masterKey: database.masterKey, keyCacheTtlMs: 2000 });
      const { apiKey: first } = await addMerchant(database.db, database.masterKey, 'rotating');
      expect((await cached.getMerchant('rotating'))!.keys).toEqual([first]);
      const { apiKey: second } = await rotateMerchantKey(database.db, database.masterKey, 'rotating');
      expect((await cached.getMerchant('rotating'))!.keys).toEqual([first]);
      expect((await storage.getMerchant('rotating'))!.keys).toEqual([first, second]);
      await vi.waitFor(async () => expect((await cached.getMerchant('rotating'))!.keys).toEqual([first, second]), { timeout: 10_000, interval: 50 });
      const { apiKey: third, revoked } = await rotateMerchantKey(database.db, database.masterKey, 'rotating', { revokeOld: true });
      expect(revoked).toBe(2);
      await setMerchantStatus(database.db, 'rotating', 'disabled');
      // Until the entry expires, the revoked keys and the old status still stand: the documented delay.
      expect(await cached.getMerchant('rotating')).toMatchObject({ id: 'rotating', status: 'active', keys: [first, second] });
      expect(await storage.getMerchant('rotating')).toMatchObject({ id: 'rotating', status: 'disabled', keys: [third] });
      await vi.waitFor(async () => expect(await cached.getMerchant('rotating')).toMatchObject({ id: 'rotating', status: 'disabled', keys: [third] }), { timeout: 10_000, interval: 50 });
      cached.invalidateKeyCache();
      await cached.close();
    });

    it('refuses keys sealed under another master key or for another merchant, saying so', async () => {
      const wrong = new MysqlStorage({ db: database.db, masterKey: generateMasterKey(), keyCacheTtlMs: 0 });
      const error = await wrong.getMerchant('shop').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StorageUnavailableError);
      expect((error as Error).message).toMatch(/another MASTER_KEY/);
      const moved = await sealApiKey(database.masterKey, 'shop', 'moved-key');
      await database.db.insertInto('merchant_keys').values({ merchant_id: 'other', sealed_key: moved, key_id: 'key_moved0000000', revoked_at: null }).execute();
      await expect(storage.getMerchant('other')).rejects.toThrow(/belongs to another merchant/);
      await database.db.deleteFrom('merchant_keys').where('sealed_key', '=', moved).execute();
    });

    it('explains a clear MASTER_KEY problem without echoing the value', () => {
      expect(() => parseMasterKey(undefined)).toThrow(MasterKeyError);
      expect(() => parseMasterKey('')).toThrow(/MASTER_KEY is not set.*randomBytes\(32\)/);
      const short = Buffer.alloc(16, 7).toString('base64url');
      expect(() => parseMasterKey(short)).toThrow(/exactly 32 bytes, it decodes to 16/);
      try {
        parseMasterKey(short);
      } catch (e) {
        expect((e as Error).message).not.toContain(short);
      }
      expect(() => parseMasterKey('not base64url!')).toThrow(/base64url/);
      expect(() => parseMasterKey('short')).toThrow(/exactly 32 bytes, it is not valid base64url/);
      expect(parseMasterKey(`${generateMasterKey()}=`).bytes).toHaveLength(32);
    });

    it('prunes expired salts in bounded batches and keeps live ones', async () => {
      const rows = Array.from({ length: 2500 }, (_, i) => ({ merchant_id: 'other', salt: `expired-${i}`, expires_at: '2001-01-01 00:00:00.000000' }));
      await database.db.insertInto('used_salts').values(rows).execute();
      // No background pruning here: only the explicit runs below.
      const manual = new MysqlStorage({ db: database.db, masterKey: database.masterKey, saltPruneIntervalMs: 0 });
      await manual.recordSalt({ merchantId: 'other', salt: 'live', expiresAt: now + 300, now });
      expect(await manual.pruneSalts(now, { batchSize: 1000, maxBatches: 2 })).toBe(2000);
      expect(await manual.pruneSalts(now, { batchSize: 1000, maxBatches: 2 })).toBeGreaterThanOrEqual(500);
      const left = await database.db.selectFrom('used_salts').select('salt').where('merchant_id', '=', 'other').execute();
      expect(left.map((row) => row.salt)).toEqual(['live']);
    });

    it('prunes in the background as salts are recorded', async () => {
      const pruning = new MysqlStorage({ db: database.db, masterKey: database.masterKey, saltPruneIntervalMs: 1 });
      await database.db.insertInto('used_salts').values({ merchant_id: 'other', salt: 'stale', expires_at: '2001-01-01 00:00:00.000000' }).execute();
      await pruning.recordSalt({ merchantId: 'other', salt: 'trigger', expiresAt: now + 300, now });
      await pruning.close(); // waits for the running prune
      expect(await database.db.selectFrom('used_salts').select('salt').where('salt', '=', 'stale').execute()).toEqual([]);
    });

    it('reads every page by index range reads of bounded size, on the planned indexes', async () => {
      const stamp = (day: number) => `2020-01-${String(day).padStart(2, '0')}T00:00:00.000000+00:00`;
      await importSeed(database.db, database.masterKey, {
        merchants: [{ id: 'planned', status: 'active', keys: ['planned-key'] }],
        users: Array.from({ length: 50 }, (_, i) => user('planned', `u-${String(i).padStart(2, '0')}`, { date_joined: stamp(1 + (i % 28)), deactivated_at: i % 5 ? null : stamp(28) })),
      });
      // Small bounds: 50 users make every plan of src/storage/user-pages.ts.
      const plan = { seekLimit: 5, scanBudget: 8 };
      const accesses = async (query: UserPageQuery) => {
        const statements: CompiledQuery[] = [];
        await selectUserPage(database.db, query, (statement) => statements.push(statement), plan);
        const found: string[] = [];
        for (const statement of statements) {
          const { rows } = await database.db.executeQuery<{ table: string; key: string | null; type: string }>(CompiledQuery.raw(`EXPLAIN ${statement.sql}`, [...statement.parameters]));
          for (const row of rows) {
            if (row.table.startsWith('<')) continue; // a derived table: the few rows read below it
            // Every read of a table is a range or a lookup on an index, never a scan.
            expect(['range', 'ref', 'eq_ref', 'const'], `${row.table} ${row.type}`).toContain(row.type);
            found.push(`${row.table === 'u' ? 'users' : 'user_shares'}:${row.key}`);
          }
        }
        return found;
      };
      const base = { merchantId: 'planned', limit: 10 };
      expect(await accesses({ ...base, filter: {} })).toEqual(['user_shares:PRIMARY', 'users:PRIMARY']);
      expect(await accesses({ ...base, filter: { active: false }, after: 'u-02' })).toEqual(['user_shares:user_shares_active', 'users:PRIMARY']);
      // A large date range in id order: counted on the date index, then a bounded scan in id order.
      expect(await accesses({ ...base, filter: { joinedAfter: stamp(3) }, after: 'u-02' })).toEqual(['user_shares:user_shares_joined', 'user_shares:PRIMARY', 'user_shares:PRIMARY', 'users:PRIMARY']);
      expect(await accesses({ ...base, filter: { active: true, joinedAfter: stamp(3) } })).toEqual(['user_shares:user_shares_joined', 'user_shares:user_shares_active', 'user_shares:user_shares_active', 'users:PRIMARY']);
      // A small one: read from the date index, then the page's users by primary key.
      expect(await accesses({ ...base, filter: { joinedAfter: stamp(26) } })).toEqual(['user_shares:user_shares_joined', 'user_shares:PRIMARY', 'users:PRIMARY', 'user_shares:user_shares_joined']);
      // order=date_joined: one range per activity, merged.
      expect(await accesses({ ...base, filter: { joinedAfter: stamp(3) }, order: 'date_joined', after: 'u-09', afterJoined: stamp(10) })).toEqual(['user_shares:PRIMARY', 'users:PRIMARY', 'user_shares:user_shares_joined', 'user_shares:user_shares_joined']);
      expect(await accesses({ ...base, filter: { active: true }, order: 'date_joined' })).toEqual(['user_shares:PRIMARY', 'users:PRIMARY', 'user_shares:user_shares_joined']);
      // order=updated_at: one range of user_shares_updated from updated_since or the position; with
      // other filters, first the bound of the scan on the same index.
      const changed = stamp(1);
      expect(await accesses({ ...base, filter: { updatedSince: changed }, order: 'updated_at' })).toEqual(['user_shares:PRIMARY', 'users:PRIMARY', 'user_shares:user_shares_updated']);
      expect(await accesses({ ...base, filter: { active: false, joinedAfter: stamp(3) }, order: 'updated_at', after: 'u-09', afterUpdated: changed })).toEqual([
        'user_shares:user_shares_updated',
        'user_shares:PRIMARY',
        'users:PRIMARY',
        'user_shares:user_shares_updated',
      ]);
    });

    it('refuses, before writing anything, a seed key too long to seal into its column', async () => {
      const long = '🔑'.repeat(200); // 200 characters, 800 bytes
      await expect(importSeed(database.db, database.masterKey, { merchants: [{ id: 'long-key', status: 'active', keys: [long] }], users: [] })).rejects.toThrow(/longer than 512 bytes/);
      expect(await storage.getMerchant('long-key')).toBeUndefined();
      const fits = 'k'.repeat(512);
      await importSeed(database.db, database.masterKey, { merchants: [{ id: 'm'.repeat(128), status: 'active', keys: [fits] }], users: [] });
      expect((await storage.getMerchant('m'.repeat(128)))!.keys).toEqual([fits]);
    });

    it('runs migrations idempotently, and down and up again', async () => {
      expect((await migrateToLatest(database.db)).results).toEqual([]);
      const scratch = await createTestDatabase({ migrate: false });
      try {
        expect((await migrateToLatest(scratch.db)).results).toEqual([
          { migrationName: '0001_initial', direction: 'Up', status: 'Success' },
          { migrationName: '0002_user_share_filters', direction: 'Up', status: 'Success' },
          { migrationName: '0003_auth_failures', direction: 'Up', status: 'Success' },
          { migrationName: '0004_key_ids', direction: 'Up', status: 'Success' },
          { migrationName: '0005_user_share_updated_at', direction: 'Up', status: 'Success' },
          { migrationName: '0006_replica_heartbeat', direction: 'Up', status: 'Success' },
          { migrationName: '0007_key_limits_audit', direction: 'Up', status: 'Success' },
          { migrationName: '0008_webhooks', direction: 'Up', status: 'Success' },
          { migrationName: '0009_auth_check_reservations', direction: 'Up', status: 'Success' },
          { migrationName: '0010_webhook_event_refs', direction: 'Up', status: 'Success' },
          { migrationName: '0011_auth_failures_census', direction: 'Up', status: 'Success' },
          { migrationName: '0012_webhook_test_budget', direction: 'Up', status: 'Success' },
          { migrationName: '0013_share_removals', direction: 'Up', status: 'Success' },
          { migrationName: '0014_webhook_deliveries_by_endpoint', direction: 'Up', status: 'Success' },
          { migrationName: '0015_idempotency_keys', direction: 'Up', status: 'Success' },
          { migrationName: '0017_test_mode', direction: 'Up', status: 'Success' },
          { migrationName: '0018_webhook_share_batches', direction: 'Up', status: 'Success' },
        ]);
        expect((await migrateToLatest(scratch.db)).results).toEqual([]);
        expect((await createMigrator(scratch.db).migrateDown()).error).toBeUndefined();
        expect((await migrateToLatest(scratch.db)).results).toHaveLength(1);
      } finally {
        await scratch.drop();
      }
    });

    it('reports a missing schema as storage unavailable with the fix', async () => {
      const scratch = await createTestDatabase({ migrate: false });
      const bare = new MysqlStorage({ db: scratch.db, masterKey: scratch.masterKey });
      try {
        await expect(bare.ping()).rejects.toThrow(StorageUnavailableError);
        await expect(bare.getUser('shop', 'x')).rejects.toThrow(/run `merchant-api migrate`/);
      } finally {
        await bare.close();
        await scratch.drop();
      }
    });
  });
});

describe('MySQL configuration and key cache (no server needed)', () => {
  it('reads a mysql:// URL with escaped credentials and pool parameters', () => {
    expect(parseMysqlUrl('mysql://app:p%40ss%3Aword@db.internal:3307/merchant_api?connectionLimit=4&queryTimeout=0&ssl=true')).toEqual({
      host: 'db.internal', port: 3307, user: 'app', password: 'p@ss:word', database: 'merchant_api',
      connectionLimit: 4, connectTimeout: 5000, queryTimeout: 0, ssl: { rejectUnauthorized: true },
    });
    expect(parseMysqlUrl('mysql://127.0.0.1')).toMatchObject({ port: 3306, user: 'root', database: undefined, connectionLimit: 10, queryTimeout: 5000 });
  });

  it('rejects a bad URL without repeating the password', () => {
    for (const url of ['postgres://u:hunter2@h/db', 'mysql://u:hunter2@h/db?connectTimeout=soon', 'mysql://u:hunter2@h/db?ssl={bad', 'not a url hunter2']) {
      expect(() => parseMysqlUrl(url)).toThrow(TypeError);
      try {
        parseMysqlUrl(url);
      } catch (error) {
        expect((error as Error).message).not.toContain('hunter2');
      }
    }
  });

  it('loads each merchant once for concurrent lookups and expires entries after the TTL', async () => {
    let clock = 0;
    let loads = 0;
    const cache = new MerchantCache(1000, () => clock);
    const load = async () => {
      loads++;
      await sleep(5);
      return { id: 'm', status: 'active' as const, keys: [`k${loads}`] };
    };
    const results = await Promise.all([cache.get('m', load), cache.get('m', load), cache.get('m', load)]);
    expect(loads).toBe(1);
    expect(results.map((m) => m!.keys)).toEqual([['k1'], ['k1'], ['k1']]);
    results[0]!.keys.push('mutated');
    clock = 999;
    expect((await cache.get('m', load))!.keys).toEqual(['k1']);
    clock = 1000;
    expect((await cache.get('m', load))!.keys).toEqual(['k2']);
    expect(await cache.get('unknown', async () => undefined)).toBeUndefined();
  });
});

function sqlTime(value: string): string;
function sqlTime(value: string | null): string | null;
function sqlTime(value: string | null): string | null {
  return value === null ? null : `${value.slice(0, 10)} ${value.slice(11, 26)}`;
}

function columnsOf(record: ReturnType<typeof user>) {
  const { merchant_id: _m, shared_user_id: _s, ...rest } = record;
  return { ...rest, date_joined: sqlTime(rest.date_joined)!, deactivated_at: sqlTime(rest.deactivated_at), agreed_to_terms_and_conditions: sqlTime(rest.agreed_to_terms_and_conditions), agreed_to_marketing: sqlTime(rest.agreed_to_marketing) };
}
