/**
 * Migrations on a database built by the previous migration set. 0002 (the filter columns and
 * indexes of user_shares): every row survives, the new columns hold what the users say, the
 * listings read them, and down gives the old schema back with the rows. 0003 (the shared
 * throttle's auth_failures): the table with its keys, merchant ids as the merchants table holds
 * them, nothing else touched, and down and up again.
 */
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createHash } from 'node:crypto';
import { createMigrator, listMerchantKeys, migrateToLatest, MysqlStorage, sealApiKey } from '../../../src/storage/mysql/index.js';
import { batchedStep, dataStep, defineMigration, MIGRATION_CONFLICT_RETRY_MS, schemaStep } from '../../../src/storage/mysql/migrations/resumable.js';
import { tableExists } from '../../../src/storage/mysql/migrations/schema-facts.js';
import { MysqlThrottleStore } from '../../../src/storage/mysql/throttle/throttle-store.js';
import { FailureThrottle } from '../../../src/limits/throttle.js';
import { compareCodePoints } from '../../../src/storage/order.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../../support/mysql.js';

const available = await mysqlAvailable();

interface OldUser {
  id: number;
  first_name: string;
  date_joined: string;
  deactivated_at: string | null;
}

const stamp = fc
  .record({ year: fc.constantFrom(1, 1999, 2020, 2038, 9999), day: fc.integer({ min: 1, max: 28 }), micros: fc.integer({ min: 0, max: 999_999 }) })
  .map(({ year, day, micros }) => `${String(year).padStart(4, '0')}-02-${String(day).padStart(2, '0')} 12:34:56.${String(micros).padStart(6, '0')}`);

