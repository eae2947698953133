/**
 * Migrations that a killed `migrate` leaves resumable. MySQL DDL is not transactional: a
 * migration of several statements killed half-way stays half-applied, and the next run, starting
 * it again from its first statement, met its own tables (measured on the code before this file:
 * ER_TABLE_EXISTS_ERROR or ER_DUP_FIELDNAME on every rerun, for good). So a migration is a list of
 * named steps, each of one of three kinds, and every step done is recorded in
 * `merchant_api_migration_step`; a rerun skips the recorded ones and goes on where the last run
 * stopped:
 * - `schemaStep`: one DDL statement (which MySQL 8 and MariaDB apply whole or not at all) with a
 *   check of `information_schema` that says whether its effect is there. The statement of a
 *   client killed while it ran goes on in the server and may finish after its step could be
 *   recorded: the check finds it done, and the step is recorded without running again. Only the
 *   steps before the first one this run has to run are checked (what earlier runs left is a prefix
 *   of the steps, recorded or, by a release before this file, not); checks use
 *   `information_schema` only, so nothing relies on MariaDB's `IF NOT EXISTS` clauses (MySQL 8
 *   has none for columns and indexes).
 * - `dataStep`: data changes (INSERT, UPDATE, DELETE only: DDL would commit half-way) run in one
 *   transaction together with the step's record, so they apply exactly once: a client killed
 *   before the commit leaves nothing of them.
 * - `batchedStep`: a data change too big for one transaction (a fill in batches), each batch
 *   committed alone; it must pick only the rows not yet done (`WHERE key_id IS NULL`), so that a
 *   rerun carries on from the last batch that committed.
 * Down runs the down steps (each must be safe to run again: `DROP TABLE IF EXISTS`, or an
 * `undone` check that says the change is already undone), then forgets the migration's recorded
 * steps.
 *
 * Writing a new migration (the registry in migrations.ts accepts only `defineMigration`'s):
 * - one DDL statement per `schemaStep`, with a check of exactly what it creates or removes
 *   (a table, a column, an index: `schema-facts.ts`); an ALTER of several clauses is one statement
 *   and applies whole, so a check of the last clause's effect is enough;
 * - every INSERT/UPDATE/DELETE in a `dataStep` (exactly once) or a `batchedStep` (idempotent);
 * - never rename a step or change what an applied one does: a database stopped after it would
 *   skip or repeat it; test/storage/mysql/mysql-migrate-killed.test.ts kills `migrate` after every
 *   step of every migration and compares the schema with a clean run's.
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Migration } from './kysely-migrator.js';
import { retryOnConflict } from '../write-conflicts.js';

/**
 * How long, ms, a step is run again after write conflicts (ER_LOCK_DEADLOCK): on Galera a
 * migration's transaction or statement can lose to a write or DDL of the cluster (seen once in a
 * quiet suite: a migrate failed in 0002 while another ran on the same node), and what lost changed
 * nothing. A migrate is not waited on by a request, so it waits longer than a request's write does.
 */
export const MIGRATION_CONFLICT_RETRY_MS = 30_000;

/** Where each step done is recorded, by migration and step name. */
export const MIGRATION_STEP_TABLE = 'merchant_api_migration_step';

export type MigrationStep =
  | { readonly kind: 'schema'; readonly name: string; readonly applied: (db: Kysely<any>) => Promise<boolean>; readonly run: (db: Kysely<any>) => Promise<void> }
  | { readonly kind: 'data'; readonly name: string; readonly run: (trx: Transaction<any>) => Promise<void> }
  | { readonly kind: 'batched'; readonly name: string; readonly run: (db: Kysely<any>) => Promise<void> };

/** A down step: safe to run again after a down that was killed. */
export interface DownStep {
  readonly name: string;
  /** True when the change is already undone (then `run` is skipped); absent: `run` is idempotent itself. */
  readonly undone?: (db: Kysely<any>) => Promise<boolean>;
  readonly run: (db: Kysely<any>) => Promise<void>;
}

/** One DDL statement and the check that says its effect is already there. */
export function schemaStep(name: string, applied: (db: Kysely<any>) => Promise<boolean>, run: (db: Kysely<any>) => Promise<void>): MigrationStep {
  return { kind: 'schema', name, applied, run };
}

/** Data changes applied exactly once: in one transaction with the step's record. */
export function dataStep(name: string, run: (trx: Transaction<any>) => Promise<void>): MigrationStep {
  return { kind: 'data', name, run };
}

/** A data change in batches, each committed alone; `run` must touch only the rows not yet done. */
export function batchedStep(name: string, run: (db: Kysely<any>) => Promise<void>): MigrationStep {
  return { kind: 'batched', name, run };
}

/** What the caller of a migration run may observe after each step (the CLI's test hook, a progress log). */
export interface MigrationStepEvent {
  readonly migration: string;
  readonly step: string;
  /** The step's place in its migration, from 1, and how many steps the migration has. */
  readonly index: number;
  readonly of: number;
  /** `applied`: ran now; `found`: a schema step's effect was already there (a statement left running by a killed run); `skipped`: recorded by an earlier run. */
  readonly outcome: 'applied' | 'found' | 'skipped';
}

