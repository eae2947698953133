/**
 * Migration `0007_key_limits_audit`: what a key may do, when it was last used, and the audit trail
 * (docs/security.md#key-scopes-and-allowlists, docs/cli.md#the-audit-trail).
 * - `merchant_keys.name`: what the operator calls the key; NULL: unnamed.
 * - `merchant_keys.scopes`: the key's scopes, comma-separated in their printed order; NULL: every
 *   scope, so every key that exists keeps working exactly as before.
 * - `merchant_keys.allow_from`: the networks the key may be used from, canonical CIDR,
 *   comma-separated; NULL: anywhere.
 * - `merchant_keys.last_used_at`: written at most once a minute per key and instance, in batches,
 *   off the request path (src/auth/key-use.ts); NULL: not seen in use since this migration.
 * - `audit_events`: one row per administrative change, written in the change's transaction
 *   (`src/storage/mysql/admin/audit.ts`): when, who, what, which merchant and key, and a summary
 *   that holds counts and ids, never a secret or a user's field. No foreign key: the record of a
 *   merchant's deletion outlives the merchant. Pruned by age (`AUDIT_RETENTION`) through `at`.
 */
import { sql, type Kysely } from 'kysely';
import { defineMigration, schemaStep } from './resumable.js';
import { columnsAbsent, columnsExist, tableExists } from './schema-facts.js';

/** What `idType` in migrations.ts chose for `merchants.id` (as migration 0003 reads it), nullable. */
async function merchantIdType(db: Kysely<any>): Promise<string> {
  const { rows } = await sql<{ collation: string }>`SELECT COLLATION_NAME AS collation FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'merchants' AND COLUMN_NAME = 'id'`.execute(db);
  return `VARCHAR(128) CHARACTER SET utf8mb4 COLLATE ${rows[0]?.collation ?? 'utf8mb4_bin'} NULL`;
}

export const keyLimitsAudit = defineMigration('0007_key_limits_audit', {
  up: [
    schemaStep(
      'add name, scopes, allow_from and last_used_at',
      (db) => columnsExist(db, 'merchant_keys', 'name', 'scopes', 'allow_from', 'last_used_at'),
      async (db) => {
        await sql.raw(`ALTER TABLE merchant_keys
      ADD COLUMN name VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL,
      ADD COLUMN scopes VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
      ADD COLUMN allow_from TEXT CHARACTER SET ascii COLLATE ascii_bin NULL,
      ADD COLUMN last_used_at DATETIME(6) NULL`).execute(db);
      },
    ),
    schemaStep(
      'create audit_events',
      (db) => tableExists(db, 'audit_events'),
      async (db) => {
        await sql.raw(`CREATE TABLE audit_events (
      id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      at DATETIME(6) NOT NULL,
      actor VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL,
      action VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      merchant_id ${await merchantIdType(db)},
      key_id VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
      summary TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL,
      PRIMARY KEY (id),
      KEY audit_events_at (at),
      KEY audit_events_merchant (merchant_id, id),
      KEY audit_events_action (action, id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`).execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'drop audit_events',
      run: async (db) => {
        await sql.raw('DROP TABLE IF EXISTS audit_events').execute(db);
      },
    },
    {
      name: 'drop name, scopes, allow_from and last_used_at',
      undone: (db) => columnsAbsent(db, 'merchant_keys', 'name'),
      run: async (db) => {
        await sql.raw('ALTER TABLE merchant_keys DROP COLUMN name, DROP COLUMN scopes, DROP COLUMN allow_from, DROP COLUMN last_used_at').execute(db);
      },
    },
  ],
});
