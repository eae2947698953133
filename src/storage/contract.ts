/**
 * The storage interface the handler needs (docs/protocol.md#storage-and-secrets), and the records
 * it passes around. Implementations: `merchant-api/storage/memory` and
 * `merchant-api/storage/mysql`. The contract every implementation must meet
 * is `test/suites/storage-contract.ts`.
 */
import type { KeyLimits, KeyMode, KeyScope } from './key-limits.js';
import type { ThrottleStore } from './throttle-store.js';
import type { RedeliveryResult, WebhookDeliveryPage, WebhookDeliveryQuery, WebhookRedelivery } from './webhook-deliveries.js';
import type { NewWebhookEndpoint, RotatedWebhookSecret, WebhookChangeOptions, WebhookEndpointMode, WebhookEndpointSummary } from './webhook-endpoints.js';
import { IDEMPOTENCY_OPERATIONS, type ClaimOutcome, type IdempotencyClaim, type IdempotencyCompletion, type IdempotencyRelease } from './idempotency.js';

export type { KeyLimits, KeyMode, KeyScope } from './key-limits.js';

/** A merchant with the API keys that currently work, in the clear. */
export interface Merchant {
  id: string;
  status: 'active' | 'disabled';
  /** Active (not revoked) keys; any of them signs and authenticates. */
  keys: string[];
  /**
   * The public id of each key, in the order of `keys`, when the storage names its keys: the handler
   * notes which key was used (`recordKeyUse`). Never changed once answered, so copies may share it.
   */
  keyIds?: readonly string[];
  /**
   * The limits of each key, in the order of `keys` (undefined for a key without any); absent when
   * no key of the merchant has one, so a merchant with plain keys costs the check nothing. Never
   * changed once answered, so copies may share it (src/auth/key-gate.ts compiles each once).
   */
  keyLimits?: readonly (KeyLimits | undefined)[];
}

/**
 * What `GET /merchant/keys` and `merchant keys --json` tell of one key, never its secret
 * (docs/protocol.md#keys). Timestamps are canonical; `scopes` lists every scope the key has.
 */
export interface KeyInfo {
  key_id: string;
  name: string | null;
  scopes: KeyScope[];
  created_at: string | null;
  expires_at: string | null;
  last_used_at: string | null;
  allow_from: string[];
  /** `test`: the key reaches the merchant's test dataset only (docs/test-mode.md); every older key is `live`. */
  mode: KeyMode;
}

/** The mode of the merchant's key `keyIndex` (the one that matched): `test` only when its limits say so. */
export function keyModeOf(merchant: Merchant, keyIndex: number): KeyMode {
  return merchant.keyLimits?.[keyIndex]?.mode === 'test' ? 'test' : 'live';
}

// The records of a merchant's changes to its own keys (`Storage.createKey` and the rest,
// docs/protocol.md#managing-keys); the bounds and refusals are in key-changes.ts.

/** Who a change is recorded as (a storage with an audit trail): `merchant:ID key:KEY_ID`, and that key's id for the row's `key_id`. */
export interface KeyChangeOptions {
  actor?: string;
  /** The id of the key that authenticated the request which makes the change. */
  keyId?: string;
}

/** A key a merchant adds (`Storage.createKey`), already checked by the handler. */
export interface NewMerchantKey extends KeyChangeOptions {
  merchantId: string;
  name: string | null;
  /** At least one; every scope is stored as a key without limits. */
  scopes: readonly KeyScope[];
  /** Canonical networks (`parseAllowFrom`); empty: anywhere. */
  allowFrom: readonly string[];
  /** When it stops working, canonical UTC; null: never. */
  expiresAt: string | null;
  /** `test`: a test key (`test_…`, docs/test-mode.md), reaching the merchant's test dataset only. Absent: live. */
  mode?: KeyMode;
}

/** A key added or rotated in: what `GET /merchant/keys` lists of it, and its secret, shown only in this answer. */
export interface CreatedMerchantKey extends KeyInfo {
  secret: string;
}

/** A rotation (`Storage.rotateKey`): the new key, with the old one's end. */
export interface RotatedMerchantKey extends CreatedMerchantKey {
  /** The key rotated out. */
  old_key_id: string;
  /** When the old key stops working, canonical UTC (now, for a rotation without overlap). */
  old_key_expires_at: string;
}