export interface MigrationHooks {
  /** Called after each up step is done and recorded, before the next one starts. */
  afterStep?(event: MigrationStepEvent): void | Promise<void>;
}

/** A migration made of resumable steps; also a Kysely `Migration` (its up and down run the steps). */
export interface ResumableMigration extends Migration {
  readonly name: string;
  readonly steps: readonly MigrationStep[];
  readonly downSteps: readonly DownStep[];
  /** The same migration reporting each step to `hooks`. */
  withHooks(hooks: MigrationHooks): Migration;
}

/** Creates the step table; IF NOT EXISTS: runs at the start of every migration, on every node alike. */
async function ensureStepTable(db: Kysely<any>): Promise<void> {
  await sql
    .raw(
      `CREATE TABLE IF NOT EXISTS ${MIGRATION_STEP_TABLE} (
        migration VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
        step VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
        applied_at DATETIME(6) NOT NULL,
        PRIMARY KEY (migration, step)
      ) ENGINE=InnoDB`,
    )
    .execute(db);
}

async function recordedSteps(db: Kysely<any>, migration: string): Promise<Set<string>> {
  const { rows } = await sql<{ step: string }>`SELECT step FROM ${sql.table(MIGRATION_STEP_TABLE)} WHERE migration = ${migration}`.execute(db);
  return new Set(rows.map((row) => row.step));
}

async function record(db: Kysely<any>, migration: string, step: string): Promise<void> {
  // Kept if already there: a step found done may have been recorded by the run that did it.
  await sql`INSERT INTO ${sql.table(MIGRATION_STEP_TABLE)} (migration, step, applied_at) VALUES (${migration}, ${step}, UTC_TIMESTAMP(6))
    ON DUPLICATE KEY UPDATE step = step`.execute(db);
}

async function runUp(db: Kysely<any>, name: string, steps: readonly MigrationStep[], hooks: MigrationHooks): Promise<void> {
  await ensureStepTable(db);
  const done = await recordedSteps(db, name);
  // Earlier runs did the steps in order, so what they left is a prefix of them (a release before
  // the steps were recorded left it without records): a schema step is looked for until this run has
  // had to run one. After that, a step whose effect is there anyway met an object this migration
  // did not make, and fails as it should.
  let mayFind = true;
  for (const [index, step] of steps.entries()) {
    let outcome: MigrationStepEvent['outcome'] = 'applied';
    if (done.has(step.name)) {
      outcome = 'skipped';
    } else if (step.kind === 'data') {
      // A transaction that lost a conflict was rolled back whole: run again, it applies once.
      await retryOnConflict(
        () =>
          db.transaction().execute(async (trx) => {
            await step.run(trx);
            await record(trx, name, step.name);
          }),
        MIGRATION_CONFLICT_RETRY_MS,
      );
    } else {
      if (step.kind === 'schema' && mayFind && (await step.applied(db))) outcome = 'found';
      else {
        // A DDL statement applies whole or not at all, and a batched step picks the rows not yet done: either may run again.
        await retryOnConflict(() => step.run(db), MIGRATION_CONFLICT_RETRY_MS);
        if (step.kind === 'schema') mayFind = false;
      }
      await retryOnConflict(() => record(db, name, step.name), MIGRATION_CONFLICT_RETRY_MS);
    }
    await hooks.afterStep?.({ migration: name, step: step.name, index: index + 1, of: steps.length, outcome });
  }
}

async function runDown(db: Kysely<any>, name: string, steps: readonly DownStep[]): Promise<void> {
  for (const step of steps) {
    if (step.undone && (await step.undone(db))) continue;
    await step.run(db);
  }
  // Last, so that a down killed half-way leaves the up steps recorded for the down that completes it.
  await ensureStepTable(db);
  await sql`DELETE FROM ${sql.table(MIGRATION_STEP_TABLE)} WHERE migration = ${name}`.execute(db);
}

/** A migration of resumable steps, recorded under `name` (the name it has in the registry). */
export function defineMigration(name: string, definition: { up: readonly MigrationStep[]; down: readonly DownStep[] }): ResumableMigration {
  const names = new Set<string>();
  for (const step of definition.up) {
    if (names.has(step.name)) throw new Error(`migration ${name}: two steps named ${step.name}`);
    if (!/^[\x20-\x7e]{1,128}$/.test(step.name)) throw new Error(`migration ${name}: a step's name is 1 to 128 printable ASCII characters (${step.name})`);
    names.add(step.name);
  }
  const withHooks = (hooks: MigrationHooks): Migration => ({
    up: (db) => runUp(db, name, definition.up, hooks),
    down: (db) => runDown(db, name, definition.down),
  });
  return { name, steps: definition.up, downSteps: definition.down, ...withHooks({}), withHooks };
}