describe.skipIf(!available)('migration 0002_user_share_filters', () => {
  let database: TestDatabase;
  let users: OldUser[];
  let shares: { merchant_id: string; shared_user_id: string; user_id: number }[];

  beforeAll(async () => {
    database = await createTestDatabase({ migrate: false });
    const to = await createMigrator(database.db).migrateTo('0001_initial');
    expect(to.error).toBeUndefined();
    // Random people, some deactivated, some shared with two merchants, stamps from year 1 to 9999.
    const people = fc.sample(fc.record({ joined: stamp, deactivated: fc.option(stamp, { nil: null }), both: fc.boolean() }), { numRuns: 1500, seed: 13 });
    await sql`INSERT INTO merchants (id) VALUES ('m1'), ('m2'), ('m-empty')`.execute(database.db);
    users = people.map((p, i) => ({ id: i + 1, first_name: `Person ${i}`, date_joined: p.joined, deactivated_at: p.deactivated }));
    shares = people.flatMap((p, i) => [
      { merchant_id: 'm1', shared_user_id: `u-${i}`, user_id: i + 1 },
      ...(p.both ? [{ merchant_id: 'm2', shared_user_id: `other-${String(i).padStart(5, '0')}-😀`, user_id: i + 1 }] : []),
    ]);
    for (let i = 0; i < users.length; i += 500) {
      const rows = users.slice(i, i + 500).map((u) => sql`(${u.id}, ${u.first_name}, 'Last', 'x@example.com', 'Street 1', '10115', 'Berlin', NULL, 'de', 'de', ${u.date_joined}, ${u.deactivated_at}, NULL, NULL)`);
      await sql`INSERT INTO users (id, first_name, last_name, email_address, street, zip_code, city, state, country, preferred_language, date_joined, deactivated_at, agreed_to_terms_and_conditions, agreed_to_marketing) VALUES ${sql.join(rows)}`.execute(database.db);
    }
    for (let i = 0; i < shares.length; i += 500) {
      const rows = shares.slice(i, i + 500).map((s) => sql`(${s.merchant_id}, ${s.shared_user_id}, ${s.user_id})`);
      await sql`INSERT INTO user_shares (merchant_id, shared_user_id, user_id) VALUES ${sql.join(rows)}`.execute(database.db);
    }
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('keeps every row and fills the new columns from the users', async () => {
    const before = (await sql<Record<string, unknown>>`SELECT * FROM users ORDER BY id`.execute(database.db)).rows;
    const { results } = await createMigrator(database.db).migrateTo('0002_user_share_filters');
    expect(results).toEqual([{ migrationName: '0002_user_share_filters', direction: 'Up', status: 'Success' }]);
    expect((await sql<Record<string, unknown>>`SELECT * FROM users ORDER BY id`.execute(database.db)).rows).toEqual(before);
    const after = (await sql<{ merchant_id: string; shared_user_id: string; user_id: string; is_active: number; date_joined: string }>`SELECT merchant_id, shared_user_id, user_id, is_active, date_joined FROM user_shares`.execute(database.db)).rows;
    const byId = new Map(users.map((u) => [u.id, u]));
    const key = (s: { merchant_id: string; shared_user_id: string }) => `${s.merchant_id}\u0000${s.shared_user_id}`;
    expect(after.map(key).sort()).toEqual(shares.map(key).sort());
    for (const row of after) {
      const person = byId.get(Number(row.user_id))!;
      expect(shares.find((s) => key(s) === key(row))!.user_id).toBe(Number(row.user_id));
      expect(row).toMatchObject({ is_active: person.deactivated_at === null ? 1 : 0, date_joined: person.date_joined });
    }
  });

  it('leaves the new columns without defaults, with both indexes', async () => {
    await expect(sql`INSERT INTO user_shares (merchant_id, shared_user_id, user_id) VALUES ('m-empty', 'no-columns', 1)`.execute(database.db)).rejects.toThrow(/doesn't have a default value/);
    const { rows } = await sql<{ Key_name: string; Column_name: string; Seq_in_index: number }>`SHOW INDEX FROM user_shares`.execute(database.db);
    const columns = (name: string) => rows.filter((r) => r.Key_name === name).sort((a, b) => a.Seq_in_index - b.Seq_in_index).map((r) => r.Column_name);
    expect(columns('user_shares_active')).toEqual(['merchant_id', 'is_active', 'shared_user_id', 'date_joined']);
    expect(columns('user_shares_joined')).toEqual(['merchant_id', 'is_active', 'date_joined', 'shared_user_id']);
  });

  it('serves the migrated rows through every filter and both orders', async () => {
    const storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey });
    const canonical = (value: string) => `${value.replace(' ', 'T')}+00:00`;
    const expected = shares
      .filter((s) => s.merchant_id === 'm2')
      .map((s) => ({ id: s.shared_user_id, ...byUser(s.user_id) }))
      .filter((u) => u.deactivated_at !== null && u.date_joined > '2000-01-01')
      .sort((a, b) => compareCodePoints(a.id, b.id));
    function byUser(id: number) {
      const u = users[id - 1]!;
      return { date_joined: u.date_joined, deactivated_at: u.deactivated_at };
    }
    const got: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await storage.listUsers({ merchantId: 'm2', filter: { active: false, joinedAfter: '2000-01-01T00:00:00.000000+00:00' }, after, limit: 50 });
      got.push(...page.map((u) => u.shared_user_id));
      if (page.length === 50) after = page.at(-1)!.shared_user_id;
      else if (page.resumeAfter !== undefined) after = page.resumeAfter;
      else break;
    }
    expect(got).toEqual(expected.map((u) => u.id));
    const oldest = await storage.listUsers({ merchantId: 'm1', filter: {}, order: 'date_joined', limit: 3 });
    expect(oldest.map((u) => u.date_joined)).toEqual([...users].map((u) => canonical(u.date_joined)).sort().slice(0, 3));
    await storage.close();
  });

  it('goes down to the old schema with every share, and up again', async () => {
    expect((await createMigrator(database.db).migrateDown()).error).toBeUndefined();
    const { rows: columns } = await sql<{ Field: string }>`SHOW COLUMNS FROM user_shares`.execute(database.db);
    expect(columns.map((c) => c.Field)).toEqual(['merchant_id', 'shared_user_id', 'user_id']);
    expect((await sql<{ n: string | number }>`SELECT COUNT(*) AS n FROM user_shares`.execute(database.db)).rows[0]!.n).toBe(String(shares.length));
    expect((await createMigrator(database.db).migrateTo('0002_user_share_filters')).results).toHaveLength(1);
  });
});

