/**
 * The migration lock that holds across the nodes of a multi-primary cluster (docs/mysql.md#galera-cluster).
 * Kysely's `Migrator` takes a MySQL `GET_LOCK`, which is per server: on Galera two `migrate` runs on
 * two nodes both get it and both create the same tables (measured: two of three concurrent runs
 * failed with ER_TABLE_EXISTS_ERROR). The lease here is a committed row instead: one row per lock
 * name in `merchant_api_migration_lease`, taken by an INSERT (or by an UPDATE of an expired lease), so
 * of two nodes taking it at once one commit wins and the other fails certification (1213) or meets
 * the row (1062), and waits. The lease expires, so a migrator that died does not block forever; the
 * holder renews it while it works.
 *
 * The lease table is created here, idempotently, not by a numbered migration: the lock must work
 * before the first migration runs. Once a node has committed its lease row, every write set ordered
 * before it (the previous holder's migrations) is committed on that node too (Galera commits in one
 * total order), so the migrator that follows reads the migrations already applied.
 */
import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { mysqlErrorCode } from '../storage-error.js';

export const MIGRATION_LEASE_TABLE = 'merchant_api_migration_lease';

/** Bounds of taking the lease. */
export interface MigrationLeaseOptions {
  /** How long a lease lasts unless renewed (default 30 s): the longest a dead migrator blocks the others. */
  leaseMs?: number;
  /** How long to wait for another migrator's lease before giving up (default 10 minutes). */
  waitMs?: number;
  /** Pause between attempts while another migrator holds it (default 200 ms). */
  pollMs?: number;
}

const DEFAULT_LEASE_MS = 30_000;
const DEFAULT_WAIT_MS = 600_000;
const DEFAULT_POLL_MS = 200;
const LOCK_NAME = 'migrate';

/** The errors that mean "another node took it first": the row exists, or our commit lost certification. */
function lostTheRace(error: unknown): boolean {
  const code = mysqlErrorCode(error);
  return code === 'ER_DUP_ENTRY' || code === 'ER_LOCK_DEADLOCK' || code === 'ER_LOCK_WAIT_TIMEOUT';
}

async function ensureLeaseTable(db: Kysely<any>): Promise<void> {
  // IF NOT EXISTS: three nodes creating it at once all succeed (Galera runs DDL in total order).
  await sql
    .raw(
      `CREATE TABLE IF NOT EXISTS ${MIGRATION_LEASE_TABLE} (
        name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
        holder CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
        expires_at DATETIME(6) NOT NULL,
        PRIMARY KEY (name)
      ) ENGINE=InnoDB`,
    )
    .execute(db);
}

/** One attempt: true when this holder has the lease now. */
async function tryTake(db: Kysely<any>, holder: string, leaseMs: number): Promise<boolean> {
  const expiry = sql`UTC_TIMESTAMP(6) + INTERVAL ${leaseMs * 1000} MICROSECOND`;
  try {
    await sql`INSERT INTO ${sql.table(MIGRATION_LEASE_TABLE)} (name, holder, expires_at) VALUES (${LOCK_NAME}, ${holder}, ${expiry})`.execute(db);
    return true;
  } catch (error) {
    if (!lostTheRace(error)) throw error;
  }
  try {
    // An expired lease is taken over; of two takers one commit wins.
    const result = await sql`UPDATE ${sql.table(MIGRATION_LEASE_TABLE)} SET holder = ${holder}, expires_at = ${expiry} WHERE name = ${LOCK_NAME} AND expires_at < UTC_TIMESTAMP(6)`.execute(db);
    return Number(result.numAffectedRows ?? 0n) === 1;
  } catch (error) {
    if (!lostTheRace(error)) throw error;
    return false;
  }
}

/** Runs `work` holding the cluster-wide migration lease; the lease is renewed while it runs and released after. */
export async function withMigrationLease<T>(db: Kysely<any>, work: () => Promise<T>, options: MigrationLeaseOptions = {}): Promise<T> {
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const waitMs = options.waitMs ?? DEFAULT_WAIT_MS;
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS;
  const holder = randomBytes(16).toString('hex');
  await ensureLeaseTable(db);
  const started = performance.now();
  while (!(await tryTake(db, holder, leaseMs))) {
    if (performance.now() - started > waitMs) {
      throw new Error(`Another migrator holds the migration lease (table ${MIGRATION_LEASE_TABLE}) and did not finish within ${Math.round(waitMs / 1000)} s; a lease whose migrator died expires ${Math.round(leaseMs / 1000)} s after its last renewal.`);
    }
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
  let renewing: Promise<unknown> = Promise.resolve();
  const renewal = setInterval(() => {
    renewing = sql`UPDATE ${sql.table(MIGRATION_LEASE_TABLE)} SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ${leaseMs * 1000} MICROSECOND WHERE name = ${LOCK_NAME} AND holder = ${holder}`
      .execute(db)
      // A failed renewal is tried again at the next tick; the lease lasts leaseMs from the last one that worked.
      .catch(() => undefined);
  }, Math.max(1000, Math.floor(leaseMs / 3)));
  try {
    return await work();
  } finally {
    clearInterval(renewal);
    await renewing;
    await sql`DELETE FROM ${sql.table(MIGRATION_LEASE_TABLE)} WHERE name = ${LOCK_NAME} AND holder = ${holder}`.execute(db).catch(() => undefined);
  }
}
