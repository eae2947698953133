/**
 * The bulk import path (docs/mysql.md#imports): one streamed pass that stops writing at the
 * first problem's batch, LOAD DATA LOCAL from memory with every byte of every field kept, its
 * warnings refused, and the fallbacks (no LOCAL INFILE, interleaved ids read back, wide id ranges).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPool } from 'mysql2';
import { Kysely, MysqlDialect, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMysqlKysely, importSeed, importUserFile, ImportValidationError, MysqlStorage, type MerchantApiDatabase } from '../../../src/storage/mysql/index.js';
import { readIdAllocation, type IdAllocation } from '../../../src/storage/mysql/admin/new-users.js';
import { upsertUsers } from '../../../src/storage/mysql/admin/user-upsert.js';
import type { ChangedUserRecord } from '../../../src/storage/contract.js';
import type { SeedUser } from '../../../src/storage/seed/seed.js';
import { fullScan } from '../../suites/storage-contract.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../../support/mysql.js';
import { user } from '../../support/seeds.js';
import { sleep } from '../../support/sleep.js';

const available = await mysqlAvailable();

describe.skipIf(!available)('MySQL bulk import', () => {
  let database: TestDatabase;
  let storage: MysqlStorage;
  let dir: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, { merchants: [{ id: 'shop', status: 'active', keys: ['k'] }, { id: 'other', status: 'active', keys: ['k2'] }], users: [] });
    storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey });
    dir = await mkdtemp(join(tmpdir(), 'merchant-api-import-'));
  });
  afterAll(async () => {
    await storage?.close();
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const ndjson = async (name: string, lines: string[]) => {
    const file = join(dir, name);
    await writeFile(file, `${lines.join('\n')}\n`);
    return file;
  };
  const ids = async (merchantId: string) => (await storage.listUsers({ merchantId, filter: {}, limit: 1000 })).map((u) => u.shared_user_id);

  it('writes the batches before the first bad line, nothing from its batch on, and completes when run again', async () => {
    const good = Array.from({ length: 25 }, (_, i) => JSON.stringify(user('shop', `p-${String(i).padStart(2, '0')}`)));
    const lines = [...good];
    lines[22] = JSON.stringify({ ...user('shop', 'p-22'), zip_code: 12345 });
    const file = await ndjson('partial.ndjson', lines);
    const error = (await importUserFile(database.db, file, { batchSize: 10 }).catch((e: unknown) => e)) as ImportValidationError;
    expect(error).toBeInstanceOf(ImportValidationError);
    expect(error.problems).toEqual(['line 23: zip_code: must be a string']);
    expect(error.imported).toEqual({ summary: expect.objectContaining({ usersInserted: 20, usersUpdated: 0 }), throughLine: 20 });
    expect(await ids('shop')).toEqual(Array.from({ length: 20 }, (_, i) => `p-${String(i).padStart(2, '0')}`));
    const fixed = await ndjson('fixed.ndjson', good);
    expect(await importUserFile(database.db, fixed, { batchSize: 10 })).toMatchObject({ usersInserted: 5, usersUpdated: 0, usersUnchanged: 20 });
    expect(await ids('shop')).toHaveLength(25);
  });

  it('refuses a line longer than maxLineBytes (default 1 MiB) as a problem naming its number, and reads the lines after it', async () => {
    const lines = Array.from({ length: 4 }, (_, i) => JSON.stringify(user('shop', `long-${i}`)));
    lines[2] = JSON.stringify(user('shop', 'long-2', { street: 's'.repeat(2 << 20) }));
    lines.push('not json');
    const error = (await importUserFile(database.db, await ndjson('long.ndjson', lines)).catch((e: unknown) => e)) as ImportValidationError;
    expect(error).toBeInstanceOf(ImportValidationError);
    expect(error.problems).toEqual([`line 3: longer than ${1 << 20} bytes, the most one line may be`, 'line 5: not valid JSON']);
    const small = (await importUserFile(database.db, await ndjson('small.ndjson', [lines[0]!, lines[1]!]), { maxLineBytes: 100 }).catch((e: unknown) => e)) as ImportValidationError;
    expect(small.problems).toEqual(['line 1: longer than 100 bytes, the most one line may be', 'line 2: longer than 100 bytes, the most one line may be']);
  });

  it('stops at the batch of the first line naming a merchant that does not exist, and reports every problem', async () => {
    const lines = Array.from({ length: 30 }, (_, i) => JSON.stringify(user(i === 14 || i === 27 ? 'ghost' : 'other', `q-${String(i).padStart(2, '0')}`)));
    lines.push('not json');
    const error = (await importUserFile(database.db, await ndjson('ghost.ndjson', lines), { batchSize: 10 }).catch((e: unknown) => e)) as ImportValidationError;
    expect(error.problems).toEqual(['line 15: merchant_id: no such merchant (add it first); later lines may name it too', 'line 31: not valid JSON']);
    expect(error.imported?.throughLine).toBe(10);
    expect(await ids('other')).toHaveLength(10);
  });

  it('keeps every character of every field through LOAD DATA: tabs, newlines, backslashes, \\N, NUL, CR, emoji', async () => {
    const nasty = ['tab\there', 'line\nbreak', 'back\\slash', '\\N', 'nul\u0000byte', 'cr\rlf\r\n', '😀 東京 é', ' ', 'ends with backslash\\'];
    const users = nasty.map((text, i) => user('shop', `esc-${i}`, { first_name: text, last_name: text, street: text, city: text, state: i % 2 ? null : text, email_address: `${text}@x` }));
    await importSeed(database.db, database.masterKey, { merchants: [], users });
    for (const u of users) {
      const { merchant_id: _, ...record } = u;
      expect(await storage.getUser('shop', u.shared_user_id)).toEqual(record);
    }
  });

  it('refuses a batch the server would only warn about, writing none of it', async () => {
    // Never past validation in an import: a timestamp that is not canonical, straight to the writer.
    const bad: SeedUser[] = [user('shop', 'warn-1'), { ...user('shop', 'warn-2'), date_joined: '2020-01-01T00:00:00Z' }];
    const allocation = await readIdAllocation(database.db);
    await expect(database.db.transaction().execute((trx) => upsertUsers(trx, bad, allocation))).rejects.toThrow(/warning/);
    expect(await storage.getUser('shop', 'warn-1')).toBeUndefined();
  });

  it('skips the foreign key checks of the shares\' LOAD DATA on MariaDB without Galera, and writes nothing for a merchant that is gone', async () => {
    const allocation = await readIdAllocation(database.db);
    const { rows: [server] } = await sql<{ version: string }>`SELECT VERSION() AS version`.execute(database.db);
    expect(allocation.skipForeignKeyChecks).toBe(/mariadb/i.test(server!.version) ? true : undefined);
    // A merchant deleted after the import checked it: with the checks skipped, only the batch's own
    // check of its locked merchants stands between its users and shares that name no merchant.
    const orphans = Array.from({ length: 3 }, (_, i) => user('gone-merchant', `orphan-${i}`));
    await expect(database.db.transaction().execute((trx) => upsertUsers(trx, orphans, { ...allocation, skipForeignKeyChecks: true }))).rejects.toThrow(/gone-merchant no longer exists/);
    const { rows: [left] } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM user_shares WHERE merchant_id = 'gone-merchant'`.execute(database.db);
    expect(Number(left!.n)).toBe(0);
  });

  it('falls back to multi-row INSERTs on a pool without LOCAL INFILE, their ids read back for interleaved allocation', async () => {
    const url = new URL(database.url);
    const plain = new Kysely<MerchantApiDatabase>({
      dialect: new MysqlDialect({ pool: createPool({ host: url.hostname, port: Number(url.port || 3306), user: url.username, database: url.pathname.slice(1), dateStrings: true, supportBigNumbers: true, bigNumberStrings: true, timezone: 'Z', charset: 'utf8mb4_unicode_ci' }) }),
    });
    try {
      const allocation = await readIdAllocation(plain);
      const first = Array.from({ length: 30 }, (_, i) => user('other', `f-${i}`, { deactivated_at: i % 2 ? null : '2024-01-01T00:00:00.000000+00:00' }));
      await plain.transaction().execute((trx) => upsertUsers(trx, first, allocation));
      expect(allocation.localInfile).toBe(false);
      const scattered = Array.from({ length: 5 }, (_, i) => user('other', `g-${i}`));
      await plain.transaction().execute((trx) => upsertUsers(trx, scattered, { consecutive: false, step: 1n }));
      const all = [...first, ...scattered];
      for (const filter of [{}, { active: false }]) {
        const got = (await storage.listUsers({ merchantId: 'other', filter, limit: 1000 })).filter((u) => /^[fg]-/.test(u.shared_user_id));
        expect(got).toEqual(fullScan(all, 'other', filter));
      }
    } finally {
      await plain.destroy();
    }
  });

  it('keeps LOAD DATA under interleaved allocation with auto_increment_increment=3 (Galera\'s settings): ids read back, every share on its own user', async () => {
    // One connection, so the session's increment holds for every statement of the import.
    const one = createMysqlKysely(database.url, { connectionLimit: 1 });
    try {
      await sql`SET SESSION auto_increment_increment = 3, auto_increment_offset = 2`.execute(one);
      const server = await readIdAllocation(one);
      expect(server.step).toBe(3n);
      for (const [name, allocation] of [
        ['interleaved', { consecutive: false, step: 3n }],
        ['consecutive', server],
      ] as const) {
        const users = Array.from({ length: 40 }, (_, i) => user('other', `step3-${name}-${i}`, { first_name: `first ${name} ${i}`, email_address: `${name}-${i}@example.com` }));
        const used: IdAllocation = { ...allocation };
        await one.transaction().execute((trx) => upsertUsers(trx, users, used));
        // The fast path, not the row-at-a-time fallback.
        expect(used.localInfile).toBe(true);
        for (const u of users) {
          const { merchant_id: _, ...record } = u;
          expect(await storage.getUser('other', u.shared_user_id)).toEqual(record);
        }
      }
      const { rows } = await sql<{ id: string }>`SELECT u.id FROM users u JOIN user_shares s ON s.user_id = u.id WHERE s.shared_user_id LIKE 'step3-%' ORDER BY u.id`.execute(one);
      // Three apart: the ids really were not consecutive.
      expect(rows.map((r, i) => (i === 0 ? 0n : BigInt(r.id) - BigInt(rows[i - 1]!.id))).slice(1).every((gap) => gap >= 3n)).toBe(true);
    } finally {
      await one.destroy();
    }
  });

  it('finds existing users whose ids interleave with many others (a wide id range): updates them, inserts the rest', async () => {
    await importSeed(database.db, database.masterKey, { merchants: [], users: Array.from({ length: 100 }, (_, i) => user('shop', `w-${String(i).padStart(3, '0')}`)) });
    const batch = [user('shop', 'w-000x'), user('shop', 'w-010', { first_name: 'Changed' }), user('shop', 'w-050x'), user('shop', 'w-099', { deactivated_at: '2024-01-01T00:00:00.000000+00:00' }), user('shop', 'w-099x')];
    const allocation = await readIdAllocation(database.db);
    expect(await database.db.transaction().execute((trx) => upsertUsers(trx, batch, allocation))).toEqual({ inserted: 3, updated: 2, unchanged: 0, byMerchant: new Map([['shop', { inserted: 3, updated: 2, unchanged: 0 }]]) });
    expect((await storage.getUser('shop', 'w-010'))!.first_name).toBe('Changed');
    expect((await storage.listUsers({ merchantId: 'shop', filter: { active: false }, after: 'w-', limit: 10 })).map((u) => u.shared_user_id)).toEqual(['w-099']);
  });

  describe('a user shared with two merchants: an import for one never hides the change from the other\'s sync loop', () => {
    /** Merchants `a` and `b`; `a`'s user a-1 is also `b`'s b-shared (one users row, two shares), and `b` has b-1 of its own. */
    const shared = async (a: string, b: string) => {
      await importSeed(database.db, database.masterKey, { merchants: [{ id: a, status: 'active', keys: ['ka'] }, { id: b, status: 'active', keys: ['kb'] }], users: [user(a, 'a-1'), user(b, 'b-1')] });
      const share = await database.db.selectFrom('user_shares').selectAll().where('merchant_id', '=', a).where('shared_user_id', '=', 'a-1').executeTakeFirstOrThrow();
      await database.db.insertInto('user_shares').values({ ...share, user_id: String(share.user_id), merchant_id: b, shared_user_id: 'b-shared' }).execute();
      return share.user_id;
    };
    /** One round of the sync loop of docs/protocol.md#the-sync-loop: what changed since `since`, and the last `updated_at` seen. */
    const sync = async (merchantId: string, since?: string) => {
      const page = (await storage.listUsers({ merchantId, filter: since === undefined ? {} : { updatedSince: since }, order: 'updated_at', limit: 1000 })) as ChangedUserRecord[];
      return { users: new Map(page.map((u) => [u.shared_user_id, u])), last: page.at(-1)!.updated_at };
    };

    it('b\'s stamps ahead of the clock (it was set back): the change is stamped after them', async () => {
      await shared('ahead-a', 'ahead-b');
      // b's shares were stamped while the server's clock was an hour ahead.
      await sql`UPDATE user_shares SET updated_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR WHERE merchant_id = 'ahead-b'`.execute(database.db);
      const first = await sync('ahead-b');
      // Through the NDJSON path (the race below goes through a seed's).
      await importUserFile(database.db, await ndjson('ahead.ndjson', [JSON.stringify(user('ahead-a', 'a-1', { city: 'Köln' }))]));
      const next = await sync('ahead-b', first.last);
      expect(next.users.get('b-shared')).toMatchObject({ city: 'Köln' });
      expect(next.users.get('b-shared')!.updated_at > first.last).toBe(true);
      // a's own share carries the same stamp: one per batch.
      expect((await sync('ahead-a')).users.get('a-1')!.updated_at).toBe(next.users.get('b-shared')!.updated_at);
    });

    it('b\'s own import commits while a\'s is still writing: b\'s next round still finds the shared change', async () => {
      const userId = await shared('race-a', 'race-b');
      /** Transactions of this database waiting for a lock. */
      const waiting = async () =>
        Number((await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
          WHERE t.trx_state = 'LOCK WAIT' AND p.DB = ${database.name}`.execute(database.db)).rows[0]!.n);
      const until = async (done: () => Promise<boolean>) => {
        for (const end = Date.now() + 5000; !(await done()); ) {
          if (Date.now() > end) throw new Error('the condition never held');
          // InnoDB refreshes INNODB_TRX only after 0.1 s without a read of it: a faster poll reads the same old rows forever.
          await sleep(150);
        }
      };
      // Another transaction holds the shared users row: a's import stops at it, holding what it locked.
      let release!: () => void;
      let holding!: () => void;
      const held = new Promise<void>((resolve) => (holding = resolve));
      const blocker = database.db.transaction().execute(async (trx) => {
        await sql`SELECT id FROM users WHERE id = ${userId} FOR UPDATE`.execute(trx);
        holding();
        await new Promise<void>((resolve) => (release = resolve));
      });
      await held;
      const importA = importSeed(database.db, undefined, { merchants: [], users: [user('race-a', 'a-1', { city: 'Köln' })] });
      await until(async () => (await waiting()) === 1);
      // b's import of its own user: it must wait for a's (which stamps b's share), or commit first only with a later stamp.
      let bDone = false;
      const importB = importSeed(database.db, undefined, { merchants: [], users: [user('race-b', 'b-1', { city: 'Hamburg' })] }).then(() => (bDone = true));
      await until(async () => bDone || (await waiting()) === 2);
      const first = await sync('race-b');
      release();
      await Promise.all([blocker, importA, importB]);
      const next = await sync('race-b', first.last);
      expect(next.users.get('b-shared')).toMatchObject({ city: 'Köln' });
      expect(next.users.get('b-1')).toMatchObject({ city: 'Hamburg' });
    });
  });
});
