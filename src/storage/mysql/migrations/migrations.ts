/**
 * The schema as code, applied by Kysely's `Migrator` (`merchant-api migrate`).
 * Raw DDL because the details matter and the query builder hides them:
 * - ids and salts are `utf8mb4_nopad_bin` (MariaDB; `utf8mb4_0900_bin` on
 *   MySQL 8): case-sensitive, ordered by code point (measured
 *   `general_ci` colliding `AbC` with `abc`), and unlike `utf8mb4_bin` a
 *   trailing space is not ignored;
 * - every timestamp is `DATETIME(6)` holding UTC, so microseconds survive;
 * - primary keys make the single-user read a point lookup and every keyset
 *   page a range seek on `(merchant_id, shared_user_id)`.
 * Applied migrations are never edited: add a new one.
 */
import { sql, type Kysely } from 'kysely';
import { lazyMigrator, type MerchantApiMigrator, type Migration, type MigrationProvider, type MigrationResultSet } from './kysely-migrator.js';
import { userShareFilters } from './migration-0002.js';
import { authFailures } from './migration-0003.js';
import { keyIds } from './migration-0004.js';
import { userShareUpdatedAt } from './migration-0005.js';
import { replicaHeartbeat } from './migration-0006.js';
import { withMigrationLease } from './migration-lease.js';
import { keyLimitsAudit } from './migration-0007.js';
import { webhooks } from './migration-0008.js';
import { authCheckReservations } from './migration-0009.js';
import { webhookEventRefs } from './migration-0010.js';
import { authFailuresCensus } from './migration-0011.js';
import { webhookTestBudget } from './migration-0012.js';
import { webhookDeliveriesByEndpoint } from './migration-0013.js';

const TEXT = 'VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci';
const TABLE_OPTIONS = 'ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci';

/** The binary NO PAD collation this server has; `utf8mb4_bin` (PAD SPACE) only as a last resort. */
async function idType(db: Kysely<any>): Promise<string> {
  const { rows } = await sql<{ name: string }>`SELECT COLLATION_NAME AS name FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN ('utf8mb4_nopad_bin', 'utf8mb4_0900_bin')`.execute(db);
  const names = rows.map((row) => row.name);
  const collation = names.includes('utf8mb4_nopad_bin') ? 'utf8mb4_nopad_bin' : names.includes('utf8mb4_0900_bin') ? 'utf8mb4_0900_bin' : 'utf8mb4_bin';
  return `VARCHAR(128) CHARACTER SET utf8mb4 COLLATE ${collation} NOT NULL`;
}

const initial: Migration = {
  async up(db: Kysely<any>) {
    const ID = await idType(db);
    await sql.raw(`CREATE TABLE merchants (
      id ${ID},
      status ENUM('active','disabled') NOT NULL DEFAULT 'active',
      created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
      updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
      PRIMARY KEY (id)
    ) ${TABLE_OPTIONS}`).execute(db);
    await sql.raw(`CREATE TABLE merchant_keys (
      id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      merchant_id ${ID},
      sealed_key VARCHAR(2048) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
      revoked_at DATETIME(6) NULL,
      PRIMARY KEY (id),
      KEY merchant_keys_active (merchant_id, revoked_at),
      CONSTRAINT merchant_keys_merchant FOREIGN KEY (merchant_id) REFERENCES merchants (id) ON DELETE CASCADE
    ) ${TABLE_OPTIONS}`).execute(db);
    await sql.raw(`CREATE TABLE users (
      id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      first_name ${TEXT} NOT NULL,
      last_name ${TEXT} NOT NULL,
      email_address ${TEXT} NOT NULL,
      street ${TEXT} NOT NULL,
      zip_code ${TEXT} NOT NULL,
      city ${TEXT} NOT NULL,
      state ${TEXT} NULL,
      country ${TEXT} NOT NULL,
      preferred_language ${TEXT} NOT NULL,
      date_joined DATETIME(6) NOT NULL,
      deactivated_at DATETIME(6) NULL,
      agreed_to_terms_and_conditions DATETIME(6) NULL,
      agreed_to_marketing DATETIME(6) NULL,
      PRIMARY KEY (id)
    ) ${TABLE_OPTIONS}`).execute(db);
    await sql.raw(`CREATE TABLE user_shares (
      merchant_id ${ID},
      shared_user_id ${ID},
      user_id BIGINT UNSIGNED NOT NULL,
      PRIMARY KEY (merchant_id, shared_user_id),
      KEY user_shares_user (user_id),
      CONSTRAINT user_shares_merchant FOREIGN KEY (merchant_id) REFERENCES merchants (id) ON DELETE CASCADE,
      CONSTRAINT user_shares_user FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
    ) ${TABLE_OPTIONS}`).execute(db);
    // No foreign key: the insert is on every signed request and must stay one index write.
    await sql.raw(`CREATE TABLE used_salts (
      merchant_id ${ID},
      salt ${ID},
      expires_at DATETIME(6) NOT NULL,
      PRIMARY KEY (merchant_id, salt),
      KEY used_salts_expiry (expires_at)
    ) ${TABLE_OPTIONS}`).execute(db);
  },
  async down(db: Kysely<any>) {
    for (const table of ['used_salts', 'user_shares', 'users', 'merchant_keys', 'merchants']) {
      await sql.raw(`DROP TABLE IF EXISTS ${table}`).execute(db);
    }
  },
};