describe.skipIf(!available)('migration 0003_auth_failures', () => {
  let database: TestDatabase;
  const tables = async () => (await sql<{ name: string }>`SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY name`.execute(database.db)).rows.map((r) => r.name);
  const count = async (table: string) => Number((await sql<{ n: string }>`SELECT COUNT(*) AS n FROM ${sql.table(table)}`.execute(database.db)).rows[0]!.n);

  beforeAll(async () => {
    database = await createTestDatabase({ migrate: false });
    expect((await createMigrator(database.db).migrateTo('0002_user_share_filters')).error).toBeUndefined();
    await sql`INSERT INTO merchants (id) VALUES ('shop'), ('Shop'), ('shop ')`.execute(database.db);
    await sql`INSERT INTO used_salts (merchant_id, salt, expires_at) VALUES ('shop', 's1', '2030-01-01 00:00:00')`.execute(database.db);
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('adds auth_failures on a database built by 0001 and 0002, touching nothing else', async () => {
    const before = await tables();
    expect((await createMigrator(database.db).migrateTo('0003_auth_failures')).results).toEqual([{ migrationName: '0003_auth_failures', direction: 'Up', status: 'Success' }]);
    expect((await tables()).sort()).toEqual([...before, 'auth_failures'].sort());
    expect([await count('merchants'), await count('used_salts'), await count('auth_failures')]).toEqual([3, 1, 0]);
  });

  it('keys rows by (scope, address, merchant_id), with an index for changes, blocks and expiry', async () => {
    const { rows } = await sql<{ Key_name: string; Column_name: string; Seq_in_index: number }>`SHOW INDEX FROM auth_failures`.execute(database.db);
    const columns = (name: string) => rows.filter((r) => r.Key_name === name).sort((a, b) => a.Seq_in_index - b.Seq_in_index).map((r) => r.Column_name);
    expect(columns('PRIMARY')).toEqual(['scope', 'address', 'merchant_id']);
    expect(columns('auth_failures_changes')).toEqual(['updated_at']);
    expect(columns('auth_failures_blocked')).toEqual(['blocked_until']);
    expect(columns('auth_failures_expiry')).toEqual(['expires_at']);
    const collation = async (table: string, column: string) =>
      (await sql<{ c: string }>`SELECT COLLATION_NAME AS c FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ${table} AND COLUMN_NAME = ${column}`.execute(database.db)).rows[0]!.c;
    expect(await collation('auth_failures', 'merchant_id')).toBe(await collation('merchants', 'id'));
  });

  it('counts merchants whose ids differ only in case or a trailing space apart', async () => {
    // Today's store reads the columns of later migrations (0011's census): on the latest schema, then back to 0003.
    await migrateToLatest(database.db);
    const store = new MysqlThrottleStore(database.db);
    const rules = new FailureThrottle().rules;
    for (const id of ['shop', 'Shop', 'shop ', 'shop']) await store.recordFailure({ address: '192.0.2.1', merchantId: id, now: 1_700_000_000 }, rules);
    const { rows } = await sql<{ merchant_id: string; failures: number }>`SELECT merchant_id, failures FROM auth_failures WHERE scope = 'pair' ORDER BY merchant_id`.execute(database.db);
    expect(rows).toEqual([
      { merchant_id: 'Shop', failures: 1 },
      { merchant_id: 'shop', failures: 2 },
      { merchant_id: 'shop ', failures: 1 },
    ]);
    await store.close();
    expect((await createMigrator(database.db).migrateTo('0003_auth_failures')).error).toBeUndefined();
  });

  it('goes down without the table and leaves the rest, and up again', async () => {
    expect((await createMigrator(database.db).migrateDown()).error).toBeUndefined();
    expect(await tables()).not.toContain('auth_failures');
    expect([await count('merchants'), await count('used_salts')]).toEqual([3, 1]);
    expect((await createMigrator(database.db).migrateTo('0003_auth_failures')).results).toEqual([{ migrationName: '0003_auth_failures', direction: 'Up', status: 'Success' }]);
    expect(await count('auth_failures')).toBe(0);
  });
});

describe.skipIf(!available)('migration 0004_key_ids', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await createTestDatabase({ migrate: false });
    expect((await createMigrator(database.db).migrateTo('0003_auth_failures')).error).toBeUndefined();
    await sql`INSERT INTO merchants (id, status) VALUES ('m1', 'active'), ('m2', 'disabled')`.execute(database.db);
    // More keys than one fill batch (500), some revoked, sealed as the storage seals them.
    for (let i = 0; i < 620; i++) {
      const merchant = i % 2 === 0 ? 'm1' : 'm2';
      const sealed = await sealApiKey(database.masterKey, merchant, `old-key-${i}`);
      await sql`INSERT INTO merchant_keys (merchant_id, sealed_key, revoked_at) VALUES (${merchant}, ${sealed}, ${i % 3 === 0 ? sql`UTC_TIMESTAMP(6)` : null})`.execute(database.db);
    }
  }, 60_000);
  afterAll(async () => {
    await database?.drop();
  });

  it('keeps every key, gives each a unique public id, and leaves fingerprints to the first listing with the master key', async () => {
    const before = await sql<{ id: string; merchant_id: string; sealed_key: string; revoked_at: string | null }>`SELECT id, merchant_id, sealed_key, revoked_at FROM merchant_keys ORDER BY id`.execute(database.db);
    expect((await createMigrator(database.db).migrateTo('0004_key_ids')).error).toBeUndefined();
    const after = await sql<{ id: string; merchant_id: string; sealed_key: string; revoked_at: string | null; key_id: string; fingerprint: string | null; expires_at: string | null }>`SELECT * FROM merchant_keys ORDER BY id`.execute(database.db);
    expect(after.rows.map(({ id, merchant_id, sealed_key, revoked_at }) => ({ id, merchant_id, sealed_key, revoked_at }))).toEqual(before.rows);
    for (const row of after.rows) expect(row).toMatchObject({ key_id: expect.stringMatching(/^key_[0-9a-hjkmnp-tv-z]{12}$/), fingerprint: null, expires_at: null });
    expect(new Set(after.rows.map((row) => row.key_id)).size).toBe(620);

    // `merchant keys` runs on the current schema (it reads the columns of 0007 too).
    expect((await migrateToLatest(database.db)).error).toBeUndefined();
    const keys = await listMerchantKeys(database.db, database.masterKey, 'm2');
    expect(keys).toHaveLength(310);
    expect(keys[0]).toMatchObject({ fingerprint: createHash('sha256').update('old-key-1').digest('hex').slice(0, 16) });
    const filled = await sql<{ n: number }>`SELECT COUNT(*) AS n FROM merchant_keys WHERE fingerprint IS NOT NULL`.execute(database.db);
    expect(Number(filled.rows[0]!.n)).toBe(310);
    // The storage still reads every active key.
    const storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey, keyCacheTtlMs: 0, throttleSharing: false });
    expect((await storage.getMerchant('m1'))!.keys).toHaveLength(after.rows.filter((row) => row.merchant_id === 'm1' && row.revoked_at === null).length);
  });

  it('goes down to 0003 with the keys, and up again', async () => {
    expect((await createMigrator(database.db).migrateTo('0003_auth_failures')).error).toBeUndefined();
    const { rows } = await sql<{ n: number }>`SELECT COUNT(*) AS n FROM merchant_keys`.execute(database.db);
    expect(Number(rows[0]!.n)).toBe(620);
    expect((await createMigrator(database.db).migrateTo('0004_key_ids')).error).toBeUndefined();
  });
});

