/**
 * The MySQL hot path (docs/benchmarks.md#mysql): the single-user read as a prepared statement
 * straight on the pool, with the same answers through a plain Kysely, as a point lookup on both
 * primary keys; and salts written in batches with each request's own answer.
 */
import { Kysely, MysqlDialect } from 'kysely';
import { createPool } from 'mysql2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StorageUnavailableError } from '../../../src/errors.js';
import { importSeed, MysqlStorage, type MerchantApiDatabase } from '../../../src/storage/mysql/index.js';
import { SaltWriter } from '../../../src/storage/mysql/statements/salts.js';
import { statementRunner } from '../../../src/storage/mysql/statements/statement-runner.js';
import { selectUser, UserReader, userByKeySql, usersByKeySql } from '../../../src/storage/mysql/statements/user-queries.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../../support/mysql.js';
import { user } from '../../support/seeds.js';

const available = await mysqlAvailable();
const now = Math.floor(Date.now() / 1000);

describe.skipIf(!available)('MySQL hot path', () => {
  let database: TestDatabase;
  let plain: Kysely<MerchantApiDatabase>;

  beforeAll(async () => {
    database = await createTestDatabase({ prefix: 'merchant_api_hot' });
    await importSeed(database.db, database.masterKey, {
      merchants: [{ id: 'shop', status: 'active', keys: ['shop-key'] }],
      users: [user('shop', 'ada', { state: null, agreed_to_marketing: null }), user('shop', 'grace 美咲 🙂', { deactivated_at: '2024-01-02T03:04:05.000006+00:00' })],
    });
    const url = new URL(database.url);
    // A Kysely the package did not build: its statements go through Kysely, not the direct runner.
    plain = new Kysely<MerchantApiDatabase>({
      dialect: new MysqlDialect({ pool: createPool({ host: url.hostname, port: Number(url.port || 3306), user: url.username, database: url.pathname.slice(1), dateStrings: true, charset: 'utf8mb4_unicode_ci' }) }),
    });
  });

  afterAll(async () => {
    await plain?.destroy();
    await database?.drop();
  });

  it('reads a user alike as a prepared statement on the pool and through a plain Kysely', async () => {
    expect(statementRunner(database.db)).not.toBe(statementRunner(plain));
    for (const id of ['ada', 'grace 美咲 🙂', 'nobody', 'ada ']) {
      const direct = await selectUser(database.db, 'shop', id);
      expect(await selectUser(plain, 'shop', id)).toStrictEqual(direct);
      if (direct) expect(Object.keys(direct)).toHaveLength(14);
    }
    expect((await selectUser(database.db, 'shop', 'grace 美咲 🙂'))?.deactivated_at).toBe('2024-01-02T03:04:05.000006+00:00');
  });

  it('answers each read of a batch with its own user, across merchants, ids differing only in case or a trailing space', async () => {
    await importSeed(database.db, database.masterKey, {
      merchants: [{ id: 'shop ', status: 'active', keys: ['other-key'] }],
      users: [user('shop', 'Ada'), user('shop ', 'ada', { first_name: 'Other shop' })],
    });
    const reader = new UserReader(database.db, { concurrency: 1, maxBatch: 8 });
    const keys: [string, string][] = [['shop', 'ada'], ['shop', 'Ada'], ['shop', 'ada '], ['shop ', 'ada'], ['shop', 'nobody'], ['shop', 'grace 美咲 🙂'], ['shop', 'ada'], ['nope', 'ada'], ['shop', 'x\uD800'], ['shop', 'Ada']];
    const batched = await Promise.all(keys.map(([merchant, id]) => reader.read(merchant, id)));
    const alone = await Promise.all(keys.map(([merchant, id]) => selectUser(plain, merchant, id)));
    expect(batched).toStrictEqual(alone);
    expect(batched.map((record) => record?.shared_user_id ?? null)).toStrictEqual(['ada', 'Ada', null, 'ada', null, 'grace 美咲 🙂', 'ada', null, null, 'Ada']);
    expect(batched[3]?.first_name).toBe('Other shop');
  });

  it('reads a batch by both primary keys too (EXPLAIN: a range on PRIMARY for the keys, users by PRIMARY)', async () => {
    const run = statementRunner(database.db);
    const parameters = ['shop', 'ada', 'shop', 'Ada', 'shop ', 'ada', 'shop', 'nobody'];
    const { rows } = await run<{ table: string; type: string; key: string; rows: number }>(`EXPLAIN ${usersByKeySql(database.db, 4)}`, parameters, { prepared: false });
    expect(rows.map((row) => [row.table, row.type, row.key])).toStrictEqual([
      ['s', 'range', 'PRIMARY'],
      ['u', 'eq_ref', 'PRIMARY'],
    ]);
    expect(Number(rows[0]!.rows)).toBeLessThanOrEqual(4);
  });

  it('reads one user by both primary keys (EXPLAIN: const lookups, one row each)', async () => {
    const run = statementRunner(database.db);
    const { rows } = await run<{ table: string; type: string; key: string; rows: number }>(`EXPLAIN ${userByKeySql(database.db)}`, ['shop', 'ada'], { prepared: false });
    expect(rows.map((row) => [row.table, row.type, row.key, Number(row.rows)])).toStrictEqual([
      ['s', 'const', 'PRIMARY', 1],
      ['u', 'const', 'PRIMARY', 1],
    ]);
  });

  it('answers each salt of a batch as if it had come alone: new, repeated within the batch, replayed, expired', async () => {
    const writer = new SaltWriter(database.db, { concurrency: 1, maxBatch: 8 });
    expect(await writer.record({ merchantId: 'shop', salt: 'seen', expiresAt: now + 300, now })).toBe(true);
    expect(await writer.record({ merchantId: 'shop', salt: 'old', expiresAt: now - 10, now: now - 300 })).toBe(true);
    // One in flight, so these queue up and go in batches of at most 8, some holding a replay.
    const salts = ['a', 'b', 'seen', 'c', 'b', 'old', 'd', 'e', 'f', 'g', 'h', 'i', 'a', 'j', 'k', 'l', 'm', 'n', 'o'];
    const answers = await Promise.all(salts.map((salt) => writer.record({ merchantId: 'shop', salt, expiresAt: now + 300, now })));
    const fresh = new Map<string, number>();
    salts.forEach((salt, i) => fresh.set(salt, (fresh.get(salt) ?? 0) + (answers[i] ? 1 : 0)));
    expect(fresh.get('seen')).toBe(0);
    expect(fresh.get('old')).toBe(1);
    for (const [salt, count] of fresh) if (salt !== 'seen') expect([salt, count]).toStrictEqual([salt, 1]);
    // A batch without a replay is one statement: all new.
    const clean = await Promise.all(['p', 'q', 'r', 's'].map((salt) => writer.record({ merchantId: 'other', salt, expiresAt: now + 300, now })));
    expect(clean).toStrictEqual([true, true, true, true]);
  });

  it('refuses a salt as unavailable storage when too many wait for MySQL', async () => {
    const writer = new SaltWriter(database.db, { concurrency: 1, maxWaiting: 2 });
    // The first goes out at once; two may wait behind it; the rest are refused.
    const answers = await Promise.allSettled(['w1', 'w2', 'w3', 'w4', 'w5'].map((salt) => writer.record({ merchantId: 'shop', salt, expiresAt: now + 300, now })));
    expect(answers.map((answer) => answer.status)).toStrictEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'rejected']);
    expect((answers[3] as PromiseRejectedResult).reason).toBeInstanceOf(StorageUnavailableError);
  });

  it('lets exactly one of many concurrent requests with one salt win, across storages', async () => {
    const second = new MysqlStorage({ db: plain, masterKey: database.masterKeyText });
    const storage = new MysqlStorage({ db: database.db, masterKey: database.masterKeyText });
    const record = { merchantId: 'shop', salt: 'raced', expiresAt: now + 300, now };
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 ? second : storage).recordSalt(record)));
    expect(answers.filter(Boolean)).toHaveLength(1);
  });
});
