/**
 * A `migrate` killed part-way is completed by the next one (docs/mysql.md#migrations). The real
 * CLI (`node dist/cli.js migrate`) on a fresh database is SIGKILLed:
 * - after every step of every migration: its test hook (MERCHANT_API_TEST_MIGRATE_PAUSE) stops it
 *   there and says so, and the test kills it then;
 * - inside a statement: an ALTER of 0002 waiting on a metadata lock the test holds, released once
 *   the client is dead, so the server finishes the statement of a client that is gone (found done
 *   by the next run); and released only once the next run has started (which must wait for it);
 * - the moment the 4th, 8th or 14th table exists, as issue 40 measured (no hook: information_schema polled);
 * then `migrate` runs again and must succeed, and the schema must equal a clean run's: `SHOW CREATE
 * TABLE` of every table, the migrations recorded, the steps recorded. `serve` then answers /readyz 200.
 * Also: databases the release before the steps left half-way are completed, a table of the same
 * name made by someone else is not taken for ours, and down all the way and up again.
 * Each kill point has its own database, a few at once. On Galera: test/storage/galera/galera-migrate-killed.test.ts.
 */
import { createConnection, type RowDataPacket } from 'mysql2/promise';
import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { createMigrator, migrateToLatest } from '../../../src/storage/mysql/index.js';
import { migrations } from '../../../src/storage/mysql/migrations/migrations.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../../support/mysql.js';
import { CLI, startServer } from '../../support/processes.js';
import { kill, migrateKilledAfter, migrateOk, runMigrate, schemaSnapshot, until } from '../../support/migrate-runs.js';

const available = await mysqlAvailable();

/** Every step of every migration: where the hook stops `migrate`. */
const KILL_POINTS = Object.values(migrations).flatMap((migration) => migration.steps.map((step, i) => ({ migration: migration.name, index: i + 1, step: step.name })));

async function readyz(database: TestDatabase): Promise<number> {
  const server = await startServer('node', CLI.node, { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText }, ['serve']);
  try {
    return (await fetch(`${server.url}/readyz`)).status;
  } finally {
    await server.stop();
  }
}