/** What `Storage.rotateKey` is asked. */
export interface KeyRotation extends KeyChangeOptions {
  merchantId: string;
  /** The key to rotate out. */
  rotatedKeyId: string;
  /** When the old key stops working, canonical UTC: now (at once) or up to `MAX_KEY_OVERLAP_MS` later. */
  oldExpiresAt: string;
  /** The new key's end, canonical UTC; null: never. */
  expiresAt: string | null;
  /** Now, canonical: the old key is revoked at once when `oldExpiresAt` is not later. */
  now: string;
  /** The scopes the calling key has: a key with another is not rotated (403 `insufficient_scope`, `cannotGive`). */
  mayGive: readonly KeyScope[];
}

/** What `PATCH /merchant/keys/{key_id}` may change: the name (null: none) and the networks (empty: anywhere). */
export interface KeyPatch {
  name?: string | null;
  allowFrom?: readonly string[];
}

/** One key seen in use, for `Storage.recordKeyUse`; `at` is canonical. */
export interface KeyUse {
  merchantId: string;
  keyId: string;
  at: string;
}

/** How `Storage.getMerchant` looks a merchant up. */
export interface MerchantLookup {
  /** Read the merchant again rather than from a cache (rate-limited by the storage). */
  refresh?: boolean;
}

/**
 * A user record exactly as the API answers it (docs/protocol.md#users): all 14 keys.
 * Timestamps are canonical strings, `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`
 * (see `src/storage/timestamps.ts`), so microseconds never pass through a `Date`.
 */
export interface UserRecord {
  shared_user_id: string;
  first_name: string;
  last_name: string;
  email_address: string;
  street: string;
  zip_code: string;
  city: string;
  state: string | null;
  country: string;
  preferred_language: string;
  date_joined: string;
  deactivated_at: string | null;
  agreed_to_terms_and_conditions: string | null;
  agreed_to_marketing: string | null;
}

/** The 14 keys of a user record, in the order the API writes them. */
export const USER_RECORD_KEYS = [
  'shared_user_id',
  'first_name',
  'last_name',
  'email_address',
  'street',
  'zip_code',
  'city',
  'state',
  'country',
  'preferred_language',
  'date_joined',
  'deactivated_at',
  'agreed_to_terms_and_conditions',
  'agreed_to_marketing',
] as const satisfies readonly (keyof UserRecord)[];

/**
 * A user record with the time it last changed for this merchant (docs/protocol.md#changed-since):
 * what a storage answers in `order: 'updated_at'`. `updated_at` is canonical, like the others.
 */
export interface ChangedUserRecord extends UserRecord {
  updated_at: string;
}

/** Filters of the list endpoint; timestamps are canonical strings. */
export interface UserFilter {
  /** true: only `deactivated_at` null; false: only deactivated users. */
  active?: boolean;
  /** Exclusive lower bound on `date_joined`. */
  joinedAfter?: string;
  /** Exclusive upper bound on `date_joined`. */
  joinedBefore?: string;
  /** Inclusive lower bound on `updated_at`; only with `order: 'updated_at'`. */
  updatedSince?: string;
}

/**
 * The order of a listing (docs/protocol.md#pagination-and-cursors): `shared_user_id` in code-point
 * (UTF-8 byte) order, the default; `date_joined`, oldest first, ties by `shared_user_id`; or
 * `updated_at`, least recently changed first, ties by `shared_user_id` (the records then carry
 * `updated_at`: `ChangedUserRecord`).
 */
export type UserOrder = 'shared_user_id' | 'date_joined' | 'updated_at';

/**
 * One keyset page: users of `merchantId` matching `filter`, in `order`, starting strictly after
 * the position `after` (with `order: 'date_joined'`, after `(afterJoined, after)`; with
 * `order: 'updated_at'`, after `(afterUpdated, after)`), at most `limit` of them.
 */
