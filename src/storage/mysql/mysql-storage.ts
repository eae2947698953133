/**
 * The storage interface on MySQL through an injected Kysely (docs/protocol.md#storage-and-secrets).
 * The caller owns the pool; `createMysqlKysely` builds one from a URL.
 */
import { poolSizeOf } from './create-mysql-kysely.js';
import { sql, type Kysely } from 'kysely';
import { StorageUnavailableError } from '../../errors.js';
import type { KeyInfo, KeyUse, Merchant, MerchantLookup, SaltRecord, Storage, UserPageQuery, UserRecord, UserRecordPage } from '../contract.js';
import { keyInfoOf, keyLimitsOf, recordKeyUses } from './statements/key-rows.js';
import { MysqlTestChanges } from './statements/test-changes.js';
import type { TestChangeStore } from '../test-changes.js';
import { MasterKeyError, openApiKey, parseMasterKey, type MasterKey } from '../sql/key-sealing.js';
import { MerchantCache } from '../sql/merchant-cache.js';
import { MerchantDirectory } from '../sql/merchant-directory.js';
import { selectRemovalHorizon, selectShareRemovals } from './statements/share-removals.js';
import { pruneExpiredSalts, SaltWriter, type PruneOptions } from './statements/salts.js';
import type { MerchantApiDatabase } from './schema.js';
import { canonicalColumn, isStorableId, storageError } from './sql-values.js';
import { MysqlThrottleStore, type MysqlThrottleOptions } from './throttle/throttle-store.js';
import { selectUserPage, UserReader } from './statements/user-queries.js';
import type { PagePlan } from '../user-pages.js';
import { DEFAULTS } from '../../defaults.js';
import { CausalReads } from './causal-reads.js';
import { retryOnConflict } from './write-conflicts.js';
import { merchantWebhookEndpoints } from './webhooks/merchant-endpoints.js';
import { claimIdempotencyKey, completeIdempotencyKey, releaseIdempotencyKey } from './statements/idempotency-keys.js';
import type { ClaimOutcome, IdempotencyClaim, IdempotencyCompletion, IdempotencyRelease } from '../idempotency.js';
import { MerchantApiError } from '../../errors.js';
import { createMerchantKey, revokeMerchantKeyById, rotateMerchantKeyById, updateMerchantKeyById } from './statements/key-changes.js';

/** Options of `MysqlStorage`. */
export interface MysqlStorageOptions {
  /** A Kysely on mysql2 whose database `migrate` has brought up to date. */
  db: Kysely<MerchantApiDatabase>;
  /** The master key (parsed, or its base64url text) that seals the API keys. */
  masterKey: MasterKey | string;
  /**
   * How long a merchant and its decrypted keys stay cached in process, in
   * milliseconds (default 10000; 0 disables). A revoked key or a disabled
   * merchant keeps working on an instance for at most this long.
   */
  keyCacheTtlMs?: number;
  /**
   * How often a `recordSalt` may trigger pruning of expired salts, in ms
   * (default 1000; 0 never). A run that left a backlog is followed by the
   * next at once, so pruning keeps pace with the rate of new salts.
   */
  saltPruneIntervalMs?: number;
  /**
   * Rows per prune statement and statements per prune run: defaults 5000 and 20 in the background
   * prune, those of `PruneOptions` (1000 and 20) in `pruneSalts`.
   */
  saltPrune?: PruneOptions;
  /** Destroy `db` in `close()` (default false: the caller owns the pool). */
  destroyOnClose?: boolean;
  /** Told about a failed background prune (the message never holds a value). */
  onBackgroundError?: (error: Error) => void;
  /**
   * The bounds of a page's work (`src/storage/user-pages.ts`); for tests, which cross every
   * boundary with a few users. The defaults are the documented ones.
   */
  pagePlan?: PagePlan;
  /**
   * The failed-authentication throttle's counters, shared by every instance on the database
   * (docs/security.md#sharing-the-counters-on-mysql): how often each instance reads the others'
   * changes, and the batches; `false` leaves each instance counting alone.
   */
  throttleSharing?: MysqlThrottleOptions | false;
  /**
   * Connections in `db`'s pool: one merchant's calls take at most half of them
   * (docs/security.md#fair-sharing). Default: known for a Kysely from `createMysqlKysely`,
   * else no share is kept.
   */
  poolSize?: number;
}

