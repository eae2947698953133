/**
 * Migration `0017_test_mode` (docs/test-mode.md):
 * - `merchant_keys.mode`: `live` or `test`. Every key that exists is live (the default), so every
 *   request made with one answers exactly as before; a test key reaches the test dataset only.
 * - `test_user_changes`: the changes made to merchants' test datasets by the simulator, the latest
 *   per user (`record` the user's JSON, or NULL for a share removed: the change feed's tombstone).
 *   The generated users themselves are never stored. No foreign key to `merchants`, as
 *   `share_removals` has none: a merchant's deletion deletes its rows (merchant-admin.ts).
 * - `webhook_endpoints.mode`: `live` or `test`. Every endpoint that exists is live (the default) and
 *   receives what it received before; one added with a test key is `test` and receives the
 *   simulator's events only (docs/test-mode.md#webhooks).
 * Three steps, each checked before it runs, so a migrate stopped part-way is completed by the next.
 */
import { sql, type Kysely } from 'kysely';
import { defineMigration, schemaStep } from './resumable.js';
import { columnsAbsent, columnsExist, tableExists } from './schema-facts.js';

/** What `idType` in migrations.ts chose for `user_shares.shared_user_id`, so test ids order as live ones do. */
async function sharedIdType(db: Kysely<any>): Promise<string> {
  const { rows } = await sql<{ collation: string }>`SELECT COLLATION_NAME AS collation FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'user_shares' AND COLUMN_NAME = 'shared_user_id'`.execute(db);
  return `VARCHAR(128) CHARACTER SET utf8mb4 COLLATE ${rows[0]?.collation ?? 'utf8mb4_bin'} NOT NULL`;
}

export const testMode = defineMigration('0017_test_mode', {
  up: [
    schemaStep(
      'add merchant_keys.mode',
      (db) => columnsExist(db, 'merchant_keys', 'mode'),
      async (db) => {
        await sql.raw(`ALTER TABLE merchant_keys ADD COLUMN mode ENUM('live','test') CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'live'`).execute(db);
      },
    ),
    schemaStep(
      'create test_user_changes',
      (db) => tableExists(db, 'test_user_changes'),
      async (db) => {
        const ID = await sharedIdType(db);
        await sql.raw(`CREATE TABLE test_user_changes (
      merchant_id ${ID},
      shared_user_id ${ID},
      record TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL,
      changed_at DATETIME(6) NOT NULL,
      PRIMARY KEY (merchant_id, shared_user_id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`).execute(db);
      },
    ),
    schemaStep(
      'add webhook_endpoints.mode',
      (db) => columnsExist(db, 'webhook_endpoints', 'mode'),
      async (db) => {
        await sql.raw(`ALTER TABLE webhook_endpoints ADD COLUMN mode ENUM('live','test') CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'live'`).execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'drop webhook_endpoints.mode',
      undone: (db) => columnsAbsent(db, 'webhook_endpoints', 'mode'),
      run: async (db) => {
        // The test endpoints go first: kept, they would become live endpoints receiving live data.
        await sql.raw(`DELETE FROM webhook_endpoints WHERE mode = 'test'`).execute(db);
        await sql.raw('ALTER TABLE webhook_endpoints DROP COLUMN mode').execute(db);
      },
    },
    {
      name: 'drop test_user_changes',
      run: async (db: Kysely<any>) => {
        await sql.raw('DROP TABLE IF EXISTS test_user_changes').execute(db);
      },
    },
    {
      name: 'drop merchant_keys.mode',
      undone: (db) => columnsAbsent(db, 'merchant_keys', 'mode'),
      run: async (db) => {
        await sql.raw('ALTER TABLE merchant_keys DROP COLUMN mode').execute(db);
      },
    },
  ],
});
