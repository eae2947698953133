/**
 * `merchant-api/storage/mysql`: the storage on MySQL/MariaDB through Kysely
 * and mysql2 (docs/protocol.md#storage-and-secrets), with its migrations, key sealing, merchant
 * administration and imports. The caller owns the Kysely instance.
 *
 * @example
 * import { createMysqlKysely, migrateToLatest, MysqlStorage, parseMasterKey } from 'merchant-api/storage/mysql';
 * const db = createMysqlKysely(process.env.DATABASE_URL!);
 * await migrateToLatest(db);
 * const storage = new MysqlStorage({ db, masterKey: parseMasterKey(process.env.MASTER_KEY), destroyOnClose: true });
 */
export { MysqlStorage } from './mysql-storage.js';
export type { MysqlStorageOptions } from './mysql-storage.js';
export { DEFAULT_MAX_LAG_SECONDS, withReplicaReads } from './replica/replica-reads.js';
export type { ReplicaReadsOptions, ReplicaReadsStorage } from './replica/replica-reads.js';
export type { MysqlThrottleOptions } from './throttle/throttle-store.js';
export { liftThrottleBlocks, listThrottleBlocks } from './throttle/throttle-queries.js';
export type { ThrottleBlock } from './throttle/throttle-queries.js';
export { createMysqlKysely, parseMysqlUrl } from './create-mysql-kysely.js';
export type { MysqlKyselyOptions } from './create-mysql-kysely.js';
export { createMigrator, migrateToLatest } from './migrations/migrations.js';
export type { MerchantApiMigrator, Migration, MigrationInfo, MigrationResult, MigrationResultSet } from './migrations/kysely-migrator.js';
export type { MigrationHooks, MigrationStepEvent } from './migrations/resumable.js';
export { generateApiKey, generateMasterKey, MasterKeyError, openApiKey, parseMasterKey, sealApiKey } from '../sql/key-sealing.js';
export type { MasterKey } from '../sql/key-sealing.js';
export { addMerchant, addMerchantKey, addRandomMerchantKey, deleteMerchant, listMerchantKeys, listMerchants, MerchantAdminError, revokeMerchantKey, rotateMerchantKey, setMerchantStatus, updateMerchantKey } from './admin/merchant-admin.js';
export type { DeletedMerchant, KeySettings, KeyUpdate, MerchantKeySummary, MerchantSummary, NewKey, RotateOptions, RotateResult, SeedMerchantResult } from './admin/merchant-admin.js';
export { listAuditEvents, pruneAuditEvents, writeAuditEvent } from './admin/audit.js';
export { eraseShares, eraseUser } from './admin/erase.js';
export type { ErasedShare, ErasureRecordOptions, ErasureResult } from './admin/erase.js';
export { erasureReasonProblem, erasureSubject } from './admin/erasure-subject.js';
export { pruneShareRemovals } from './statements/share-removals.js';
export { pruneIdempotencyKeys } from './statements/idempotency-keys.js';
export type { IdempotencyPruneOptions } from './statements/idempotency-keys.js';
export type { AuditEvent, AuditQuery, AuditRecord, AuditValue } from './admin/audit.js';
export { keyFingerprint } from '../sql/key-ids.js';
export { DEFAULT_BATCH_SIZE, importSeed, importUserFile, ImportValidationError } from './admin/import.js';
export { MERCHANT_ID_RULE } from '../contract.js';
export type { ImportOptions, ImportSummary } from './admin/import.js';
export type { MerchantApiDatabase, MerchantKeysTable, MerchantsTable, UsedSaltsTable, UserSharesTable, UsersTable } from './schema.js';
export type { PruneOptions } from './statements/salts.js';
export { writeConflictCounts } from './write-conflicts.js';
export { galeraProblems } from './cluster-check.js';
export { durabilityFindings, durabilityReport } from './durability-check.js';
export type { DurabilityFinding, DurabilityReport, DurabilitySettings } from './durability-check.js';
export type { WriteConflictCounts } from './write-conflicts.js';
export { MysqlWebhookOutbox } from './webhooks/mysql-outbox.js';
export { listEndpointDeliveryPage, redeliverEndpointDeliveries } from './webhooks/deliveries.js';
export { addWebhookEndpoint, enableWebhookEndpoint, listWebhookDeliveries, listWebhookEndpoints, redeliverWebhooks, removeWebhookEndpoint, rotateWebhookSecret, sendWebhookTest, WebhookAdminError } from './webhooks/endpoints.js';
export type { WebhookDeliverySummary } from './webhooks/endpoints.js';
export { eraseWebhookEvents, writeUnsharedEvent } from './webhooks/outbox-writes.js';
export { expandAllShareBatches, expandShareBatches } from './webhooks/share-batches.js';
export type { AttemptRecord, ClaimOptions, DueDelivery, OutboxStats, WebhookEndpointSummary, WebhookOutbox } from '../webhook-outbox.js';