export interface UserPageQuery {
  merchantId: string;
  filter: UserFilter;
  /** Default `shared_user_id`. */
  order?: UserOrder;
  /** The `shared_user_id` of the position to start after. */
  after?: string;
  /** With `order: 'date_joined'` and `after`: the `date_joined` of that position (canonical). */
  afterJoined?: string;
  /** With `order: 'updated_at'` and `after`: the `updated_at` of that position (canonical). */
  afterUpdated?: string;
  limit: number;
  /**
   * Optional, only with `order: 'updated_at'` and no filter but `updatedSince`: also answer the
   * shares removed from this merchant in the same range (`UserRecordPage.removals`), for the change
   * feed (`include_removed=true`, docs/protocol.md#removals). A storage that removes no share (the
   * memory storage) may ignore it: it then has no removal to tell.
   */
  includeRemoved?: boolean;
  /**
   * Set by a streamed listing (every user in batches): the same object on every batch of one
   * listing. A storage that reads from several sources (a replica and its primary) answers every
   * batch of it from the source of the first, so the document is one source's view; others ignore it.
   */
  listing?: object;
}

/**
 * What `listUsers` answers: the users, in order. A storage that examines a bounded number of
 * users per call may stop before it has `limit` of them (docs/protocol.md#filters); it then sets
 * `resumeAfter`, the `shared_user_id` the listing goes on strictly after (in the default order and
 * in `order: 'updated_at'`, where `resumeAfterUpdated` is that position's `updated_at`). Without
 * `resumeAfter`, fewer than `limit` users means the listing is complete. A plain array is a valid
 * answer; in `order: 'updated_at'` every record is a `ChangedUserRecord`.
 */
export interface UserRecordPage extends Array<UserRecord> {
  resumeAfter?: string;
  resumeAfterUpdated?: string;
  /**
   * With `includeRemoved`: the next `limit` removals of shares still removed (not shared again)
   * from the same start (`updatedSince`, inclusive, and after the position, by
   * `(removed_at, shared_user_id)`), in that order. The handler merges them with the users.
   */
  removals?: ShareRemoval[];
  /**
   * With `includeRemoved`: the newest `removed_at` among this merchant's removals the storage no
   * longer keeps (pruned by its retention), if any: a feed asked from before it answers 410 `gone`.
   */
  removalsPrunedThrough?: string;
}

/** A share removed from a merchant (erased, unshared): its tombstone in the change feed. `removed_at` is canonical. */
export interface ShareRemoval {
  shared_user_id: string;
  removed_at: string;
}

/** A salt to record for replay protection (docs/protocol.md#signing). */
export interface SaltRecord {
  merchantId: string;
  salt: string;
  /** Unix seconds after which the salt may be forgotten (its ts + tolerance). */
  expiresAt: number;
  /** The handler's clock, Unix seconds: salts that expired before it are gone. */
  now: number;
  /**
   * The request's `ts`, Unix seconds. The memory storage refuses a ts from before it started,
   * as it cannot know the salts seen then; a shared storage (MySQL) ignores it.
   */
  ts?: number;
  /**
   * The most seconds ahead of `now` the handler accepts a ts (its `timestampFutureTolerance`):
   * salts on Redis refuse every ts up to then after a loss of their data (docs/scaling.md).
   */
  futureTolerance?: number;
}

/**
 * Everything the handler asks of a storage. A backend failure should throw
 * `StorageUnavailableError`; the handler answers 503 for it (and for anything
 * else a storage throws) and bounds every call by a timeout.
 */
