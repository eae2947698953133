/**
 * Write conflicts, retried (docs/mysql.md#galera-cluster). On one InnoDB server ER_LOCK_DEADLOCK
 * (1213) is a deadlock; on a Galera node it is also a certification failure: another node
 * committed a conflicting write first (the same salt, the same throttle counter, the same user), so
 * this node's transaction was rolled back at COMMIT. Either way the transaction changed nothing and
 * may run again: run again it meets the winner's row and answers as it would have on one server
 * (a replayed salt, the counter one higher). Retries are bounded in time, not in number: under
 * contention on a busy machine (sixty upserts of one throttle row on three nodes, each round trip
 * slowed by the load) five quick tries all lost, and the failure a request had counted was lost
 * with a 503; tried for up to CONFLICT_RETRY_MS with growing pauses, each write gets its turn. They
 * are counted for the metric `merchant_api_storage_write_conflicts_total`. No Kysely or mysql2 import: the command line
 * reads the counts through src/cli-internal.ts.
 */
import { mysqlErrorCode } from './storage-error.js';

/** How long, ms from its first try, one write is run again after conflicts; a conflict later is the caller's error (a 503). */
export const CONFLICT_RETRY_MS = 2000;
/** Longest pause between two tries, ms: the pauses double from 1-2 ms up to this. */
export const CONFLICT_PAUSE_MAX_MS = 50;

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
 * Runs `write` (one statement, or one whole transaction) and runs it again while it fails as a
 * write conflict, until `budgetMs` after the first try: after a random pause that doubles each
 * time (half of it fixed, half drawn, at most CONFLICT_PAUSE_MAX_MS), so that writers retrying the
 * same rows spread out instead of meeting again in step, and a write that keeps losing cannot
 * spin: at most a few dozen tries in the budget.
 */
export async function retryOnConflict<T>(write: () => Promise<T>, budgetMs = CONFLICT_RETRY_MS): Promise<T> {
  const deadline = performance.now() + budgetMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      if (!isWriteConflict(error)) throw error;
      const ceiling = Math.min(CONFLICT_PAUSE_MAX_MS, 2 ** (attempt + 1));
      const pause = ceiling / 2 + (Math.random() * ceiling) / 2;
      if (performance.now() + pause > deadline) {
        counts.failed++;
        throw error;
      }
      counts.retried++;
      await new Promise((resolve) => setTimeout(resolve, pause));
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
