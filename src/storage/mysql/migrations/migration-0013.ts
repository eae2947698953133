/**
 * Migration `0013_share_removals`: one row per share removed (docs/protocol.md#removals), for the
 * change feed's tombstones (`include_removed=true`). Written only where shares are erased
 * (`removeShares` in admin/erase.ts, in the erasure's transaction), so an import writes nothing here.
 *
 * - `(merchant_id, shared_user_id)`: the latest removal of that share; a share removed again
 *   moves its row. A row whose share exists again (re-shared) is not listed: the live record is.
 * - `share_removals_order (merchant_id, removed_at, shared_user_id)`: the feed's page order.
 * - `share_removals_age (removed_at)`: the retention prune (`REMOVAL_RETENTION`) across merchants.
 * - `shared_user_id = ''` (never a shared id: those have 1-128 characters) is the merchant's
 *   horizon row: its `removed_at` is the newest removal pruned, so a feed asked from before it
 *   answers 410 `gone` and one from after it never does, however old.
 *
 * One step: a migrate stopped part-way finds the table created or not (resumable.ts).
 */
import { sql, type Kysely } from 'kysely';
import { defineMigration, schemaStep } from './resumable.js';
import { tableExists } from './schema-facts.js';

/** What `idType` in migrations.ts chose for `user_shares.shared_user_id`, so both tables order ids alike. */
async function sharedIdType(db: Kysely<any>): Promise<string> {
  const { rows } = await sql<{ collation: string }>`SELECT COLLATION_NAME AS collation FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'user_shares' AND COLUMN_NAME = 'shared_user_id'`.execute(db);
  return `VARCHAR(128) CHARACTER SET utf8mb4 COLLATE ${rows[0]?.collation ?? 'utf8mb4_bin'} NOT NULL`;
}

export const shareRemovals = defineMigration('0013_share_removals', {
  up: [
    schemaStep(
      'create share_removals',
      (db) => tableExists(db, 'share_removals'),
      async (db) => {
        const ID = await sharedIdType(db);
        await sql.raw(`CREATE TABLE share_removals (
      merchant_id ${ID},
      shared_user_id ${ID},
      removed_at DATETIME(6) NOT NULL,
      PRIMARY KEY (merchant_id, shared_user_id),
      KEY share_removals_order (merchant_id, removed_at, shared_user_id),
      KEY share_removals_age (removed_at)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`).execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'drop share_removals',
      run: async (db: Kysely<any>) => {
        await sql.raw('DROP TABLE IF EXISTS share_removals').execute(db);
      },
    },
  ],
});