describe.skipIf(!available)('migration 0005_user_share_updated_at', () => {
  let database: TestDatabase;
  const joined = (i: number) => `2020-03-${String((i % 28) + 1).padStart(2, '0')} 10:00:00.${String(i).padStart(6, '0')}`;
  const columnsOf = async () => (await sql<{ Field: string }>`SHOW COLUMNS FROM user_shares`.execute(database.db)).rows.map((c) => c.Field);

  beforeAll(async () => {
    database = await createTestDatabase({ migrate: false });
    expect((await createMigrator(database.db).migrateTo('0003_auth_failures')).error).toBeUndefined();
    await sql`INSERT INTO merchants (id) VALUES ('m1'), ('m2')`.execute(database.db);
    for (let i = 1; i <= 40; i++) {
      await sql`INSERT INTO users (id, first_name, last_name, email_address, street, zip_code, city, state, country, preferred_language, date_joined, deactivated_at, agreed_to_terms_and_conditions, agreed_to_marketing)
        VALUES (${i}, ${`P${i}`}, 'Last', 'x@example.com', 'Street 1', '10115', 'Berlin', NULL, 'de', 'de', ${joined(i)}, ${i % 4 === 0 ? '2024-01-01 00:00:00' : null}, NULL, NULL)`.execute(database.db);
      await sql`INSERT INTO user_shares (merchant_id, shared_user_id, user_id, is_active, date_joined) VALUES (${i % 2 ? 'm1' : 'm2'}, ${`u-${String(i).padStart(2, '0')}`}, ${i}, ${i % 4 === 0 ? 0 : 1}, ${joined(i)})`.execute(database.db);
    }
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('adds updated_at back-filled from date_joined, with the (merchant_id, updated_at, shared_user_id) index', async () => {
    const before = (await sql<Record<string, unknown>>`SELECT * FROM user_shares ORDER BY merchant_id, shared_user_id`.execute(database.db)).rows;
    const { results, error } = await createMigrator(database.db).migrateTo('0005_user_share_updated_at');
    expect(error).toBeUndefined();
    expect(results!.at(-1)).toEqual({ migrationName: '0005_user_share_updated_at', direction: 'Up', status: 'Success' });
    const after = (await sql<Record<string, unknown>>`SELECT * FROM user_shares ORDER BY merchant_id, shared_user_id`.execute(database.db)).rows;
    expect(after.map(({ updated_at: _, ...row }) => row)).toEqual(before);
    for (const row of after) expect(row.updated_at).toBe(row.date_joined);
    const { rows } = await sql<{ Key_name: string; Column_name: string; Seq_in_index: number }>`SHOW INDEX FROM user_shares`.execute(database.db);
    const index = rows.filter((r) => r.Key_name === 'user_shares_updated').sort((a, b) => a.Seq_in_index - b.Seq_in_index).map((r) => r.Column_name);
    expect(index.slice(0, 3)).toEqual(['merchant_id', 'updated_at', 'shared_user_id']);
  });

  it('lists the migrated rows changed since a time, in (updated_at, shared_user_id) order', async () => {
    const storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey });
    const since = '2020-03-10T00:00:00.000000+00:00';
    const page = await storage.listUsers({ merchantId: 'm1', filter: { updatedSince: since }, order: 'updated_at', limit: 100 });
    const expected = Array.from({ length: 40 }, (_, i) => i + 1)
      .filter((i) => i % 2 === 1)
      .map((i) => ({ id: `u-${String(i).padStart(2, '0')}`, at: `${joined(i).replace(' ', 'T')}+00:00` }))
      .filter((u) => u.at >= since)
      .sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : compareCodePoints(a.id, b.id)));
    expect(expected.length).toBeGreaterThan(5);
    expect(page.map((u) => ({ id: u.shared_user_id, at: (u as { updated_at?: string }).updated_at }))).toEqual(expected);
    await storage.close();
  });

  it('goes down without the column and the index, and up again', async () => {
    expect((await createMigrator(database.db).migrateTo('0003_auth_failures')).error).toBeUndefined();
    expect(await columnsOf()).not.toContain('updated_at');
    expect((await sql<{ n: string | number }>`SELECT COUNT(*) AS n FROM user_shares`.execute(database.db)).rows[0]!.n).toBe('40');
    expect((await createMigrator(database.db).migrateTo('0005_user_share_updated_at')).error).toBeUndefined();
    expect(await columnsOf()).toContain('updated_at');
  });
});