/** Every migration, by name; names sort in the order they apply. */
export const migrations: Readonly<Record<string, Migration>> = Object.freeze({
  '0001_initial': initial,
  '0002_user_share_filters': userShareFilters,
  '0003_auth_failures': authFailures,
  '0004_key_ids': keyIds,
  '0005_user_share_updated_at': userShareUpdatedAt,
  '0006_replica_heartbeat': replicaHeartbeat,
  '0007_key_limits_audit': keyLimitsAudit,
  '0008_webhooks': webhooks,
  '0009_auth_check_reservations': authCheckReservations,
  '0010_webhook_event_refs': webhookEventRefs,
  '0011_auth_failures_census': authFailuresCensus,
  '0012_webhook_test_budget': webhookTestBudget,
  '0013_webhook_deliveries_by_endpoint': webhookDeliveriesByEndpoint,
});

/** A `MigrationProvider` serving `migrations` from code (no files to ship). */
export const migrationProvider: MigrationProvider = {
  async getMigrations() {
    return { ...migrations };
  },
};

/** Migration bookkeeping tables, named so they never clash with an application's own Kysely migrations. */
export const MIGRATION_TABLE = 'merchant_api_migration';
export const MIGRATION_LOCK_TABLE = 'merchant_api_migration_lock';

/**
 * A Kysely `Migrator` for the merchant-api schema. Every change of the schema runs holding the
 * migration lease (`migration-lease.ts`: a committed row, so it holds across the nodes of a Galera
 * cluster too, where Kysely's own `GET_LOCK` is per node), so instances started together, on one
 * server or on several nodes, apply each migration once.
 *
 * @example
 * const { results, error } = await createMigrator(db).migrateToLatest();
 */
export function createMigrator(db: Kysely<any>): MerchantApiMigrator {
  const migrator = lazyMigrator({ db, provider: migrationProvider, migrationTableName: MIGRATION_TABLE, migrationLockTableName: MIGRATION_LOCK_TABLE });
  return {
    getMigrations: () => migrator.getMigrations(),
    migrateToLatest: () => withMigrationLease(db, () => migrator.migrateToLatest()),
    migrateTo: (name) => withMigrationLease(db, () => migrator.migrateTo(name)),
    migrateUp: () => withMigrationLease(db, () => migrator.migrateUp()),
    migrateDown: () => withMigrationLease(db, () => migrator.migrateDown()),
  };
}

/** Applies every pending migration; throws the first failure. Running it again is a no-op. */
export async function migrateToLatest(db: Kysely<any>): Promise<MigrationResultSet> {
  const resultSet = await createMigrator(db).migrateToLatest();
  if (resultSet.error !== undefined) throw resultSet.error;
  return resultSet;
}