/**
 * Storage on MySQL. Salts are shared by every instance on the database; the
 * full list streams in keyset pages; keys are sealed at rest.
 *
 * @example
 * const db = createMysqlKysely(process.env.DATABASE_URL!);
 * const storage = new MysqlStorage({ db, masterKey: process.env.MASTER_KEY!, destroyOnClose: true });
 * const api = createMerchantApi({ storage });
 */
export class MysqlStorage implements Storage {
  readonly #db: Kysely<MerchantApiDatabase>;
  readonly #masterKey: MasterKey;
  readonly #cache: MerchantCache;
  /** Every merchant id, so that a new unknown id costs no query. */
  readonly #directory: MerchantDirectory;
  readonly #salts: SaltWriter;
  readonly #users: UserReader;
  /** The merchant reads that must see the latest commit of any Galera node. */
  readonly #causal: CausalReads;
  readonly #options: MysqlStorageOptions;
  /** Calls the pool runs at once; the handler gives one merchant half of them. */
  readonly concurrency: number | undefined;
  #lastPrune = -Infinity;
  #pruneBacklog = false;
  #pruning: Promise<void> | undefined;
  #closed = false;
  #throttleStore: MysqlThrottleStore | undefined;
  #testChanges: MysqlTestChanges | undefined;

  constructor(options: MysqlStorageOptions) {
    this.#db = options.db;
    this.#causal = new CausalReads(options.db);
    this.#masterKey = typeof options.masterKey === 'string' ? parseMasterKey(options.masterKey) : options.masterKey;
    this.#cache = new MerchantCache(options.keyCacheTtlMs ?? DEFAULTS.keyCacheTtlSeconds * 1000);
    this.#directory = new MerchantDirectory({
      ttlMs: options.keyCacheTtlMs ?? DEFAULTS.keyCacheTtlSeconds * 1000,
      readIds: async (limit) => (await this.#causal.execute(this.#db.selectFrom('merchants').select('id').limit(limit))).map((row) => row.id),
    });
    this.#salts = new SaltWriter(options.db);
    this.#users = new UserReader(options.db);
    this.#options = options;
    this.concurrency = options.poolSize ?? poolSizeOf(options.db);
  }

  /** The Kysely this storage queries (for admin operations sharing its pool). */
  get db(): Kysely<MerchantApiDatabase> {
    return this.#db;
  }

  async getMerchant(id: string, options?: MerchantLookup): Promise<Merchant | undefined> {
    this.#assertOpen();
    if (!isStorableId(id) || !this.#directory.mayExist(id)) return undefined;
    if (options?.refresh) return this.#cache.refresh(id, () => this.#loadMerchant(id));
    return this.#cache.get(id, () => this.#loadMerchant(id));
  }

  /**
   * The merchant while its cache entry is fresh (what `getMerchant` answers then, without a promise);
   * else undefined, as where a subclass has a `getMerchant` of its own: the handler then asks that one.
   */
  cachedMerchant(id: string): Merchant | undefined {
    if (this.getMerchant !== MysqlStorage.prototype.getMerchant || this.#closed || !isStorableId(id) || !this.#directory.mayExist(id)) return undefined;
    return this.#cache.peek(id);
  }

  async recordSalt(record: SaltRecord): Promise<boolean> {
    this.#assertOpen();
    if (!isStorableId(record.merchantId)) throw new RangeError('recordSalt: no merchant can have this id.');
    this.#maybePrune(record.now);
    try {
      return await this.#salts.record(record);
    } catch (error) {
      throw storageError(error, 'salt recording');
    }
  }

  async listUsers(query: UserPageQuery): Promise<UserRecordPage> {
    this.#assertOpen();
    if (!isStorableId(query.merchantId) || !(query.limit >= 1)) return [];
    try {
      const page = await selectUserPage(this.#db, query, undefined, this.#options.pagePlan);
      if (query.includeRemoved && query.order === 'updated_at') {
        page.removals = await selectShareRemovals(this.#db, query, query.limit);
        const horizon = await selectRemovalHorizon(this.#db, query.merchantId);
        if (horizon !== undefined) page.removalsPrunedThrough = horizon;
      }
      return page;
    } catch (error) {
      throw storageError(error, 'user page');
    }
  }

  async getUser(merchantId: string, sharedUserId: string): Promise<UserRecord | undefined> {
    this.#assertOpen();
    if (!isStorableId(merchantId) || !isStorableId(sharedUserId)) return undefined;
    try {
      return await this.#users.read(merchantId, sharedUserId);
    } catch (error) {
      throw storageError(error, 'user read');
    }
  }

  async listKeys(merchantId: string): Promise<KeyInfo[]> {
    this.#assertOpen();
    if (!isStorableId(merchantId)) return [];
    try {
      // On a Galera node, after the cluster's latest commit (as the merchant read): a key's last use
      // written through another node is what an operator reads before revoking it.
      const rows = await this.#causal.execute(
        this.#db
          .selectFrom('merchant_keys as k')
          .select(['k.key_id', 'k.name', 'k.scopes', 'k.allow_from', 'k.mode', canonicalColumn<string>('k.created_at').as('created_at'), canonicalColumn('k.expires_at').as('expires_at'), canonicalColumn('k.last_used_at').as('last_used_at')])
          .where('k.merchant_id', '=', merchantId)
          .where('k.revoked_at', 'is', null)
          .where((eb) => eb.or([eb('k.expires_at', 'is', null), eb('k.expires_at', '>', sql<string>`UTC_TIMESTAMP(6)`)]))
          .orderBy('k.id'),
      );
      return rows.map(keyInfoOf);
    } catch (error) {
      throw storageError(error, 'key list');
    }
  }

  /** One statement per batch of uses (src/auth/key-use.ts sends at most one per key a minute). */
  async recordKeyUse(uses: readonly KeyUse[]): Promise<void> {
    this.#assertOpen();
    try {
      // A write conflict (a deadlock, or a Galera node's write of the same key first) wrote nothing: run it again.
      await retryOnConflict(() => recordKeyUses(this.#db, uses));
    } catch (error) {
      throw storageError(error, 'key use');
    }
  }

  // A merchant's webhook endpoints (`/merchant/webhooks`, docs/webhooks.md#endpoints), scoped to it.
  readonly listWebhookEndpoints: NonNullable<Storage['listWebhookEndpoints']> = (merchantId, mode) => this.#webhooks().listWebhookEndpoints(merchantId, mode);
  readonly addWebhookEndpoint: NonNullable<Storage['addWebhookEndpoint']> = (endpoint) => this.#webhooks().addWebhookEndpoint(endpoint);
  readonly removeWebhookEndpoint: NonNullable<Storage['removeWebhookEndpoint']> = (merchantId, id, options) => this.#webhooks().removeWebhookEndpoint(merchantId, id, options);
  readonly rotateWebhookSecret: NonNullable<Storage['rotateWebhookSecret']> = (merchantId, id, ms, options) => this.#webhooks().rotateWebhookSecret(merchantId, id, ms, options);
  readonly sendWebhookTest: NonNullable<Storage['sendWebhookTest']> = (merchantId, id, mode) => this.#webhooks().sendWebhookTest(merchantId, id, mode);
  readonly listEndpointDeliveries: NonNullable<Storage['listEndpointDeliveries']> = (query) => this.#webhooks().listEndpointDeliveries(query);
  readonly redeliverEndpointDeliveries: NonNullable<Storage['redeliverEndpointDeliveries']> = (request) => this.#webhooks().redeliverEndpointDeliveries(request);
  #webhookEndpoints: ReturnType<typeof merchantWebhookEndpoints> | undefined;
  #webhooks(): ReturnType<typeof merchantWebhookEndpoints> {
    this.#assertOpen();
    return (this.#webhookEndpoints ??= merchantWebhookEndpoints(this.#db, this.#masterKey, this.#causal));
  }

  // A merchant's changes to its own keys (`/merchant/keys`, docs/protocol.md#managing-keys). After
  // each, this instance forgets the merchant it held, so the change counts from its next request.
  // Other instances: a new key works at once (a key their copy lacks makes them read the merchant
  // again); a revoked key, a rotated key's end and a changed allowlist reach them when their copy
  // expires (`keyCacheTtlMs`, default 10 s), as the CLI's changes do.
  readonly createKey: NonNullable<Storage['createKey']> = async (request) => {
    const created = await this.#changed(request.merchantId, () => createMerchantKey(this.#db, this.#masterKey, request));
    // The merchant was deleted while it asked: as any request of a merchant that is gone.
    if (created === undefined) throw new MerchantApiError('unauthorized', 'Valid merchant credentials are required (HTTP Basic: merchant id and API key).');
    return created;
  };
  readonly rotateKey: NonNullable<Storage['rotateKey']> = (rotation) => this.#changed(rotation.merchantId, () => rotateMerchantKeyById(this.#db, this.#masterKey, rotation));
  readonly revokeKey: NonNullable<Storage['revokeKey']> = (merchantId, keyId, options) => this.#changed(merchantId, () => revokeMerchantKeyById(this.#db, merchantId, keyId, options));
  readonly updateKey: NonNullable<Storage['updateKey']> = (merchantId, keyId, patch, options) => this.#changed(merchantId, () => updateMerchantKeyById(this.#db, merchantId, keyId, patch, options));

  /** Waits for a key change, then forgets the merchant held (whether it changed or failed: what is held may be stale either way). */
  async #changed<T>(merchantId: string, change: () => Promise<T>): Promise<T> {
    this.#assertOpen();
    try {
      return await change();
    } finally {
      this.#cache.invalidate(merchantId);
    }
  }

  // Idempotency keys (docs/protocol.md#safe-retries; table `idempotency_keys`), shared by every
  // instance; answers sealed under the master key. Expired keys are pruned with the audit trail.

  async claimIdempotencyKey(claim: IdempotencyClaim): Promise<ClaimOutcome> {
    this.#assertOpen();
    try {
      return await claimIdempotencyKey(this.#db, this.#masterKey, claim);
    } catch (error) {
      if (error instanceof MasterKeyError) throw new StorageUnavailableError(error.message, { cause: error });
      throw storageError(error, 'idempotency key claim');
    }
  }

  async completeIdempotencyKey(completion: IdempotencyCompletion): Promise<void> {
    this.#assertOpen();
    try {
      await completeIdempotencyKey(this.#db, this.#masterKey, completion);
    } catch (error) {
      throw storageError(error, 'idempotency key completion');
    }
  }

  async releaseIdempotencyKey(release: IdempotencyRelease): Promise<void> {
    this.#assertOpen();
    try {
      await releaseIdempotencyKey(this.#db, release);
    } catch (error) {
      throw storageError(error, 'idempotency key release');
    }
  }

  async ping(): Promise<void> {
    this.#assertOpen();
    try {
      await this.#db.selectFrom('merchants').select('id').limit(1).execute();
    } catch (error) {
      throw storageError(error, 'ping');
    }
  }

  /** The changes of merchants' test datasets, in `test_user_changes` (docs/test-mode.md#what-is-stored). */
  testChanges(): TestChangeStore {
    return (this.#testChanges ??= new MysqlTestChanges(this.#db, this.#causal));
  }

  /** The throttle's shared counters (table `auth_failures`); one per storage, whatever asks. */
  throttleStore(): MysqlThrottleStore | undefined {
    if (this.#options.throttleSharing === false || this.#closed) return undefined;
    return (this.#throttleStore ??= new MysqlThrottleStore(this.#db, this.#options.throttleSharing));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#throttleStore?.close();
    await this.#pruning;
    await this.#directory.reading;
    // A connection that failed while it ended rejects the pool's end with the driver's own error: wrapped as every other.
    if (this.#options.destroyOnClose) await this.#db.destroy().catch((error: unknown) => Promise.reject(storageError(error, 'pool end')));
  }

  /** Forgets cached keys: of one merchant, or all (the next lookup reads MySQL). */
  invalidateKeyCache(merchantId?: string): void {
    this.#cache.invalidate(merchantId);
    this.#directory.invalidate();
  }

  /** Deletes expired salts now, in bounded batches; resolves to how many went. */
  async pruneSalts(now: number, options?: PruneOptions): Promise<number> {
    this.#assertOpen();
    try {
      return await pruneExpiredSalts(this.#db, now, { ...this.#options.saltPrune, ...options });
    } catch (error) {
      throw storageError(error, 'salt pruning');
    }
  }

  async #loadMerchant(id: string): Promise<Merchant | undefined> {
    let rows;
    try {
      rows = await this.#causal.execute(
        this.#db
          .selectFrom('merchants as m')
          .leftJoin('merchant_keys as k', (join) =>
            join
              .onRef('k.merchant_id', '=', 'm.id')
              .on('k.revoked_at', 'is', null)
              // A rolled key works until its end (the cache may hold it up to keyCacheTtlMs longer).
              .on((eb) => eb.or([eb('k.expires_at', 'is', null), eb('k.expires_at', '>', sql<string>`UTC_TIMESTAMP(6)`)])),
          )
          .select(['m.id', 'm.status', 'k.sealed_key', 'k.key_id', 'k.scopes', 'k.allow_from', 'k.mode', canonicalColumn('k.expires_at').as('expires_at')])
          .where('m.id', '=', id)
          .orderBy('k.id'),
      );
    } catch (error) {
      throw storageError(error, 'merchant read');
    }
    const first = rows[0];
    if (!first) return undefined;
    const keyRows = rows.filter((row) => row.sealed_key !== null);
    try {
      const keys = await Promise.all(keyRows.map((row) => openApiKey(this.#masterKey, first.id, row.sealed_key!)));
      const keyIds = Object.freeze(keyRows.map((row) => row.key_id!));
      // Only a key an operator limited has limits; a merchant without one has no `keyLimits` at all.
      const limits = keyRows.map((row) => keyLimitsOf(row.scopes, row.allow_from, row.expires_at, row.mode));
      if (!limits.some((limit) => limit !== undefined)) return { id: first.id, status: first.status, keys, keyIds };
      return { id: first.id, status: first.status, keys, keyIds, keyLimits: Object.freeze(limits) };
    } catch (error) {
      // A master key that does not open the keys makes the storage unusable, not the request wrong.
      throw new StorageUnavailableError(error instanceof MasterKeyError ? error.message : 'An API key could not be opened.', { cause: error });
    }
  }

  /**
   * Starts a background prune when the interval has passed. A run that
   * stopped at its batch limit left a backlog: the next request starts the
   * next run at once, so pruning keeps pace with any rate of new salts the
   * database can delete, instead of a fixed number of rows per interval.
   */
  #maybePrune(now: number): void {
    const interval = this.#options.saltPruneIntervalMs ?? DEFAULTS.saltPrune.intervalMs;
    if (interval <= 0 || this.#pruning) return;
    if (!this.#pruneBacklog && performance.now() - this.#lastPrune < interval) return;
    this.#lastPrune = performance.now();
    const options = { batchSize: DEFAULTS.saltPrune.batchSize, maxBatches: DEFAULTS.saltPrune.maxBatches, ...this.#options.saltPrune };
    this.#pruning = pruneExpiredSalts(this.#db, now, options)
      .then(
        (deleted) => {
          this.#pruneBacklog = deleted >= options.batchSize * options.maxBatches;
        },
        (error: unknown) => this.#options.onBackgroundError?.(storageError(error, 'salt pruning')),
      )
      .finally(() => {
        this.#pruning = undefined;
      });
  }

  #assertOpen(): void {
    if (this.#closed) throw new StorageUnavailableError('The MySQL storage is closed.');
  }
}