export interface Storage {
  /**
   * The merchant with its active keys, or undefined when no merchant has this id. With
   * `{ refresh: true }` (asked when a presented key matched none of the keys answered before):
   * a storage that caches merchants reads this one again, at most once per merchant per second,
   * so a key added on another instance works at once; one that does not cache ignores it.
   */
  getMerchant(id: string, options?: MerchantLookup): Promise<Merchant | undefined>;
  /**
   * Optional: the merchant as `getMerchant(id)` would answer it now, when the storage holds it in
   * memory (the memory storage's map, the MySQL storage's merchant cache), synchronously; undefined
   * when it would have to be read (or no merchant has this id, or the storage is closed): the
   * handler then calls `getMerchant`. Lets a request whose merchant is held authenticate without
   * waiting for a promise (docs/benchmarks.md#the-node-direct-path-28-november-2026). Never does I/O.
   */
  cachedMerchant?(id: string): Merchant | undefined;
  /**
   * Records a salt atomically across every instance sharing the storage.
   * Returns true when it was new (or only an expired record of it existed),
   * false when this merchant already used it inside the window: a replay.
   */
  recordSalt(record: SaltRecord): Promise<boolean>;
  /** One keyset page of the merchant's users (see `UserPageQuery` and `UserRecordPage`). */
  listUsers(query: UserPageQuery): Promise<UserRecordPage>;
  /** One user as shared with this merchant, or undefined. */
  getUser(merchantId: string, sharedUserId: string): Promise<UserRecord | undefined>;
  /**
   * The merchant's keys that still work (not revoked, not expired), oldest first, as `KeyInfo`:
   * never a secret. Empty for an unknown merchant.
   */
  listKeys(merchantId: string): Promise<KeyInfo[]>;
  /** Resolves when the backend answers; throws when it does not. */
  ping(): Promise<void>;
  /** Releases what the storage holds (pools, timers). */
  close(): Promise<void>;
  /**
   * Optional: how many calls the storage runs at once (a pool's connections). When set, one
   * authenticated merchant's calls take at most half of them and the rest wait in a queue of
   * that merchant's own (docs/security.md#fair-sharing). The MySQL storage sets it.
   */
  readonly concurrency?: number;
  /**
   * Optional, with `concurrency`: the calls that take one of those connections (default: all).
   * A storage that answers some calls elsewhere, such as salts on Redis in front of MySQL, leaves
   * those out, so that they do not wait for the merchant's share of a pool they do not use.
   */
  readonly pooledOperations?: readonly StorageOperation[];
  /**
   * Optional: how the storage's parts did at their last use, known without a call, for the
   * details of `/healthz` (docs/protocol.md#endpoints). A part that is not ok leaves the
   * instance live and ready: the Redis wrapper reports Redis here, whose outage only refuses
   * signatures. Never a secret in `problem`.
   */
  health?(): Record<string, PartHealth>;
  /**
   * Optional: where every instance on this storage shares the counters of the failed-authentication
   * throttle (docs/security.md#sharing-the-counters-on-mysql). The MySQL storage has one; without it
   * each instance counts alone. Asked once per handler.
   */
  throttleStore?(): ThrottleStore | undefined;
  /**
   * Optional: where the changes of merchants' test datasets are kept (docs/test-mode.md#what-is-stored),
   * shared by every instance on this storage (MySQL: `test_user_changes`). Without it each instance
   * keeps them in its own memory. Asked once per handler.
   */
  testChanges?(): TestChangeStore | undefined;
  /**
   * Optional: stores when keys were last used (`last_used_at`), a later time never replaced by an
   * earlier one. Called off the request path, in batches, at most once a minute per key
   * (src/auth/key-use.ts); without it `last_used_at` stays null.
   */
  recordKeyUse?(uses: readonly KeyUse[]): Promise<void>;
  /*
   * Optional: a merchant's webhook endpoints (docs/webhooks.md#endpoints), for `/merchant/webhooks`.
   * Each acts only on `merchantId`'s endpoints: another merchant's id is not found. A storage
   * without them answers those paths 501 `not_implemented` (the guard says so); the MySQL and memory storages have them.
   * A change's `actor` (`NewWebhookEndpoint.actor`, `WebhookChangeOptions`) is for a storage's audit trail.
   * Each acts on one mode's endpoints (`mode`, default `live`; the test view of test-mode passes
   * `test`): an endpoint of the other mode is not found (docs/test-mode.md#webhooks).
   */
  /** The merchant's endpoints, oldest first; never a secret. */
  listWebhookEndpoints?(merchantId: string, mode?: WebhookEndpointMode): Promise<WebhookEndpointSummary[]>;
  /** Adds an endpoint (its URL already checked); its secret is in the answer, the only time it is shown. A merchant at its limit: 409 `conflict`. */
  addWebhookEndpoint?(endpoint: NewWebhookEndpoint): Promise<WebhookEndpointSummary & { secret: string }>;
  /** Removes an endpoint with its deliveries: false when the merchant has none with this id. */
  removeWebhookEndpoint?(merchantId: string, endpointId: string, options?: WebhookChangeOptions): Promise<boolean>;
  /** A new secret, the old one still signing for `expireOldInMs`; undefined when the merchant has no endpoint with this id. */
  rotateWebhookSecret?(merchantId: string, endpointId: string, expireOldInMs: number, options?: WebhookChangeOptions): Promise<RotatedWebhookSecret | undefined>;
  /** Queues a `webhook.test` event for the endpoint; its event id, or undefined when not found. A disabled endpoint: 409 `conflict`. */
  sendWebhookTest?(merchantId: string, endpointId: string, mode?: WebhookEndpointMode): Promise<string | undefined>;
  /** One page of an endpoint's deliveries, newest first, bounded (`src/storage/webhook-deliveries.ts`); undefined when the merchant has no endpoint with this id. */
  listEndpointDeliveries?(query: WebhookDeliveryQuery): Promise<WebhookDeliveryPage | undefined>;
  /** Sends an endpoint's deliveries again (of one event, or the oldest `max` since a time), audited; undefined when not found. A disabled endpoint: 409 `conflict`. */
  redeliverEndpointDeliveries?(request: WebhookRedelivery): Promise<RedeliveryResult | undefined>;
  /*
   * Optional: a merchant's changes to its own keys (docs/protocol.md#managing-keys), for
   * `/merchant/keys`; the records are in `src/storage/key-changes.ts`. Each acts only on
   * `merchantId`'s working keys (not revoked, not past their end): another merchant's key id is
   * not found. Each is atomic with the rules that read the merchant's other keys: at most
   * `MAX_ACTIVE_KEYS` working keys (409), never revoking the last working key with `keys:manage`
   * (409), even when two requests ask at once on two instances. A changed key works, or stops,
   * at once on the instance that changed it. A storage without them answers 501 (the guard).
   */
  /** Adds a random key; its secret is in the answer, the only time it is shown. A merchant that is gone: 401. */
  createKey?(key: NewMerchantKey): Promise<CreatedMerchantKey>;
  /** A new key with the old one's name, scopes and networks, the old one ending at `oldExpiresAt`; undefined when not found. */
  rotateKey?(rotation: KeyRotation): Promise<RotatedMerchantKey | undefined>;
  /** Revokes a key now: false when the merchant has no working key with this id. */
  revokeKey?(merchantId: string, keyId: string, options?: KeyChangeOptions): Promise<boolean>;
  /** Changes a key's name or networks; the key as listed after, or undefined when not found. */
  updateKey?(merchantId: string, keyId: string, patch: KeyPatch, options?: KeyChangeOptions): Promise<KeyInfo | undefined>;
  /*
   * Optional: idempotency keys (docs/protocol.md#safe-retries, src/storage/idempotency.ts), for the
   * `Idempotency-Key` of every POST of the merchant API. Atomic across every instance sharing the
   * storage: of two claims of one key at once, exactly one is `claimed`. A storage without them
   * answers a request carrying the header 501 `not_implemented` (one without it runs as before).
   */
  /** Claims `key` for a request, or answers what holds it: a stored answer, a running request, another request's key. */
  claimIdempotencyKey?(claim: IdempotencyClaim): Promise<ClaimOutcome>;
  /** Stores the answer of a claimed request, kept until the claim's `ttlMs` ran out; a claim taken over since (another token) changes nothing. */
  completeIdempotencyKey?(completion: IdempotencyCompletion): Promise<void>;
  /** Forgets a claim whose answer is not kept (a 5xx, a 429), so a retry runs; another token changes nothing. */
  releaseIdempotencyKey?(release: IdempotencyRelease): Promise<void>;
}

