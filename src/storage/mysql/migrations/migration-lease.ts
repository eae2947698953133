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
 * A holder that died is also seen at once from its own server: the holder runs the migrations on
 * one connection, which holds a named lock (`GET_LOCK('merchant_api_migrate_<holder>')`) while the
 * lease is held, and writes which server that is (`node`: host name, port and Galera's node id). A
 * taker on that server finds the lock free (`IS_USED_LOCK` NULL) once the holder's connection is
 * gone, and takes the lease over without waiting for it to expire (measured: a `migrate` killed
 * mid-way made the next one wait 25-30 s before). A statement the dead holder left running keeps its
 * connection, and so the lock, until it ends: the taker waits for it. From another node the lock
 * cannot be seen: there the lease expires as before. Kysely's own `GET_LOCK` is not taken (its
 * name is the same for every database of a server, so the migrations of two databases waited for
 * each other, up to an hour, and a query timeout cut the wait): the lease is the lock.
 *
 * The lease table is created here, idempotently, not by a numbered migration: the lock must work
 * before the first migration runs. Once a node has committed its lease row, every write set ordered
 * before it (the previous holder's migrations) is committed on that node too (Galera commits in one
 * total order), so the migrator that follows reads the migrations already applied.
 */
import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { mysqlErrorCode } from '../storage-error.js';
import { columnsExist } from './schema-facts.js';

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
        node ${NODE_COLUMN},
        PRIMARY KEY (name)
      ) ENGINE=InnoDB`,
    )
    .execute(db);
  // A lease table of an earlier release has no node: its rows (and those an earlier release still writes) only expire.
  if (await columnsExist(db, MIGRATION_LEASE_TABLE, 'node')) return;
  try {
    await sql.raw(`ALTER TABLE ${MIGRATION_LEASE_TABLE} ADD COLUMN node ${NODE_COLUMN}`).execute(db);
  } catch (error) {
    if (mysqlErrorCode(error) !== 'ER_DUP_FIELDNAME') throw error;
  }
}

const NODE_COLUMN = 'VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL';

/** The named lock a holder keeps while it lives (53 characters: MySQL allows 64). */
function aliveLock(holder: string): string {
  return `merchant_api_migrate_${holder}`;
}

/** Which server this connection is on: host name and port, and on Galera the node's id in the cluster. */
async function nodeOf(connection: Kysely<any>): Promise<string> {
  const { rows } = await sql<{ host: string; port: number | string }>`SELECT @@hostname AS host, @@port AS port`.execute(connection);
  const { rows: status } = await sql<{ Value: string }>`SHOW STATUS LIKE 'wsrep_gcomm_uuid'`.execute(connection);
  const cluster = status[0]?.Value ?? '';
  return `${rows[0]?.host ?? ''}:${rows[0]?.port ?? ''}${cluster === '' ? '' : `:${cluster}`}`.slice(0, 255);
}

/** Takes the named lock that says this holder lives; false when the server refuses it (then the lease only expires). */
async function holdAliveLock(connection: Kysely<any>, holder: string): Promise<boolean> {
  try {
    const { rows } = await sql<{ got: number | string | null }>`SELECT GET_LOCK(${aliveLock(holder)}, 0) AS got`.execute(connection);
    return Number(rows[0]?.got) === 1;
  } catch {
    return false;
  }
}

/** One attempt: true when this holder has the lease now. */
async function tryTake(connection: Kysely<any>, holder: string, node: string | null, leaseMs: number): Promise<boolean> {
  const expiry = sql`UTC_TIMESTAMP(6) + INTERVAL ${leaseMs * 1000} MICROSECOND`;
  try {
    await sql`INSERT INTO ${sql.table(MIGRATION_LEASE_TABLE)} (name, holder, expires_at, node) VALUES (${LOCK_NAME}, ${holder}, ${expiry}, ${node})`.execute(connection);
    return true;
  } catch (error) {
    if (!lostTheRace(error)) throw error;
  }
  try {
    // An expired lease is taken over; of two takers one commit wins.
    const result = await sql`UPDATE ${sql.table(MIGRATION_LEASE_TABLE)} SET holder = ${holder}, expires_at = ${expiry}, node = ${node} WHERE name = ${LOCK_NAME} AND expires_at < UTC_TIMESTAMP(6)`.execute(connection);
    if (Number(result.numAffectedRows ?? 0n) === 1) return true;
    if (node === null) return false;
    // So is the lease of a holder on this server whose named lock is free: its process is gone.
    const { rows } = await sql<{ holder: string; dead: number | string }>`SELECT holder, IS_USED_LOCK(CONCAT('merchant_api_migrate_', holder)) IS NULL AS dead
      FROM ${sql.table(MIGRATION_LEASE_TABLE)} WHERE name = ${LOCK_NAME} AND node = ${node}`.execute(connection);
    const lease = rows[0];
    if (lease === undefined || Number(lease.dead) !== 1) return false;
    const taken = await sql`UPDATE ${sql.table(MIGRATION_LEASE_TABLE)} SET holder = ${holder}, expires_at = ${expiry}, node = ${node} WHERE name = ${LOCK_NAME} AND holder = ${lease.holder}`.execute(connection);
    return Number(taken.numAffectedRows ?? 0n) === 1;
  } catch (error) {
    if (!lostTheRace(error)) throw error;
    return false;
  }
}

/**
 * Runs `work` holding the cluster-wide migration lease, on the connection that holds it (the
 * migrations run there, so that the named lock lives as long as their statements); the lease is
 * renewed while it runs and released after.
 */
export async function withMigrationLease<T>(db: Kysely<any>, work: (connection: Kysely<any>) => Promise<T>, options: MigrationLeaseOptions = {}): Promise<T> {
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const waitMs = options.waitMs ?? DEFAULT_WAIT_MS;
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS;
  const holder = randomBytes(16).toString('hex');
  await ensureLeaseTable(db);
  return db.connection().execute(async (connection) => {
    const node = (await holdAliveLock(connection, holder)) ? await nodeOf(connection) : null;
    try {
      const started = performance.now();
      while (!(await tryTake(connection, holder, node, leaseMs))) {
        if (performance.now() - started > waitMs) {
          throw new Error(`Another migrator holds the migration lease (table ${MIGRATION_LEASE_TABLE}) and did not finish within ${Math.round(waitMs / 1000)} s; a lease whose migrator died expires ${Math.round(leaseMs / 1000)} s after its last renewal.`);
        }
        await new Promise((resolve) => setTimeout(resolve, pollMs));
      }
      // The renewals go through the pool: the lease's connection is busy with the migrations.
      let renewing: Promise<unknown> = Promise.resolve();
      const renewal = setInterval(() => {
        renewing = sql`UPDATE ${sql.table(MIGRATION_LEASE_TABLE)} SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ${leaseMs * 1000} MICROSECOND WHERE name = ${LOCK_NAME} AND holder = ${holder}`
          .execute(db)
          // A failed renewal is tried again at the next tick; the lease lasts leaseMs from the last one that worked.
          .catch(() => undefined);
      }, Math.max(1000, Math.floor(leaseMs / 3)));
      try {
        return await work(connection);
      } finally {
        clearInterval(renewal);
        await renewing;
        await sql`DELETE FROM ${sql.table(MIGRATION_LEASE_TABLE)} WHERE name = ${LOCK_NAME} AND holder = ${holder}`.execute(connection).catch(() => undefined);
      }
    } finally {
      // After the row is gone: while the row names this holder, its lock says it lives.
      if (node !== null) await sql`SELECT RELEASE_LOCK(${aliveLock(holder)})`.execute(connection).catch(() => undefined);
    }
  });
}

/**
 * `connection` as Kysely's `Migrator` sees it, without the `GET_LOCK` it takes (the lease is the
 * lock, above). Kysely reads the adapter from `getExecutor()` (0.28 and 0.29); should a release
 * read it elsewhere, its lock is simply taken as before.
 */
export function withoutKyselyLock(connection: Kysely<any>): Kysely<any> {
  return new Proxy(connection, {
    get(target, property) {
      if (property === 'getExecutor') {
        return () => {
          const executor = target.getExecutor();
          const adapter = executor.adapter;
          const unlocked = Object.create(adapter, {
            acquireMigrationLock: { value: async () => undefined },
            releaseMigrationLock: { value: async () => undefined },
          });
          return new Proxy(executor, {
            get: (inner, name) => (name === 'adapter' ? unlocked : bind(inner, Reflect.get(inner, name, inner))),
          });
        };
      }
      return bind(target, Reflect.get(target, property, target));
    },
  });
}

/** Methods of Kysely's classes use private fields: called on the real object, never the proxy. */
function bind(target: object, value: unknown): unknown {
  return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
}
