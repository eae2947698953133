/**
 * The in-memory storage, the embedded default (docs/protocol.md#storage-and-secrets). Loadable from
 * the seed format; salts expire so memory stays bounded however long it runs.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { KeyInfo, KeyLimits, KeyUse, Merchant, SaltRecord, Storage, UserPageQuery, UserRecord, UserRecordPage } from '../contract.js';
import type { NewWebhookEndpoint, RotatedWebhookSecret, WebhookChangeOptions, WebhookEndpointMode, WebhookEndpointSummary } from '../webhook-endpoints.js';
import type { WebhookOutbox } from '../webhook-outbox.js';
import type { RedeliveryResult, WebhookDeliveryPage, WebhookDeliveryQuery, WebhookRedelivery } from '../webhook-deliveries.js';
import { merchantIdProblem, USER_RECORD_KEYS } from '../contract.js';
import { KEY_SCOPES, limitsNothing, TEST_KEY_PREFIX, type KeyMode, type KeyScope } from '../key-limits.js';
import { canonicalAtMs, cannotGive, LAST_KEY_MANAGER, MAX_ACTIVE_KEYS, newKeyId, TOO_MANY_KEYS } from '../key-changes.js';
import type { CreatedMerchantKey, KeyPatch, KeyRotation, NewMerchantKey, RotatedMerchantKey } from '../contract.js';
import { MerchantApiError, StorageUnavailableError } from '../../errors.js';
import { parseSeed, type Seed, type SeedMerchant } from '../seed/seed.js';
import { MemoryUserIndex } from './users.js';
import { SaltStore, type SaltStoreOptions } from './salts.js';
import { MemoryTestChanges, type TestChangeStore } from '../test-changes.js';
import { MemoryWebhooks, type MemoryDeliverySummary, type MemoryWebhookOptions } from './webhooks.js';
import { MemoryIdempotencyKeys, type MemoryIdempotencyOptions } from './idempotency-keys.js';
import type { ClaimOutcome, IdempotencyClaim, IdempotencyCompletion, IdempotencyRelease } from '../idempotency.js';

/** A seed whose users are already in a `MemoryUserIndex` (the streaming loader builds one). */
export interface IndexedSeed {
  merchants: SeedMerchant[];
  users: MemoryUserIndex;
}

/**
 * Storage held in process memory. Every instance is separate: behind a load
 * balancer use the MySQL storage, whose salts all instances share.
 *
 * @example
 * const storage = createMemoryStorage({ seed: JSON.parse(await readFile('my-seed.json', 'utf8')) }); // or createDemoStorage()
 */
/** A merchant as held: its keys with their ids and limits, computed once when it is put. */
interface HeldMerchant {
  id: string;
  status: 'active' | 'disabled';
  keys: readonly string[];
  keyIds: readonly string[];
  keyLimits: readonly (KeyLimits | undefined)[] | undefined;
  /** What `listKeys` tells of each key, but `last_used_at`. */
  infos: readonly Omit<KeyInfo, 'last_used_at'>[];
}

/** One key of a held merchant, as the key changes take them apart and put them back (`#withKeys`). */
interface HeldKey {
  key: string;
  keyId: string;
  limits: KeyLimits | undefined;
  info: Omit<KeyInfo, 'last_used_at'>;
}

const UNAUTHORIZED_GONE = 'Valid merchant credentials are required (HTTP Basic: merchant id and API key).';

export class MemoryStorage implements Storage {
  readonly #merchants = new Map<string, HeldMerchant>();
  /** When each key was last used (`recordKeyUse`), by key id; bounded by the keys held. */
  readonly #lastUsed = new Map<string, string>();
  // Users with the sorted lists every listing reads (src/storage/memory/users.ts).
  readonly #users: MemoryUserIndex;
  // Salts as keyed fingerprints in typed arrays, with a hard cap (src/storage/memory/salts.ts).
  readonly #salts: SaltStore;
  // Webhook endpoints and the in-process queue of deliveries (src/storage/memory/webhooks.ts).
  readonly #webhooks: MemoryWebhooks;
  // Idempotency keys in a bounded map of this process (src/storage/memory/idempotency-keys.ts).
  readonly #idempotency: MemoryIdempotencyKeys;
  // Changes to the merchants' test datasets (docs/test-mode.md#what-is-stored), lost on exit as the users' changes are;
  // the simulator's events go to the merchant's test endpoints in this storage's queue.
  readonly #testChanges = new MemoryTestChanges((merchantId, events) => this.#webhooks.testEvents(merchantId, events));
  #closed = false;