/** One user's latest change: its record now, or null when it is no longer shared (a tombstone); `at` canonical. */
export interface TestChange {
  shared_user_id: string;
  record: UserRecord | null;
  at: string;
}

/** A simulated change as a webhook event (`src/testmode/simulator.ts`): sent as every event is, `{"type","timestamp","data"}`. */
export interface TestWebhookEvent {
  type: 'user.shared' | 'user.updated' | 'user.deactivated' | 'user.unshared';
  /** The change's time, canonical: the body's `timestamp`. */
  timestamp: string;
  /** The event's `data`, JSON text (`userEventData`, `unsharedEventData`). */
  data: string;
}

/** Where a storage keeps the changes of test datasets (docs/test-mode.md#what-is-stored; memory: `MemoryTestChanges` of test-changes.ts). Every call acts on one merchant's test dataset only. */
export interface TestChangeStore {
  /** Every change held for the merchant, the latest per user, in any order. */
  changes(merchantId: string): Promise<TestChange[]>;
  /**
   * Stores the changes in order, each replacing the user's earlier one; all or none. `events`: the
   * webhook events they are, queued with them (in the same transaction where the store has one)
   * for the merchant's enabled test endpoints that receive their type, and for no live endpoint
   * (docs/test-mode.md#webhooks); a store without webhooks ignores them.
   */
  record(merchantId: string, changes: readonly TestChange[], events?: readonly TestWebhookEvent[]): Promise<void>;
  /** Forgets every change of the merchant: its dataset is the generated one again. */
  reset(merchantId: string): Promise<void>;
}

