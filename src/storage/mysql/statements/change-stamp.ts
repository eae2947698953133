/**
 * The stamp of a merchant's next change (docs/protocol.md#the-sync-loop): what an import batch
 * writes as `updated_at` and an erasure as `removed_at`, so that the change feed, ordered by
 * those stamps, lists every change after everything a client read before it.
 */
import { sql, type Transaction } from 'kysely';

/**
 * The server's UTC time as `DATETIME(6)` text, or 1 µs past the merchant's latest stamp, of a
 * share or of a removal, if that is not earlier (a clock set back since). Locking reads: the
 * latest committed stamps, not the transaction's snapshot. The caller holds the merchant's row,
 * so the merchant's writers take turns.
 */
export async function nextChangeStamp(trx: Transaction<any>, merchantId: string): Promise<string> {
  const { rows } = await sql<{ stamp: string }>`SELECT DATE_FORMAT(GREATEST(UTC_TIMESTAMP(6),
      COALESCE((SELECT MAX(updated_at) FROM user_shares WHERE merchant_id = ${merchantId} LOCK IN SHARE MODE) + INTERVAL 1 MICROSECOND, UTC_TIMESTAMP(6)),
      COALESCE((SELECT MAX(removed_at) FROM share_removals WHERE merchant_id = ${merchantId} LOCK IN SHARE MODE) + INTERVAL 1 MICROSECOND, UTC_TIMESTAMP(6))),
    '%Y-%m-%d %H:%i:%s.%f') AS stamp`.execute(trx);
  return rows[0]!.stamp;
}
