/**
 * Write conflicts, retried (docs/mysql.md#galera-cluster). On one InnoDB server ER_LOCK_DEADLOCK
 * (1213) is a deadlock; on a Galera node it is also a certification failure: another node
 * committed a conflicting write first (the same salt, the same throttle counter, the same user), so
 * this node's transaction was rolled back at COMMIT. Either way the transaction changed nothing and
 * may run again: run again it meets the winner's row and answers as it would have on one server
 * (a replayed salt, the counter one higher). Retries are bounded, and counted for the metric
 * `merchant_api_storage_write_conflicts_total`. No Kysely or mysql2 import: the command line
 * reads the counts through src/cli-internal.ts.
 */
import { mysqlErrorCode } from './storage-error.js';

/** Times one write is run again after a conflict; the next conflict is the caller's error (a 503). */
export const CONFLICT_RETRIES = 4;

/** Conflicts in this process since it started: retried ones, and those that outlasted the retries. */
export interface WriteConflictCounts {
  retried: number;
  failed: number;
}

const counts: WriteConflictCounts = { retried: 0, failed: 0 };

/** The counts of this process (every MySQL storage, import and administration in it). */
export function writeConflictCounts(): Readonly<WriteConflictCounts> {
  return { ...counts };
}

/** True for a deadlock victim or a Galera certification failure: rolled back, nothing written. */
export function isWriteConflict(error: unknown): boolean {
  return mysqlErrorCode(error) === 'ER_LOCK_DEADLOCK';
}

/**
 * Runs `write` (one statement, or one whole transaction) and runs it again, up to `retries` times,
 * while it fails as a write conflict; after a short random pause, so that two nodes retrying the
 * same rows do not meet again in step.
 */
export async function retryOnConflict<T>(write: () => Promise<T>, retries = CONFLICT_RETRIES): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      if (!isWriteConflict(error)) throw error;
      if (attempt >= retries) {
        counts.failed++;
        throw error;
      }
      counts.retried++;
      // 0-2 ms, then up to 4, 8, 16 ms: long enough for the winner's write set to apply here.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 2 ** (attempt + 1)));
    }
  }
}

/**
 * `retryOnConflict` for one statement on `db`, unless `db` is a transaction: a conflict rolls the
 * whole transaction back, so only its owner may run it again (the statement alone would run outside it).
 */
export function retryUnlessInTransaction<T>(db: { readonly isTransaction: boolean }, write: () => Promise<T>): Promise<T> {
  return db.isTransaction ? write() : retryOnConflict(write);
}
