/**
 * A `migrate` killed part-way is completed by the next one (docs/mysql.md#migrations). The real
 * CLI (`node dist/cli.js migrate`) on a fresh database is SIGKILLed:
 * - after every step of every migration: its test hook (MERCHANT_API_TEST_MIGRATE_PAUSE) stops it
 *   there and says so, and the test kills it then;
 * - inside a statement: an ALTER of 0002 waiting on a metadata lock the test holds, released once
 *   the client is dead, so the server finishes the statement of a client that is gone;
 * - the moment the 4th, 6th, 10th or 14th table exists, as issue 40 measured (no hook: information_schema polled);
 * then `migrate` runs again and must succeed, and the schema must equal a clean run's: `SHOW CREATE
 * TABLE` of every table, the migrations recorded, the steps recorded. `serve` then answers /readyz 200.
 * Each kill point has its own database, a few at once.
 */
import { createConnection } from 'mysql2/promise';
import { sql } from 'kysely';
import { spawn } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { createMigrator, migrateToLatest } from '../../../src/storage/mysql/index.js';
import { migrations } from '../../../src/storage/mysql/migrations/migrations.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../../support/mysql.js';
import { CLI, CLEAN_ENV, ROOT, startServer } from '../../support/processes.js';
import { sleep } from '../../support/sleep.js';

const available = await mysqlAvailable();

/** Every step of every migration: where the hook stops `migrate`. */
const KILL_POINTS = Object.values(migrations).flatMap((migration) => migration.steps.map((step, i) => ({ migration: migration.name, index: i + 1, step: step.name })));

interface Migrate {
  child: ReturnType<typeof spawn>;
  output(): string;
  exited: Promise<number | null>;
}

/** `node dist/cli.js migrate` on `url`. */
function migrate(url: string, env: Record<string, string> = {}): Migrate {
  const child = spawn(process.execPath, [CLI.node, 'migrate'], { cwd: ROOT, env: { ...process.env, ...CLEAN_ENV, DATABASE_URL: url, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/** Waits until `ready()` holds, checking every 20 ms; fails naming `what` after 60 s, or as soon as `run` exits. */
async function until(what: string, ready: () => boolean | Promise<boolean>, run?: Migrate): Promise<void> {
  let exited = false;
  void run?.exited.then(() => (exited = true));
  for (const started = Date.now(); Date.now() - started < 60_000; await sleep(20)) {
    if (await ready()) return;
    if (exited) throw new Error(`migrate exited before ${what}:\n${run!.output()}`);
  }
  throw new Error(`never ${what}${run ? `:\n${run.output()}` : ''}`);
}

async function killed(run: Migrate): Promise<void> {
  run.child.kill('SIGKILL');
  await run.exited;
}

/** The second `migrate`, which must complete what the killed one left. */
async function migrateAgain(url: string): Promise<string> {
  const again = migrate(url);
  const code = await again.exited;
  expect(code, again.output()).toBe(0);
  return again.output();
}

/** What a clean run leaves, to compare with: every table's definition, the migrations and steps recorded, no lease left. */
async function snapshot(database: TestDatabase): Promise<Record<string, unknown>> {
  const db = database.db;
  const { rows: tables } = await sql<{ name: string }>`SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME`.execute(db);
  const definitions: Record<string, string> = {};
  for (const { name } of tables) {
    const { rows } = await sql<{ 'Create Table': string }>`SHOW CREATE TABLE ${sql.table(name)}`.execute(db);
    // The next AUTO_INCREMENT value depends on the rows written, not on the schema.
    definitions[name] = rows[0]!['Create Table'].replace(/ AUTO_INCREMENT=\d+/, '');
  }
  const applied = (await sql<{ name: string }>`SELECT name FROM merchant_api_migration ORDER BY name`.execute(db)).rows.map((row) => row.name);
  const steps = (await sql<{ migration: string; step: string }>`SELECT migration, step FROM merchant_api_migration_step ORDER BY migration, step`.execute(db)).rows.map((row) => `${row.migration} / ${row.step}`);
  const leases = (await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM merchant_api_migration_lease`.execute(db)).rows[0]!.n;
  return { definitions, applied, steps, leases: Number(leases) };
}

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
      expect(await migrateAgain(database.url)).toMatch(/The schema is up to date \(\d+ migration\(s\) applied\)/);
      clean = await snapshot(database);
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
      const first = migrate(database.url, { MERCHANT_API_TEST_MIGRATE_PAUSE: `${migration}:${index}` });
      await until(`paused after step ${index} of ${migration}`, () => first.output().includes(`migrate paused after step ${index} `), first);
      await killed(first);
      // Stopped inside the migration: not recorded as applied, its earlier steps are.
      expect((await sql<{ name: string }>`SELECT name FROM merchant_api_migration`.execute(database.db)).rows.map((row) => row.name)).not.toContain(migration);

      const output = await migrateAgain(database.url);
      expect(output).toContain(`Completing migration ${migration}: an earlier migrate stopped part-way through it.`);
      expect(await snapshot(database)).toEqual(clean);
      // One near the start, one in the middle, the last: the server starts on what the rerun left.
      if (KILL_POINTS[0]!.migration === migration && index === 1) expect(await readyz(database)).toBe(200);
      if (KILL_POINTS.at(-1)!.migration === migration && index === KILL_POINTS.at(-1)!.index) expect(await readyz(database)).toBe(200);
    } finally {
      await database.drop();
    }
  }, 120_000);

  it('killed inside a statement (an ALTER waiting on a lock), the server finishes it, the next migrate goes on after it', async () => {
    const database = await createTestDatabase({ migrate: false });
    const holder = await createConnection({ uri: database.url });
    try {
      expect((await createMigrator(database.db).migrateTo('0001_initial')).error).toBeUndefined();
      // A transaction that read user_shares holds its metadata lock: 0002's first ALTER waits for it.
      await holder.query('START TRANSACTION');
      await holder.query('SELECT * FROM user_shares');
      const first = migrate(database.url);
      await until('0002 waits for the metadata lock', async () => {
        const { rows } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST
          WHERE DB = ${database.name} AND INFO LIKE 'ALTER TABLE user_shares%' AND STATE = 'Waiting for table metadata lock'`.execute(database.db);
        return Number(rows[0]!.n) > 0;
      }, first);
      await killed(first);
      await holder.query('COMMIT');

      const output = await migrateAgain(database.url);
      // The server ran the ALTER of the dead client once the lock was free: the rerun finds it done.
      expect(output).toContain('Completing migration 0002_user_share_filters: an earlier migrate stopped part-way through it.\n  step 1 of 3 (add is_active and date_joined) had finished after that migrate stopped.');
      expect(await snapshot(database)).toEqual(clean);
      expect(await readyz(database)).toBe(200);
    } finally {
      await holder.end();
      await database.drop();
    }
  }, 120_000);

  // Issue 40 killed it the moment the 4th, 6th, ... 14th table existed (the bookkeeping tables count).
  it.concurrent.each([4, 8, 14])('killed the moment the %ith table exists (information_schema polled): the next migrate completes it', async (tables) => {
    const database = await createTestDatabase({ migrate: false });
    try {
      const first = migrate(database.url);
      await until(`${tables} tables exist`, async () => {
        const { rows } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = ${database.name}`.execute(database.db);
        return Number(rows[0]!.n) >= tables;
      }, first);
      await killed(first);
      await migrateAgain(database.url);
      expect(await snapshot(database)).toEqual(clean);
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
      expect(await snapshot(database)).toEqual(clean);
    } finally {
      await database.drop();
    }
  }, 120_000);
});
