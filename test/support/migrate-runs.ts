/**
 * The real `migrate` of the CLI as a process the suites can stop where they want (its test hook,
 * MERCHANT_API_TEST_MIGRATE_PAUSE, or a kill at any moment), and what a database's schema is, to
 * compare a run that was killed and completed with a clean one (test/storage/mysql/mysql-migrate-killed.test.ts,
 * test/storage/galera/galera-migrate-killed.test.ts).
 */
import { spawn } from 'node:child_process';
import { sql, type Kysely } from 'kysely';
import { CLEAN_ENV, CLI, ROOT } from './processes.js';
import { sleep } from './sleep.js';

export interface MigrateRun {
  readonly child: ReturnType<typeof spawn>;
  output(): string;
  /** The exit code (null when killed by a signal). */
  readonly exited: Promise<number | null>;
}

/** `node dist/cli.js migrate` on `url`, with `env` (e.g. MERCHANT_API_TEST_MIGRATE_PAUSE). */
export function runMigrate(url: string, env: Record<string, string> = {}): MigrateRun {
  const child = spawn(process.execPath, [CLI.node, 'migrate'], { cwd: ROOT, env: { ...process.env, ...CLEAN_ENV, DATABASE_URL: url, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/** Waits until `ready()` holds, checking every 20 ms; fails naming `what` after 90 s, or as soon as `run` exits. */
export async function until(what: string, ready: () => boolean | Promise<boolean>, run?: MigrateRun): Promise<void> {
  let exited = false;
  void run?.exited.then(() => (exited = true));
  for (const started = Date.now(); Date.now() - started < 90_000; await sleep(20)) {
    if (await ready()) return;
    if (exited) throw new Error(`migrate exited before ${what}:\n${run!.output()}`);
  }
  throw new Error(`never ${what}${run ? `:\n${run.output()}` : ''}`);
}

/** `migrate` stopped by its hook after step `index` of `migration`, then SIGKILLed there. */
export async function migrateKilledAfter(url: string, migration: string, index: number): Promise<void> {
  const run = runMigrate(url, { MERCHANT_API_TEST_MIGRATE_PAUSE: `${migration}:${index}` });
  await until(`paused after step ${index} of ${migration}`, () => run.output().includes(`migrate paused after step ${index} of `), run);
  await kill(run);
}

export async function kill(run: MigrateRun): Promise<void> {
  run.child.kill('SIGKILL');
  await run.exited;
}

/** A `migrate` that must succeed; its output. */
export async function migrateOk(url: string): Promise<string> {
  const run = runMigrate(url);
  const code = await run.exited;
  if (code !== 0) throw new Error(`migrate exited with ${code}:\n${run.output()}`);
  return run.output();
}

/** Every table's definition, the migrations and steps recorded, and the leases left: what a clean run leaves. */
export async function schemaSnapshot(db: Kysely<any>): Promise<Record<string, unknown>> {
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