  constructor(seed: Seed | IndexedSeed = { merchants: [], users: [] }, options: MemoryStorageOptions = {}) {
    this.#salts = new SaltStore(options);
    this.#webhooks = new MemoryWebhooks(options.webhooks);
    this.#idempotency = new MemoryIdempotencyKeys(options.idempotency);
    for (const merchant of seed.merchants) this.putMerchant(merchant);
    this.#users = seed.users instanceof MemoryUserIndex ? seed.users : MemoryUserIndex.fromSeedUsers(seed.users);
  }

  /**
   * Adds or replaces a merchant (keys are its active keys). Throws a `TypeError` naming the rule
   * for an id no merchant may have (`merchantIdProblem`, as the seed, `merchant add` and the MySQL
   * import check it): a merchant with a colon in its id could never authenticate with HTTP Basic.
   */
  putMerchant(merchant: SeedMerchant): void {
    const problem = merchantIdProblem(merchant.id);
    if (problem !== undefined) throw new TypeError(`MemoryStorage.putMerchant: merchant id ${JSON.stringify(merchant.id)}: ${problem}.`);
    const keyIds = merchant.keys.map((key, i) => merchant.keyDetails?.[i]?.keyId ?? memoryKeyId(merchant.id, key));
    const limits = merchant.keys.map((_, i) => merchant.keyDetails?.[i]?.limits);
    const infos = merchant.keys.map((_, i) => {
      const details = merchant.keyDetails?.[i];
      return Object.freeze({
        key_id: keyIds[i]!,
        name: details?.name ?? null,
        scopes: [...(details?.limits?.scopes ?? KEY_SCOPES)],
        created_at: details?.createdAt ?? null,
        expires_at: details?.limits?.expiresAt ?? null,
        allow_from: [...(details?.limits?.allowFrom ?? [])],
        mode: details?.limits?.mode ?? 'live',
      });
    });
    this.#merchants.set(merchant.id, {
      id: merchant.id,
      status: merchant.status,
      keys: Object.freeze([...merchant.keys]),
      keyIds: Object.freeze(keyIds),
      // Absent when no key has a limit: the handler then checks nothing (src/auth/key-gate.ts).
      keyLimits: limits.some((limit) => limit !== undefined) ? Object.freeze(limits) : undefined,
      infos,
    });
    // A disabled merchant's webhooks wait: no new event, no delivery sent until it is active again.
    this.#webhooks.holdMerchant(merchant.id, merchant.status !== 'active');
  }

  /**
   * Adds or replaces a user shared with `merchantId`, stamping its `updated_at` with now; a record
   * equal to the one held changes nothing, `updated_at` included (docs/protocol.md#changed-since).
   */
  putUser(merchantId: string, record: UserRecord): void {
    const picked = pickRecord(record);
    // Webhooks: the record held before, read only when an endpoint of the merchant may receive the change.
    const subscribed = this.#webhooks.hasSubscribers(merchantId);
    const before = subscribed ? this.#users.get(merchantId, picked.shared_user_id) : undefined;
    if (!this.#users.put(merchantId, picked) || !subscribed) return;
    const updatedAt = this.#users.updatedAt(merchantId, picked.shared_user_id)!;
    this.#webhooks.userChanged(merchantId, before, { ...picked, updated_at: updatedAt });
  }

  async getMerchant(id: string): Promise<Merchant | undefined> {
    this.#assertOpen();
    return this.#merchantCopy(id);
  }

  /**
   * Every merchant is held here: the same answer as `getMerchant`, without a promise. Undefined once
   * closed (`getMerchant` then throws), and where a subclass or a wrapper made with `Object.create`
   * has a `getMerchant` of its own: the handler then asks that one.
   */
  cachedMerchant(id: string): Merchant | undefined {
    if (this.getMerchant !== MemoryStorage.prototype.getMerchant || this.#closed) return undefined;
    return this.#merchantCopy(id);
  }

  #merchantCopy(id: string): Merchant | undefined {
    const merchant = this.#merchants.get(id);
    if (merchant === undefined) return undefined;
    if (merchant.keyLimits === undefined) return { id: merchant.id, status: merchant.status, keys: [...merchant.keys], keyIds: merchant.keyIds };
    return { id: merchant.id, status: merchant.status, keys: [...merchant.keys], keyIds: merchant.keyIds, keyLimits: merchant.keyLimits };
  }

  /** Where the handler keeps the changes of this storage's merchants' test datasets. */
  testChanges(): TestChangeStore {
    return this.#testChanges;
  }

  async listKeys(merchantId: string): Promise<KeyInfo[]> {
    this.#assertOpen();
    const merchant = this.#merchants.get(merchantId);
    if (merchant === undefined) return [];
    const now = Date.now();
    return merchant.infos
      .filter((info) => info.expires_at === null || Date.parse(info.expires_at) > now)
      .map((info) => ({ ...info, scopes: [...info.scopes], allow_from: [...info.allow_from], last_used_at: this.#lastUsed.get(info.key_id) ?? null }));
  }

  /** Keeps the latest time of each key held (canonical timestamps order as text). */
  async recordKeyUse(uses: readonly KeyUse[]): Promise<void> {
    this.#assertOpen();
    for (const { merchantId, keyId, at } of uses) {
      if (!this.#merchants.get(merchantId)?.keyIds.includes(keyId)) continue;
      const last = this.#lastUsed.get(keyId);
      if (last === undefined || last < at) this.#lastUsed.set(keyId, at);
    }
  }

  // A merchant's changes to its own keys (`/merchant/keys`, docs/protocol.md#managing-keys). Each
  // runs without an await between its check and its change, so the rules that read the merchant's
  // other keys (the most keys, the last key that manages keys) hold however many requests run at
  // once. The merchant is replaced whole: a copy answered before keeps its keys, the next request
  // sees the change. Keys past their end are dropped at each change, so they cannot pile up.

  async createKey(request: NewMerchantKey): Promise<CreatedMerchantKey> {
    this.#assertOpen();
    const merchant = this.#merchants.get(request.merchantId);
    if (merchant === undefined) throw new MerchantApiError('unauthorized', UNAUTHORIZED_GONE);
    const working = this.#workingKeys(merchant);
    if (working.length >= MAX_ACTIVE_KEYS) throw TOO_MANY_KEYS;
    const created = this.#newKey(merchant, request.name, request.scopes, request.allowFrom, request.expiresAt, request.mode ?? 'live');
    this.#withKeys(merchant, [...working, created.held]);
    return created.answer;
  }

  async rotateKey(rotation: KeyRotation): Promise<RotatedMerchantKey | undefined> {
    this.#assertOpen();
    const merchant = this.#merchants.get(rotation.merchantId);
    if (merchant === undefined) return undefined;
    const working = this.#workingKeys(merchant);
    const old = working.find((key) => key.keyId === rotation.rotatedKeyId);
    if (old === undefined) return undefined;
    const lacking = old.info.scopes.find((scope) => !rotation.mayGive.includes(scope));
    if (lacking !== undefined) throw cannotGive(lacking);
    const overlap = rotation.oldExpiresAt > rotation.now;
    if (overlap && working.length >= MAX_ACTIVE_KEYS) throw TOO_MANY_KEYS;
    const created = this.#newKey(merchant, old.info.name, old.info.scopes, old.info.allow_from, rotation.expiresAt, old.info.mode);
    // An earlier end of the old key stays: a rotation never makes a key last longer.
    const oldEnd = old.info.expires_at !== null && old.info.expires_at < rotation.oldExpiresAt ? old.info.expires_at : rotation.oldExpiresAt;
    const kept = working.filter((key) => key !== old);
    if (overlap) kept.push(heldKey(old.key, old.keyId, old.info.name, old.info.scopes, old.info.allow_from, old.info.created_at, oldEnd, old.info.mode));
    this.#withKeys(merchant, [...kept, created.held]);
    return { ...created.answer, old_key_id: old.keyId, old_key_expires_at: overlap ? oldEnd : rotation.now };
  }

  async revokeKey(merchantId: string, keyId: string): Promise<boolean> {
    this.#assertOpen();
    const merchant = this.#merchants.get(merchantId);
    if (merchant === undefined) return false;
    const working = this.#workingKeys(merchant);
    const revoked = working.find((key) => key.keyId === keyId);
    if (revoked === undefined) return false;
    const rest = working.filter((key) => key !== revoked);
    if (revoked.info.scopes.includes('keys:manage') && !rest.some((key) => key.info.scopes.includes('keys:manage'))) throw LAST_KEY_MANAGER;
    this.#withKeys(merchant, rest);
    this.#lastUsed.delete(keyId);
    return true;
  }

  async updateKey(merchantId: string, keyId: string, patch: KeyPatch): Promise<KeyInfo | undefined> {
    this.#assertOpen();
    const merchant = this.#merchants.get(merchantId);
    if (merchant === undefined) return undefined;
    const working = this.#workingKeys(merchant);
    const key = working.find((held) => held.keyId === keyId);
    if (key === undefined) return undefined;
    const { info } = key;
    const changed = heldKey(key.key, key.keyId, patch.name !== undefined ? patch.name : info.name, info.scopes, patch.allowFrom ?? info.allow_from, info.created_at, info.expires_at, info.mode);
    this.#withKeys(merchant, working.map((held) => (held === key ? changed : held)));
    return { ...changed.info, scopes: [...changed.info.scopes], allow_from: [...changed.info.allow_from], last_used_at: this.#lastUsed.get(keyId) ?? null };
  }

  /** The merchant's keys that work now (not past their end). */
  #workingKeys(merchant: HeldMerchant): HeldKey[] {
    const now = Date.now();
    const keys: HeldKey[] = [];
    for (let i = 0; i < merchant.keys.length; i++) {
      const info = merchant.infos[i]!;
      if (info.expires_at !== null && Date.parse(info.expires_at) <= now) continue;
      keys.push({ key: merchant.keys[i]!, keyId: merchant.keyIds[i]!, limits: merchant.keyLimits?.[i], info });
    }
    return keys;
  }

  /** A new random key (its secret answered once), with a key id no key of the merchant has. */
  #newKey(merchant: HeldMerchant, name: string | null, scopes: readonly KeyScope[], allowFrom: readonly string[], expiresAt: string | null, mode: KeyMode): { held: HeldKey; answer: CreatedMerchantKey } {
    const random = randomBytes(32).toString('base64url');
    const secret = mode === 'test' ? `${TEST_KEY_PREFIX}${random}` : random;
    let keyId = newKeyId();
    while (merchant.keyIds.includes(keyId)) keyId = newKeyId();
    const held = heldKey(secret, keyId, name, scopes, allowFrom, canonicalAtMs(Date.now()), expiresAt, mode);
    return { held, answer: { ...held.info, scopes: [...held.info.scopes], allow_from: [...held.info.allow_from], last_used_at: null, secret } };
  }

  /** Replaces the merchant held by one with these keys (new frozen arrays: copies answered before keep theirs). */
  #withKeys(merchant: HeldMerchant, keys: readonly HeldKey[]): void {
    const limits = keys.map((key) => key.limits);
    this.#merchants.set(merchant.id, {
      id: merchant.id,
      status: merchant.status,
      keys: Object.freeze(keys.map((key) => key.key)),
      keyIds: Object.freeze(keys.map((key) => key.keyId)),
      keyLimits: limits.some((limit) => limit !== undefined) ? Object.freeze(limits) : undefined,
      infos: Object.freeze(keys.map((key) => key.info)),
    });
  }

  /**
   * Records a salt (see `Storage.recordSalt`). Refuses, by throwing the answer: a `ts` from before
   * this storage was created (400), a merchant holding half of `maxSalts` (429), a full store (503).
   */
  async recordSalt({ merchantId, salt, expiresAt, now, ts }: SaltRecord): Promise<boolean> {
    this.#assertOpen();
    return this.#salts.record(merchantId, salt, expiresAt, now, ts);
  }

  async listUsers(query: UserPageQuery): Promise<UserRecordPage> {
    this.#assertOpen();
    return this.#users.page(query);
  }

  async getUser(merchantId: string, sharedUserId: string): Promise<UserRecord | undefined> {
    this.#assertOpen();
    return this.#users.get(merchantId, sharedUserId);
  }

  // Webhook endpoints (docs/webhooks.md#on-the-memory-storage): the operations of the contract, each on
  // the merchant's own endpoints only; the queue the dispatcher sends from is `webhookOutbox`.

  async listWebhookEndpoints(merchantId: string, mode?: WebhookEndpointMode): Promise<WebhookEndpointSummary[]> {
    this.#assertOpen();
    return this.#webhooks.list(merchantId, mode);
  }

  /** Adds an endpoint (its URL checked by the caller, as `/merchant/webhooks` does; every attempt checks it again). */
  async addWebhookEndpoint(endpoint: NewWebhookEndpoint): Promise<WebhookEndpointSummary & { secret: string }> {
    this.#assertOpen();
    // As on MySQL: a merchant that is not (or no longer) there is refused as any request of it.
    if (!this.#merchants.has(endpoint.merchantId)) throw new MerchantApiError('unauthorized', 'Valid merchant credentials are required (HTTP Basic: merchant id and API key).');
    return this.#webhooks.add(endpoint);
  }

  async removeWebhookEndpoint(merchantId: string, endpointId: string, options?: WebhookChangeOptions): Promise<boolean> {
    this.#assertOpen();
    return this.#webhooks.remove(merchantId, endpointId, options?.mode);
  }

  async rotateWebhookSecret(merchantId: string, endpointId: string, expireOldInMs: number, options?: WebhookChangeOptions): Promise<RotatedWebhookSecret | undefined> {
    this.#assertOpen();
    return this.#webhooks.rotate(merchantId, endpointId, expireOldInMs, options?.mode);
  }

  async sendWebhookTest(merchantId: string, endpointId: string, mode?: WebhookEndpointMode): Promise<string | undefined> {
    this.#assertOpen();
    return this.#webhooks.test(merchantId, endpointId, mode);
  }

  async listEndpointDeliveries(query: WebhookDeliveryQuery): Promise<WebhookDeliveryPage | undefined> {
    this.#assertOpen();
    return this.#webhooks.deliveryPage(query);
  }

  /** Sends deliveries again; no audit trail here (nothing of the memory storage is kept): the API logs it. */
  async redeliverEndpointDeliveries(request: WebhookRedelivery): Promise<RedeliveryResult | undefined> {
    this.#assertOpen();
    return this.#webhooks.redeliver(request);
  }

  // Idempotency keys (docs/protocol.md#safe-retries): synchronous on the map, so of two claims of
  // one key at once exactly one is `claimed`. A full map refuses (429 for a merchant at its half, 503).

  async claimIdempotencyKey(claim: IdempotencyClaim): Promise<ClaimOutcome> {
    this.#assertOpen();
    return this.#idempotency.claim(claim);
  }

  async completeIdempotencyKey(completion: IdempotencyCompletion): Promise<void> {
    this.#assertOpen();
    this.#idempotency.complete(completion);
  }

  async releaseIdempotencyKey(release: IdempotencyRelease): Promise<void> {
    this.#assertOpen();
    this.#idempotency.release(release);
  }

  /** How many idempotency keys are held now, and the bytes of their answers (for monitoring and tests). */
  get idempotencyKeys(): { count: number; bytes: number; maxKeys: number; maxBytes: number } {
    const keys = this.#idempotency;
    return { count: keys.size, bytes: keys.bytes, maxKeys: keys.maxKeys, maxBytes: keys.maxBytes };
  }

  /** Enables an endpoint again after it was disabled (a 410, or failing too long); false when the merchant has none with this id. */
  enableWebhookEndpoint(merchantId: string, endpointId: string): boolean {
    return this.#webhooks.enable(merchantId, endpointId);
  }

  /** The newest deliveries first (pending, and finished ones within the retention), of one merchant, endpoint or state. */
  listWebhookDeliveries(options: Parameters<MemoryWebhooks['listDeliveries']>[0] = {}): MemoryDeliverySummary[] {
    return this.#webhooks.listDeliveries(options);
  }

  /** The queue of deliveries, for a `WebhookDispatcher` (`serve` runs one); lost on exit. */
  get webhookOutbox(): WebhookOutbox & { stats(): Promise<{ pending: number; oldestDueAgeMs: number; dropped: number }>; readonly dropped: number } {
    return this.#webhooks;
  }

  async ping(): Promise<void> {
    this.#assertOpen();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#salts.clear();
    this.#webhooks.clear();
    this.#idempotency.clear();
  }

  /** How many unexpired salts are held now (for monitoring and tests). */
  get saltCount(): number {
    return this.#salts.size;
  }

  /** The most salts held at once (`maxSalts`), for monitoring how full the replay store is. */
  get maxSalts(): number {
    return this.#salts.maxSalts;
  }

  #assertOpen(): void {
    if (this.#closed) throw new StorageUnavailableError('The memory storage is closed.');
  }
}

/**
 * Options of the memory storage: its replay store's (docs/configuration.md#memory): `maxSalts`
 * (default 1,000,000; `MAX_SALTS`) and `startedAt` (default: when the storage is created); and
 * the bounds of its webhooks.
 */
export interface MemoryStorageOptions extends SaltStoreOptions {
  /** Bounds of the webhook endpoints and queue (docs/webhooks.md#on-the-memory-storage). */
  webhooks?: MemoryWebhookOptions;
  /** Bounds of the idempotency keys (docs/protocol.md#safe-retries): at most 100,000 keys and 64 MiB of answers by default. */
  idempotency?: MemoryIdempotencyOptions;
}

/** Creates a memory storage, validating `seed` (the seed document) first. */
export function createMemoryStorage(options: { seed?: unknown } & MemoryStorageOptions = {}): MemoryStorage {
  const { seed, ...salts } = options;
  return new MemoryStorage(seed === undefined ? undefined : parseSeed(seed), salts);
}

/** A key as held: its limits (undefined when they limit nothing, as a seed key without any) and what `listKeys` tells. */
function heldKey(key: string, keyId: string, name: string | null, scopes: readonly KeyScope[], allowFrom: readonly string[], createdAt: string | null, expiresAt: string | null, mode: KeyMode): HeldKey {
  const limits = { scopes: Object.freeze([...scopes]), ...(allowFrom.length > 0 && { allowFrom: Object.freeze([...allowFrom]) }), ...(expiresAt !== null && { expiresAt }), ...(mode === 'test' && { mode }) };
  return {
    key,
    keyId,
    limits: limitsNothing(limits) ? undefined : Object.freeze(limits),
    info: Object.freeze({ key_id: keyId, name, scopes: [...scopes], created_at: createdAt, expires_at: expiresAt, allow_from: [...allowFrom], mode }),
  };
}

/**
 * The id of a key a seed names without one: `key_` and 12 base32 characters of the SHA-256 of the
 * merchant and the key, so that every process loading the same seed names a key alike and the
 * same key of two merchants has two ids. It tells no more of the key than its fingerprint does.
 */
function memoryKeyId(merchantId: string, key: string): string {
  const digest = createHash('sha256').update(`${merchantId}\u0000${key}`, 'utf8').digest();
  let id = 'key_';
  for (let i = 0; i < 12; i++) id += '0123456789abcdefghjkmnpqrstvwxyz'[digest[i]! & 31];
  return id;
}

function pickRecord(record: UserRecord): UserRecord {
  const copy = {} as Record<string, string | null>;
  for (const key of USER_RECORD_KEYS) copy[key] = record[key];
  return copy as unknown as UserRecord;
}
