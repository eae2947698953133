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
 * Applied migrations are never edited: add a new one, made by `defineMigration` (resumable.ts: its
 * comment says how to write one so that a `migrate` killed anywhere in it is completed by the next;
 * docs/architecture.md#adding-a-migration).
 */
import { sql, type Kysely } from 'kysely';
import { lazyMigrator, type MerchantApiMigrator, type Migration, type MigrationProvider, type MigrationResultSet } from './kysely-migrator.js';
import { userShareFilters } from './migration-0002.js';
import { authFailures } from './migration-0003.js';
import { keyIds } from './migration-0004.js';
import { userShareUpdatedAt } from './migration-0005.js';
import { replicaHeartbeat } from './migration-0006.js';
import { withMigrationLease, withoutKyselyLock } from './migration-lease.js';
import { keyLimitsAudit } from './migration-0007.js';
import { webhooks } from './migration-0008.js';
import { authCheckReservations } from './migration-0009.js';
import { webhookEventRefs } from './migration-0010.js';
import { authFailuresCensus } from './migration-0011.js';
import { webhookTestBudget } from './migration-0012.js';
import { shareRemovals } from './migration-0013.js';
import { webhookDeliveriesByEndpoint } from './migration-0014.js';
import { idempotencyKeys } from './migration-0015.js';
import { testMode } from './migration-0017.js';
import { webhookShareBatches } from './migration-0018.js';
import { defineMigration, schemaStep, type MigrationHooks, type MigrationStep, type ResumableMigration } from './resumable.js';
import { tableExists } from './schema-facts.js';

const TEXT = 'VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci';
const TABLE_OPTIONS = 'ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci';

/** The binary NO PAD collation this server has; `utf8mb4_bin` (PAD SPACE) only as a last resort. */
async function idType(db: Kysely<any>): Promise<string> {
  const { rows } = await sql<{ name: string }>`SELECT COLLATION_NAME AS name FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN ('utf8mb4_nopad_bin', 'utf8mb4_0900_bin')`.execute(db);
  const names = rows.map((row) => row.name);
  const collation = names.includes('utf8mb4_nopad_bin') ? 'utf8mb4_nopad_bin' : names.includes('utf8mb4_0900_bin') ? 'utf8mb4_0900_bin' : 'utf8mb4_bin';
  return `VARCHAR(128) CHARACTER SET utf8mb4 COLLATE ${collation} NOT NULL`;
}

/** A step of 0001 creating `table` with the DDL `ddl` writes given the id type. */
function createTableStep(table: string, ddl: (ID: string) => string): MigrationStep {
  return schemaStep(
    `create ${table}`,
    (db) => tableExists(db, table),
    async (db) => {
      await sql.raw(ddl(await idType(db))).execute(db);
    },
  );
}

const initial = defineMigration('0001_initial', {
  up: [
    createTableStep(
      'merchants',
      (ID) => `CREATE TABLE merchants (
      id ${ID},
      status ENUM('active','disabled') NOT NULL DEFAULT 'active',
      created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
      updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
      PRIMARY KEY (id)
    ) ${TABLE_OPTIONS}`,
    ),
    createTableStep(
      'merchant_keys',
      (ID) => `CREATE TABLE merchant_keys (
      id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      merchant_id ${ID},
      sealed_key VARCHAR(2048) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
      revoked_at DATETIME(6) NULL,
      PRIMARY KEY (id),
      KEY merchant_keys_active (merchant_id, revoked_at),
      CONSTRAINT merchant_keys_merchant FOREIGN KEY (merchant_id) REFERENCES merchants (id) ON DELETE CASCADE
    ) ${TABLE_OPTIONS}`,
    ),
    createTableStep(
      'users',
      () => `CREATE TABLE users (
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
    ) ${TABLE_OPTIONS}`,
    ),
    createTableStep(
      'user_shares',
      (ID) => `CREATE TABLE user_shares (
      merchant_id ${ID},
      shared_user_id ${ID},
      user_id BIGINT UNSIGNED NOT NULL,
      PRIMARY KEY (merchant_id, shared_user_id),
      KEY user_shares_user (user_id),
      CONSTRAINT user_shares_merchant FOREIGN KEY (merchant_id) REFERENCES merchants (id) ON DELETE CASCADE,
      CONSTRAINT user_shares_user FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
    ) ${TABLE_OPTIONS}`,
    ),
    // No foreign key: the insert is on every signed request and must stay one index write.
    createTableStep(
      'used_salts',
      (ID) => `CREATE TABLE used_salts (
      merchant_id ${ID},
      salt ${ID},
      expires_at DATETIME(6) NOT NULL,
      PRIMARY KEY (merchant_id, salt),
      KEY used_salts_expiry (expires_at)
    ) ${TABLE_OPTIONS}`,
    ),
  ],
  down: ['used_salts', 'user_shares', 'users', 'merchant_keys', 'merchants'].map((table) => ({
    name: `drop ${table}`,
    run: async (db: Kysely<any>) => {
      await sql.raw(`DROP TABLE IF EXISTS ${table}`).execute(db);
    },
  })),
});

/** Every migration, by name; names sort in the order they apply. */
export const migrations: Readonly<Record<string, ResumableMigration>> = Object.freeze({
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
  '0013_share_removals': shareRemovals,
  '0014_webhook_deliveries_by_endpoint': webhookDeliveriesByEndpoint,
  '0015_idempotency_keys': idempotencyKeys,
  '0017_test_mode': testMode,
  '0018_webhook_share_batches': webhookShareBatches,
});

/** A `MigrationProvider` serving `migrations` from code (no files to ship), each reporting its steps to `hooks`. */
export function migrationProvider(hooks: MigrationHooks = {}): MigrationProvider {
  return {
    async getMigrations() {
      const served: Record<string, Migration> = {};
      for (const [name, migration] of Object.entries(migrations)) {
        // The steps are recorded under the migration's own name: it must be the one Kysely records.
        if (migration.name !== name) throw new Error(`migration ${name} is defined as ${migration.name}`);
        served[name] = migration.withHooks(hooks);
      }
      return served;
    },
  };
}

/** Migration bookkeeping tables, named so they never clash with an application's own Kysely migrations. */
export const MIGRATION_TABLE = 'merchant_api_migration';
export const MIGRATION_LOCK_TABLE = 'merchant_api_migration_lock';

/**
 * A Kysely `Migrator` for the merchant-api schema. Every change of the schema runs holding the
 * migration lease (`migration-lease.ts`: a committed row, so it holds across the nodes of a Galera
 * cluster too, where a `GET_LOCK` is per node; Kysely's own is not taken), so instances started
 * together, on one server or on several nodes, apply each migration once. A run that died part-way (killed, or its
 * connection lost) is completed by the next one: each migration goes on from its last step done
 * (`resumable.ts`). `hooks.afterStep` sees each step as it is done.
 *
 * @example
 * const { results, error } = await createMigrator(db).migrateToLatest();
 */
export function createMigrator(db: Kysely<any>, hooks: MigrationHooks = {}): MerchantApiMigrator {
  const props = { provider: migrationProvider(hooks), migrationTableName: MIGRATION_TABLE, migrationLockTableName: MIGRATION_LOCK_TABLE };
  // Each change runs on the lease's own connection (migration-lease.ts), without Kysely's GET_LOCK.
  const leased = <T>(change: (migrator: MerchantApiMigrator) => Promise<T>) => withMigrationLease(db, (connection) => change(lazyMigrator({ db: withoutKyselyLock(connection), ...props })));
  const reader = lazyMigrator({ db, ...props });
  return {
    getMigrations: () => reader.getMigrations(),
    migrateToLatest: () => leased((migrator) => migrator.migrateToLatest()),
    migrateTo: (name) => leased((migrator) => migrator.migrateTo(name)),
    migrateUp: () => leased((migrator) => migrator.migrateUp()),
    migrateDown: () => leased((migrator) => migrator.migrateDown()),
  };
}

/** Applies every pending migration; throws the first failure. Running it again is a no-op, and completes a run that died. */
export async function migrateToLatest(db: Kysely<any>, hooks: MigrationHooks = {}): Promise<MigrationResultSet> {
  const resultSet = await createMigrator(db, hooks).migrateToLatest();
  if (resultSet.error !== undefined) throw resultSet.error;
  return resultSet;
}