/** How one part of a storage did at its last use. */
export interface PartHealth {
  ok: boolean;
  /** What failed, for operators: an error name and code, never a secret or a user field. */
  problem?: string;
}

/**
 * The storage methods the handler calls per request, as named in logs, metrics and spans: every
 * method `Storage` requires but `close`. One list, so that what forwards them (the guard's view of
 * a request, `ForwardingStorage` under the Redis and replica wrappers) is built from it, and a new
 * operation is written here, in `Storage`, and in each storage.
 */
/** The optional operations of a merchant's webhook endpoints: a storage may lack them (the guard then answers 501). */
export const WEBHOOK_OPERATIONS = ['listWebhookEndpoints', 'addWebhookEndpoint', 'removeWebhookEndpoint', 'rotateWebhookSecret', 'sendWebhookTest', 'listEndpointDeliveries', 'redeliverEndpointDeliveries'] as const;

/** The optional operations of a merchant's changes to its keys: a storage may lack them (the guard then answers 501). */
export const KEY_OPERATIONS = ['createKey', 'rotateKey', 'revokeKey', 'updateKey'] as const;

/** Every optional operation: a storage may lack each (the guard answers 501 for it; a request with `Idempotency-Key` on a storage without the idempotency ones is 501 too). */
export const OPTIONAL_OPERATIONS = [...WEBHOOK_OPERATIONS, ...KEY_OPERATIONS, ...IDEMPOTENCY_OPERATIONS] as const;

export const STORAGE_OPERATIONS = ['getMerchant', 'recordSalt', 'listUsers', 'getUser', 'ping', 'listKeys', ...OPTIONAL_OPERATIONS] as const;

/** A storage method the handler calls per request (`STORAGE_OPERATIONS`). */
export type StorageOperation = (typeof STORAGE_OPERATIONS)[number];

/** The methods `Storage` requires, by name. */
type RequiredStorageMethod = {
  [K in keyof Storage]-?: undefined extends Storage[K] ? never : Storage[K] extends (...args: never[]) => unknown ? K : never;
}[keyof Storage];

/** An optional operation a storage may lack (`OPTIONAL_OPERATIONS`: webhooks, keys, idempotency keys). */
export type OptionalStorageOperation = (typeof OPTIONAL_OPERATIONS)[number];

/** `true` only when `STORAGE_OPERATIONS` names every required method but `close`, the optional operations, and nothing else. */
type Expected = Exclude<RequiredStorageMethod, 'close'> | OptionalStorageOperation;
type OperationsMatchContract = [Expected] extends [StorageOperation] ? ([StorageOperation] extends [Expected] ? ([OptionalStorageOperation] extends [keyof Storage] ? true : false) : false) : false;
type MustBeTrue<T extends true> = T;
// A method added to `Storage` and not to `STORAGE_OPERATIONS` (or the reverse) stops the build here.
type StorageOperationsCheck = MustBeTrue<OperationsMatchContract>;

/** Longest merchant id, salt and shared_user_id any storage must accept. */
export const MAX_ID_LENGTH = 128;

/**
 * What a merchant id may be, said once for every place that creates or imports one: 1-128
 * characters (`MAX_ID_LENGTH`), no `:` (HTTP Basic ends the user name at the first colon, so
 * such a merchant could never list its users) and no control character (C0, DEL, C1: a log or
 * a terminal would show something else). Anything else printable, Unicode included, is allowed.
 */
export const MERCHANT_ID_RULE = `1-${MAX_ID_LENGTH} characters, without a colon or a control character`;

/** Why `id` cannot be a merchant id (a sentence naming the rule), or undefined when it can. */
export function merchantIdProblem(id: string): string | undefined {
  if (id.length === 0 || id.length > MAX_ID_LENGTH) return `must be ${MERCHANT_ID_RULE} (this one has ${id.length} characters)`;
  if (id.includes(':')) return `must be ${MERCHANT_ID_RULE}: HTTP Basic authentication ends the merchant id at the first colon`;
  if (/[\u0000-\u001f\u007f-\u009f]/.test(id)) return `must be ${MERCHANT_ID_RULE}: it holds a control character`;
  return undefined;
}