describe.skipIf(!available)('migration 0007_key_limits_audit', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await createTestDatabase({ migrate: false });
    expect((await createMigrator(database.db).migrateTo('0006_replica_heartbeat')).error).toBeUndefined();
    await sql`INSERT INTO merchants (id) VALUES ('m1')`.execute(database.db);
    for (const [i, key] of ['old-key-a', 'old-key-b'].entries()) {
      await sql`INSERT INTO merchant_keys (merchant_id, sealed_key, key_id) VALUES ('m1', ${await sealApiKey(database.masterKey, 'm1', key)}, ${`key_00000000000${i}`})`.execute(database.db);
    }
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('keeps every key a key with every scope, from anywhere: a merchant with only such keys has no limits', async () => {
    const { results, error } = await createMigrator(database.db).migrateTo('0007_key_limits_audit');
    expect(error).toBeUndefined();
    expect(results).toEqual([{ migrationName: '0007_key_limits_audit', direction: 'Up', status: 'Success' }]);
    // Limits nothing as 0007 leaves them; read through today's storage, which needs today's schema.
    expect((await sql<{ scopes: string | null; allow_from: string | null; expires_at: string | null }>`SELECT scopes, allow_from, expires_at FROM merchant_keys ORDER BY id`.execute(database.db)).rows).toEqual([
      { scopes: null, allow_from: null, expires_at: null },
      { scopes: null, allow_from: null, expires_at: null },
    ]);
    expect(Number((await sql<{ n: number }>`SELECT COUNT(*) AS n FROM audit_events`.execute(database.db)).rows[0]!.n)).toBe(0);
    expect((await migrateToLatest(database.db)).error).toBeUndefined();
    const storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey, keyCacheTtlMs: 0, throttleSharing: false });
    expect(await storage.getMerchant('m1')).toEqual({ id: 'm1', status: 'active', keys: ['old-key-a', 'old-key-b'], keyIds: ['key_000000000000', 'key_000000000001'] });
    expect((await storage.listKeys('m1')).map((key) => [key.scopes, key.allow_from, key.name, key.last_used_at])).toEqual([
      [['signature', 'users:read', 'webhooks:manage', 'keys:manage'], [], null, null],
      [['signature', 'users:read', 'webhooks:manage', 'keys:manage'], [], null, null],
    ]);
  });

  it('goes down and up again', async () => {
    // Down to the migration before it (the later ones go first), then up to the latest again.
    expect((await createMigrator(database.db).migrateTo('0006_replica_heartbeat')).error).toBeUndefined();
    expect((await sql<{ Field: string }>`SHOW COLUMNS FROM merchant_keys`.execute(database.db)).rows.map((c) => c.Field)).not.toContain('scopes');
    const { results, error } = await migrateToLatest(database.db);
    expect(error).toBeUndefined();
    expect(results?.[0]).toEqual({ migrationName: '0007_key_limits_audit', direction: 'Up', status: 'Success' });
  });
});

