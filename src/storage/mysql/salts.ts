/**
 * Replay protection on MySQL (docs/protocol.md#signing): a salt is recorded by one
 * plain INSERT on the primary key `(merchant_id, salt)`, so of two instances
 * racing with one salt exactly one wins. Not `INSERT IGNORE`: it also hides
 * truncation and bad values (docs/protocol.md#storage-and-secrets). ER_DUP_ENTRY is the replay,
 * unless the existing record has expired, which one conditional UPDATE
 * takes over atomically.
 */
import type { Kysely } from 'kysely';
import type { SaltRecord } from '../../storage.js';
import type { MerchantApiDatabase } from './schema.js';
import { mysqlErrorCode, storedSalt, unixToSqlDatetime } from './sql-values.js';

/** Records the salt; true when new (or only expired), false for a replay. */
export async function recordSalt(db: Kysely<MerchantApiDatabase>, { merchantId, salt, expiresAt, now }: SaltRecord): Promise<boolean> {
  const row = { merchant_id: merchantId, salt: storedSalt(salt), expires_at: unixToSqlDatetime(expiresAt) };
  const nowSql = unixToSqlDatetime(now);
  // Two rounds at most: the second only when a prune deleted the expired row between our statements.
  for (let round = 0; round < 2; round++) {
    try {
      await db.insertInto('used_salts').values(row).execute();
      return true;
    } catch (error) {
      if (mysqlErrorCode(error) !== 'ER_DUP_ENTRY') throw error;
    }
    // InnoDB re-reads the locked row for the WHERE: of two takers one matches.
    const taken = await db
      .updateTable('used_salts')
      .set({ expires_at: row.expires_at })
      .where('merchant_id', '=', row.merchant_id)
      .where('salt', '=', row.salt)
      .where('expires_at', '<', nowSql)
      .executeTakeFirst();
    if (taken.numUpdatedRows > 0n) return true;
    const existing = await db
      .selectFrom('used_salts')
      .select('merchant_id')
      .where('merchant_id', '=', row.merchant_id)
      .where('salt', '=', row.salt)
      .executeTakeFirst();
    if (existing) return false;
  }
  return false;
}

/** Bounds of one prune run. */
export interface PruneOptions {
  /** Rows per DELETE (default 1000): short statements, short locks. */
  batchSize?: number;
  /** DELETEs per run (default 20); the rest waits for the next run. */
  maxBatches?: number;
}

/**
 * Deletes salts that expired before `now` (Unix seconds), oldest first, in
 * batches, so pruning a backlog never holds a long lock. Resolves to the count.
 */
export async function pruneExpiredSalts(db: Kysely<MerchantApiDatabase>, now: number, options: PruneOptions = {}): Promise<number> {
  const batchSize = options.batchSize ?? 1000;
  const maxBatches = options.maxBatches ?? 20;
  const before = unixToSqlDatetime(now);
  let deleted = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    const result = await db.deleteFrom('used_salts').where('expires_at', '<', before).orderBy('expires_at').limit(batchSize).executeTakeFirst();
    const count = Number(result.numDeletedRows);
    deleted += count;
    if (count < batchSize) break;
  }
  return deleted;
}