describe.skipIf(!available)('a migrate killed part-way', () => {
  let clean: Record<string, unknown>;

  beforeAll(async () => {
    const database = await createTestDatabase({ migrate: false });
    try {
      expect(await migrateOk(database.url)).toMatch(/The schema is up to date \(\d+ migration\(s\) applied\)/);
      clean = await schemaSnapshot(database.db);
    } finally {
      await database.drop();
    }
  }, 120_000);

  it('has a kill point after every step of every migration', () => {
    expect(KILL_POINTS.length).toBeGreaterThanOrEqual(Object.keys(migrations).length);
    expect((clean.steps as string[]).length).toBe(KILL_POINTS.length);
    expect(clean.applied).toEqual(Object.keys(migrations));
  });

  it.concurrent.each(KILL_POINTS)('killed after step $index of $migration ($step): the next migrate completes it', async ({ migration, index }) => {
    const database = await createTestDatabase({ migrate: false });
    try {
      await migrateKilledAfter(database.url, migration, index);
      // Stopped inside the migration: not recorded as applied, its earlier steps are.
      expect((await sql<{ name: string }>`SELECT name FROM merchant_api_migration`.execute(database.db)).rows.map((row) => row.name)).not.toContain(migration);

      const output = await migrateOk(database.url);
      expect(output).toContain(`Completing migration ${migration}: an earlier migrate stopped part-way through it.`);
      expect(await schemaSnapshot(database.db)).toEqual(clean);
      // The first and the last: the server starts on what the rerun left.
      if (KILL_POINTS[0]!.migration === migration && index === 1) expect(await readyz(database)).toBe(200);
      if (KILL_POINTS.at(-1)!.migration === migration && index === KILL_POINTS.at(-1)!.index) expect(await readyz(database)).toBe(200);
    } finally {
      await database.drop();
    }
  }, 120_000);

  /** A database at 0001, a lock on user_shares, and `migrate` killed while its first ALTER of 0002 waits for it. */
  async function killedInsideAlter(database: TestDatabase) {
    const holder = await createConnection({ uri: database.url });
    const watcher = await createConnection({ uri: database.url });
    const connections = async () => {
      const [rows] = await watcher.query<RowDataPacket[]>('SELECT ID AS id, INFO AS info, STATE AS state FROM information_schema.PROCESSLIST WHERE DB = ?', [database.name]);
      return rows as { id: number; info: string | null; state: string | null }[];
    };
    expect((await createMigrator(database.db).migrateTo('0001_initial')).error).toBeUndefined();
    // A transaction that read user_shares holds its metadata lock: 0002's first ALTER waits for it.
    await holder.query('START TRANSACTION');
    await holder.query('SELECT * FROM user_shares');
    const first = runMigrate(database.url);
    await until('0002 waits for the metadata lock', async () => (await connections()).some((row) => row.info?.startsWith('ALTER TABLE user_shares') && row.state === 'Waiting for table metadata lock'), first);
    await kill(first);
    return { holder, connections, end: async () => void (await Promise.all([holder.end(), watcher.end()])) };
  }

  it('killed inside a statement (an ALTER waiting on a lock, let go at once): the server finishes it, the next migrate goes on after it', async () => {
    const database = await createTestDatabase({ migrate: false });
    const killedRun = await killedInsideAlter(database);
    try {
      await killedRun.holder.query('COMMIT');
      const output = await migrateOk(database.url);
      // The server ran the ALTER of the dead client once the lock was free: the rerun found it done.
      expect(output).toContain('Completing migration 0002_user_share_filters: an earlier migrate stopped part-way through it.\n  step 1 of 3 (add is_active and date_joined) had finished after that migrate stopped.');
      expect(await schemaSnapshot(database.db)).toEqual(clean);
      expect(await readyz(database)).toBe(200);
    } finally {
      await killedRun.end();
      await database.drop();
    }
  }, 120_000);

  it('killed inside a statement, the next migrate started while that statement still waits in the server: it completes the migration once', async () => {
    const database = await createTestDatabase({ migrate: false });
    const killedRun = await killedInsideAlter(database);
    try {
      const before = new Set((await killedRun.connections()).map((row) => row.id));
      const again = runMigrate(database.url);
      await until('the next migrate is connected', async () => (await killedRun.connections()).some((row) => !before.has(row.id)), again);
      // The dead client's ALTER runs now, unless the server has noticed the client is gone and
      // dropped it: either way the next migrate must not apply it twice.
      await killedRun.holder.query('COMMIT');
      expect(await again.exited, again.output()).toBe(0);
      expect(await schemaSnapshot(database.db)).toEqual(clean);
    } finally {
      await killedRun.end();
      await database.drop();
    }
  }, 120_000);

  // Issue 40 killed it the moment the 4th, 6th, ... 14th table existed (the bookkeeping tables count).
  it.concurrent.each([4, 8, 14])('killed the moment the %ith table exists (information_schema polled): the next migrate completes it', async (tables) => {
    const database = await createTestDatabase({ migrate: false });
    try {
      const first = runMigrate(database.url);
      await until(`${tables} tables exist`, async () => {
        const { rows } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = ${database.name}`.execute(database.db);
        return Number(rows[0]!.n) >= tables;
      }, first);
      await kill(first);
      await migrateOk(database.url);
      expect(await schemaSnapshot(database.db)).toEqual(clean);
    } finally {
      await database.drop();
    }
  }, 120_000);

  // What the code before the steps were recorded (3920f53) left when killed, and could never complete.
  it.concurrent.each([
    ['0001_initial', 4],
    ['0002_user_share_filters', 3],
    ['0008_webhooks', 2],
    ['0011_auth_failures_census', 3],
  ] as const)('a database an earlier release left part-way (%s, %i steps done, none recorded): migrate completes it', async (name, done) => {
    const database = await createTestDatabase({ migrate: false });
    try {
      const names = Object.keys(migrations);
      const before = names[names.indexOf(name) - 1];
      if (before) expect((await createMigrator(database.db).migrateTo(before)).error).toBeUndefined();
      for (const step of migrations[name]!.steps.slice(0, done)) {
        if (step.kind === 'data') await database.db.transaction().execute((trx) => step.run(trx));
        else await step.run(database.db);
      }
      const output = await migrateOk(database.url);
      expect(output).toContain(`Completing migration ${name}`);
      expect(await schemaSnapshot(database.db)).toEqual(clean);
    } finally {
      await database.drop();
    }
  }, 120_000);

  it('does not take a table it did not make for its own: one behind a step it had to run fails the migrate', async () => {
    const database = await createTestDatabase({ migrate: false });
    try {
      expect((await createMigrator(database.db).migrateTo('0007_key_limits_audit')).error).toBeUndefined();
      // Some other application's webhook_events, while 0008 has not begun: its first step runs, so its second cannot be "found".
      await sql`CREATE TABLE webhook_events (id INT PRIMARY KEY)`.execute(database.db);
      const run = runMigrate(database.url);
      expect(await run.exited).toBe(1);
      expect(run.output()).toContain('migrate failed: MySQL migrate failed (ER_TABLE_EXISTS_ERROR).');
    } finally {
      await database.drop();
    }
  }, 120_000);

  it('goes all the way down and up again to the same schema (the library migrator; the CLI has no down)', async () => {
    const database = await createTestDatabase({ migrate: false });
    try {
      await migrateToLatest(database.db);
      for (const name of Object.keys(migrations).reverse()) {
        expect((await createMigrator(database.db).migrateDown()).results).toEqual([{ migrationName: name, direction: 'Down', status: 'Success' }]);
      }
      const { rows } = await sql<{ name: string }>`SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME NOT LIKE 'merchant_api_%'`.execute(database.db);
      expect(rows).toEqual([]);
      expect((await sql`SELECT * FROM merchant_api_migration_step`.execute(database.db)).rows).toEqual([]);
      await migrateToLatest(database.db);
      expect(await schemaSnapshot(database.db)).toEqual(clean);
    } finally {
      await database.drop();
    }
  }, 120_000);
});
