/**
 * The tombstones of removed shares (migration 0013, docs/protocol.md#removals): written where
 * shares are erased, read by the change feed (`include_removed=true`), pruned by age
 * (`REMOVAL_RETENTION`). The row `shared_user_id = ''` of a merchant is its horizon: the newest
 * removal pruned.
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import type { ShareRemoval, UserPageQuery } from '../../contract.js';
import { canonicalColumn, toSqlDatetime } from '../sql-values.js';
import { nextChangeStamp } from './change-stamp.js';

/** The id of a merchant's horizon row: no shared id is empty. */
const HORIZON = '';

/**
 * Records that `sharedUserIds` stopped being shared with `merchantId`, in the erasure's
 * transaction. Like an import batch (admin/user-upsert.ts), it first locks the merchant's row, so
 * the merchant's writers take turns, and stamps `nextChangeStamp`: a removal that commits after a
 * listing read its pages sorts after everything that listing saw, and an import after it stamps later.
 */
export async function writeShareRemovals(trx: Transaction<any>, merchantId: string, sharedUserIds: readonly string[]): Promise<void> {
  if (sharedUserIds.length === 0) return;
  await sql`SELECT id FROM merchants WHERE id = ${merchantId} FOR UPDATE`.execute(trx);
  const stamp = await nextChangeStamp(trx, merchantId);
  const values = sql.join(sharedUserIds.map((id) => sql`(${merchantId}, ${id}, ${stamp})`));
  await sql`INSERT INTO share_removals (merchant_id, shared_user_id, removed_at) VALUES ${values}
    ON DUPLICATE KEY UPDATE removed_at = GREATEST(removed_at, VALUES(removed_at))`.execute(trx);
}

/**
 * The next `limit` tombstones of `query.merchantId` from the feed's start: `updatedSince`
 * (inclusive) and after the position `(afterUpdated, after)`, by `(removed_at, shared_user_id)`,
 * leaving out shares that exist again (their live record is listed instead).
 */
export async function selectShareRemovals(db: Kysely<any>, query: UserPageQuery, limit: number): Promise<ShareRemoval[]> {
  const conditions = [sql`r.merchant_id = ${query.merchantId}`, sql`r.shared_user_id <> ${HORIZON}`];
  if (query.filter.updatedSince !== undefined) conditions.push(sql`r.removed_at >= ${toSqlDatetime(query.filter.updatedSince)}`);
  if (query.afterUpdated !== undefined) {
    const position = toSqlDatetime(query.afterUpdated);
    conditions.push(sql`(r.removed_at > ${position} OR (r.removed_at = ${position} AND r.shared_user_id > ${query.after ?? ''}))`);
  }
  const { rows } = await sql<ShareRemoval>`SELECT r.shared_user_id, ${canonicalColumn('r.removed_at')} AS removed_at
    FROM share_removals r FORCE INDEX (share_removals_order)
    WHERE ${sql.join(conditions, sql` AND `)}
      AND NOT EXISTS (SELECT 1 FROM user_shares s WHERE s.merchant_id = r.merchant_id AND s.shared_user_id = r.shared_user_id)
    ORDER BY r.removed_at, r.shared_user_id LIMIT ${Math.floor(limit)}`.execute(db);
  return rows;
}

/** The newest removal of `merchantId` pruned (canonical), or undefined when none was. */
export async function selectRemovalHorizon(db: Kysely<any>, merchantId: string): Promise<string | undefined> {
  const { rows } = await sql<{ removed_at: string }>`SELECT ${canonicalColumn('removed_at')} AS removed_at FROM share_removals
    WHERE merchant_id = ${merchantId} AND shared_user_id = ${HORIZON}`.execute(db);
  return rows[0]?.removed_at;
}

const PRUNE_BATCH = 5000;

/**
 * Deletes the tombstones older than `retentionSeconds`, in batches, first moving each merchant's
 * horizon row to the newest of them (in the same transaction), so a feed from before a pruned
 * removal answers 410 rather than missing it. Resolves to how many went.
 */
export async function pruneShareRemovals(db: Kysely<any>, retentionSeconds: number): Promise<number> {
  const seconds = Math.floor(retentionSeconds);
  let total = 0;
  for (;;) {
    const deleted = await db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ merchant_id: string; shared_user_id: string; removed_at: string }>`SELECT merchant_id, shared_user_id, DATE_FORMAT(removed_at, '%Y-%m-%d %H:%i:%s.%f') AS removed_at
        FROM share_removals FORCE INDEX (share_removals_age)
        WHERE removed_at < UTC_TIMESTAMP(6) - INTERVAL ${seconds} SECOND AND shared_user_id <> ${HORIZON}
        ORDER BY removed_at LIMIT ${PRUNE_BATCH} FOR UPDATE`.execute(trx);
      if (rows.length === 0) return 0;
      const newest = new Map<string, string>();
      for (const row of rows) if ((newest.get(row.merchant_id) ?? '') < row.removed_at) newest.set(row.merchant_id, row.removed_at);
      await sql`INSERT INTO share_removals (merchant_id, shared_user_id, removed_at) VALUES ${sql.join([...newest].map(([m, at]) => sql`(${m}, ${HORIZON}, ${at})`))}
        ON DUPLICATE KEY UPDATE removed_at = GREATEST(removed_at, VALUES(removed_at))`.execute(trx);
      for (let i = 0; i < rows.length; i += 500) {
        // Primary-key equalities (the range optimiser reads each as a point; a row-constructor IN it may not).
        const pairs = rows.slice(i, i + 500).map((row) => sql`(merchant_id = ${row.merchant_id} AND shared_user_id = ${row.shared_user_id})`);
        await sql`DELETE FROM share_removals WHERE ${sql.join(pairs, sql` OR `)}`.execute(trx);
      }
      return rows.length;
    });
    total += deleted;
    if (deleted < PRUNE_BATCH) return total;
  }
}