describe.skipIf(!available)('a migration step that loses a write conflict (ER_LOCK_DEADLOCK, as a Galera node reports a certification failure)', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await createTestDatabase({ migrate: false });
  }, 120_000);
  afterAll(async () => {
    await database?.drop();
  });

  const conflict = () => Object.assign(new Error('Deadlock found when trying to get lock; try restarting transaction'), { code: 'ER_LOCK_DEADLOCK', errno: 1213 });

  it('is run again, and its changes apply once: the data step rolled back with its record, the DDL and the batch not applied', async () => {
    const losses = { schema: 1, data: 2, batched: 1 };
    const migration = defineMigration('9999_conflict_test', {
      up: [
        schemaStep(
          'create the table',
          (db) => tableExists(db, 'conflict_test'),
          async (db) => {
            if (losses.schema-- > 0) throw conflict();
            await sql`CREATE TABLE conflict_test (id INT PRIMARY KEY, note VARCHAR(16) NOT NULL)`.execute(db);
          },
        ),
        dataStep('insert a row', async (trx) => {
          await sql`INSERT INTO conflict_test (id, note) VALUES (1, 'data')`.execute(trx);
          // Lost at commit, as on Galera: the INSERT above is rolled back with the step's record.
          if (losses.data-- > 0) throw conflict();
        }),
        batchedStep('insert the rest', async (db) => {
          await sql`INSERT INTO conflict_test (id, note) SELECT 2, 'batch' FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM conflict_test WHERE id = 2)`.execute(db);
          if (losses.batched-- > 0) throw conflict();
        }),
      ],
      down: [],
    });
    await migration.up(database.db);
    expect(losses).toEqual({ schema: -1, data: -1, batched: -1 });
    const { rows } = await sql<{ id: number; note: string }>`SELECT id, note FROM conflict_test ORDER BY id`.execute(database.db);
    expect(rows).toEqual([
      { id: 1, note: 'data' },
      { id: 2, note: 'batch' },
    ]);
    const steps = await sql<{ step: string }>`SELECT step FROM merchant_api_migration_step WHERE migration = '9999_conflict_test' ORDER BY step`.execute(database.db);
    expect(steps.rows.map((row) => row.step)).toEqual(['create the table', 'insert a row', 'insert the rest']);
  });

  it('fails with the conflict once it has lost for the whole budget', async () => {
    const migration = defineMigration('9998_always_conflicting', {
      up: [
        dataStep('never commits', async () => {
          throw conflict();
        }),
      ],
      down: [],
    });
    vi.useFakeTimers({ toFake: ['setTimeout', 'performance'] });
    try {
      let outcome: string | undefined;
      void migration.up(database.db).then(
        () => (outcome = 'completed'),
        (error: { code?: string }) => (outcome = error.code),
      );
      // The pauses on the fake clock, the transactions on the real one: time moves until the run ends.
      let elapsed = 0;
      while (outcome === undefined && elapsed <= 2 * MIGRATION_CONFLICT_RETRY_MS) {
        await vi.advanceTimersByTimeAsync(50);
        elapsed += 50;
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(outcome).toBe('ER_LOCK_DEADLOCK');
      expect(elapsed).toBeGreaterThanOrEqual(MIGRATION_CONFLICT_RETRY_MS - 100);
    } finally {
      vi.useRealTimers();
    }
  });
});
