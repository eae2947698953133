/**
 * Migration `0018_webhook_share_batches`: one outbox row per import batch (docs/webhooks.md#delivery,
 * `src/storage/mysql/webhooks/share-batches.ts`). A batch of an import that shares many new users
 * with a merchant whose endpoints receive `user.shared` writes one row here in its transaction,
 * instead of an event row and a delivery row per user and endpoint: the merchant, the batch's
 * stamp (every new share of the batch has `updated_at` = `stamp`, and no other share of the
 * merchant has it: each batch's stamp is later than every stamp before it, with the merchant's row
 * locked), the endpoints that receive `user.shared` at its commit, and how many shares it made.
 * The dispatcher expands it into events and deliveries after the commit, in bounded steps, each
 * one transaction that moves `expanded_through` (the last `shared_user_id` expanded) or deletes the
 * row: a crash loses nothing and repeats nothing. `expanded_through` has the exact type of
 * `user_shares.shared_user_id`, so the two compare in the same order. `left_early`: shares whose
 * event a change of their user wrote before the expansion reached them; `erasures`: erasures of the
 * merchant while the row was pending, each of which writes it (on Galera, so that an erasure and a
 * step on two nodes conflict at certification instead of both committing).
 * Down expands every row that is left, then drops the table: events are never lost to a downgrade.
 */
import { sql, type Kysely } from 'kysely';
import { expandAllShareBatches } from '../webhooks/share-batches.js';
import { defineMigration, schemaStep } from './resumable.js';
import { tableExists } from './schema-facts.js';

const TABLE_OPTIONS = 'ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci';

/** The collation of a column, so this table's copies compare like the originals. */
async function collationOf(db: Kysely<any>, table: string, column: string): Promise<string> {
  const { rows } = await sql<{ collation: string }>`SELECT COLLATION_NAME AS collation FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ${table} AND COLUMN_NAME = ${column}`.execute(db);
  return rows[0]?.collation ?? 'utf8mb4_bin';
}

export const webhookShareBatches = defineMigration('0018_webhook_share_batches', {
  up: [
    schemaStep(
      'create webhook_share_batches',
      (db) => tableExists(db, 'webhook_share_batches'),
      async (db) => {
        const merchantId = await collationOf(db, 'merchants', 'id');
        const sharedUserId = await collationOf(db, 'user_shares', 'shared_user_id');
        await sql.raw(`CREATE TABLE webhook_share_batches (
      id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      merchant_id VARCHAR(128) CHARACTER SET utf8mb4 COLLATE ${merchantId} NOT NULL,
      stamp DATETIME(6) NOT NULL,
      endpoints VARCHAR(1024) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      shares INT UNSIGNED NOT NULL,
      expanded INT UNSIGNED NOT NULL DEFAULT 0,
      left_early INT UNSIGNED NOT NULL DEFAULT 0,
      erasures INT UNSIGNED NOT NULL DEFAULT 0,
      expanded_through VARCHAR(128) CHARACTER SET utf8mb4 COLLATE ${sharedUserId} NULL,
      PRIMARY KEY (id),
      UNIQUE KEY webhook_share_batches_stamp (merchant_id, stamp),
      CONSTRAINT webhook_share_batches_merchant FOREIGN KEY (merchant_id) REFERENCES merchants (id) ON DELETE CASCADE
    ) ${TABLE_OPTIONS}`).execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'expand what is left',
      undone: async (db) => !(await tableExists(db, 'webhook_share_batches')),
      run: async (db) => {
        await expandAllShareBatches(db);
      },
    },
    {
      name: 'drop webhook_share_batches',
      run: async (db) => {
        await sql.raw('DROP TABLE IF EXISTS webhook_share_batches').execute(db);
      },
    },
  ],
});
