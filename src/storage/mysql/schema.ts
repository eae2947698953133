/**
 * Kysely table types of the MySQL storage (created by `migrations.ts`).
 * Timestamps are `DATETIME(6)` in UTC and travel as strings, never `Date`.
 */
import type { ColumnType, Generated } from 'kysely';
import { USER_RECORD_KEYS, type UserRecord } from '../contract.js';

/** A timestamp column the database fills on insert. */
type CreatedAt = ColumnType<string, string | undefined, never>;

export interface MerchantsTable {
  /** `utf8mb4_nopad_bin`: case-sensitive, trailing spaces significant. */
  id: string;
  status: 'active' | 'disabled';
  created_at: CreatedAt;
  updated_at: ColumnType<string, string | undefined, string>;
}

/** Several keys per merchant (rotation); a key works while `revoked_at` is null and `expires_at` is null or later. */
export interface MerchantKeysTable {
  id: Generated<string | number>;
  merchant_id: string;
  /** Compact JWE from `key-sealing.ts`; the clear key is never stored. */
  sealed_key: string;
  created_at: CreatedAt;
  revoked_at: string | null;
  /** The public id, `key_` and 12 base32 characters (migration 0004; `src/storage/sql/key-ids.ts`). */
  key_id: string;
  /** First 8 bytes of the key's SHA-256, hex; NULL for keys older than migration 0004 until `merchant keys` fills it. */
  fingerprint: ColumnType<string | null, string | null | undefined, string | null>;
  /** When the key stops working (a rolled key); NULL: never. */
  expires_at: ColumnType<string | null, string | null | undefined, string | null>;
  /** What the operator calls the key (migration 0007); NULL: unnamed. */
  name: ColumnType<string | null, string | null | undefined, string | null>;
  /** Scopes, comma-separated (migration 0007); NULL: every scope. */
  scopes: ColumnType<string | null, string | null | undefined, string | null>;
  /** Networks in canonical CIDR, comma-separated (migration 0007); NULL: anywhere. */
  allow_from: ColumnType<string | null, string | null | undefined, string | null>;
  /** When the key was last seen in use, to within a minute (migration 0007). */
  last_used_at: ColumnType<string | null, string | null | undefined, string | null>;
  /** `live` or `test` (migration 0017; docs/test-mode.md); every older key is live. */
  mode: ColumnType<'live' | 'test', 'live' | 'test' | undefined, never>;
}

/** The latest change of each user of a merchant's test dataset (migration 0017): the user's JSON, or NULL once unshared. */
export interface TestUserChangesTable {
  merchant_id: string;
  shared_user_id: string;
  record: string | null;
  changed_at: string;
}

/** One administrative change (migration 0007): never a secret or a user's field. */
export interface AuditEventsTable {
  id: Generated<string | number>;
  at: string;
  actor: string;
  action: string;
  merchant_id: string | null;
  key_id: string | null;
  /** JSON of counts and ids. */
  summary: string;
}

/**
 * A person's record: the API record's fields but `shared_user_id`, which
 * belongs to each share. Timestamps here are `DATETIME(6)` text in UTC.
 */
export interface UsersTable extends Omit<UserRecord, 'shared_user_id'> {
  /** BIGINT: a string when the pool has `bigNumberStrings`, written as a decimal string. */
  id: ColumnType<string | number, string | undefined, never>;
}

/**
 * Which merchant sees which user under which id; one user may have several. `is_active` and
 * `date_joined` copy the user's filter fields next to the keyset order (migration 0002); every
 * write of a user keeps them in step.
 */
export interface UserSharesTable {
  merchant_id: string;
  shared_user_id: string;
  user_id: ColumnType<string | number, string, never>;
  /** 1 while the user's `deactivated_at` is null, else 0. */
  is_active: number;
  /** The user's `date_joined`, `DATETIME(6)` text in UTC. */
  date_joined: string;
  /** When the record or the share last changed, `DATETIME(6)` text in UTC (migration 0005). */
  updated_at: ColumnType<string, string | undefined, string>;
}

/** Salts used inside the timestamp window, per merchant (replay protection). */
export interface UsedSaltsTable {
  merchant_id: string;
  salt: string;
  expires_at: string;
}

/** The whole schema, for `Kysely<MerchantApiDatabase>`. */
export interface MerchantApiDatabase {
  merchants: MerchantsTable;
  merchant_keys: MerchantKeysTable;
  users: UsersTable;
  user_shares: UserSharesTable;
  used_salts: UsedSaltsTable;
  audit_events: AuditEventsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  share_removals: ShareRemovalsTable;
  idempotency_keys: IdempotencyKeysTable;
  test_user_changes: TestUserChangesTable;
}

/** A merchant's `Idempotency-Key` (migration 0015): running while `claim_token` is set, answered once `sealed_answer` is. */
export interface IdempotencyKeysTable {
  merchant_id: string;
  idempotency_key: string;
  fingerprint: string;
  claim_token: string | null;
  lease_until: string | null;
  expires_at: string;
  status: number | null;
  /** Compact JWE of the answer (`src/storage/sql/answer-sealing.ts`). */
  sealed_answer: string | null;
}

/** The latest removal of each share (migration 0013); `shared_user_id = ''` is the merchant's prune horizon. */
export interface ShareRemovalsTable {
  merchant_id: string;
  shared_user_id: string;
  removed_at: string;
}

/** A merchant's webhook receiver (migration 0008); the secret sealed as `key-sealing.ts` seals API keys. */
export interface WebhookEndpointsTable {
  id: string;
  merchant_id: string;
  /** `test`: added with a test key, receives the simulator's events only (migration 0017); existing endpoints are `live`. */
  mode: ColumnType<'live' | 'test', 'live' | 'test' | undefined, never>;
  url: string;
  /** Event types it receives, comma-separated. */
  events: string;
  status: ColumnType<'enabled' | 'disabled', 'enabled' | 'disabled' | undefined, 'enabled' | 'disabled'>;
  disabled_reason: ColumnType<string | null, string | null | undefined, string | null>;
  sealed_secret: string;
  previous_sealed_secret: ColumnType<string | null, string | null | undefined, string | null>;
  previous_expires_at: ColumnType<string | null, string | null | undefined, string | null>;
  failing_since: ColumnType<string | null, string | null | undefined, string | null>;
  /** When the endpoint's budget of test events is whole again (migration 0012); NULL: whole. */
  test_budget_until: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: CreatedAt;
  updated_at: ColumnType<string, string | undefined, string>;
}

/**
 * One event for one merchant (migration 0008): `data` is the JSON its body carries; NULL for a user
 * event that references its share (`shared_user_id`, migration 0010), whose record is built when sent.
 */
export interface WebhookEventsTable {
  id: string;
  merchant_id: string;
  shared_user_id: ColumnType<string | null, string | null | undefined, string | null>;
  type: string;
  data: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: string;
}

/** One event for one endpoint, and its attempts (migration 0008). */
export interface WebhookDeliveriesTable {
  id: Generated<string | number>;
  event_id: string;
  endpoint_id: string;
  merchant_id: string;
  state: ColumnType<'pending' | 'delivered' | 'failed' | 'cancelled', 'pending' | undefined, 'pending' | 'delivered' | 'failed' | 'cancelled'>;
  attempts: ColumnType<number, number | undefined, number>;
  next_attempt_at: string;
  claim_token: ColumnType<string | null, string | null | undefined, string | null>;
  leased_until: ColumnType<string | null, string | null | undefined, string | null>;
  last_attempt_at: ColumnType<string | null, string | null | undefined, string | null>;
  last_status: ColumnType<number | null, number | null | undefined, number | null>;
  last_error: ColumnType<string | null, string | null | undefined, string | null>;
  last_response: ColumnType<Buffer | null, Buffer | null | undefined, Buffer | null>;
  created_at: string;
}

/** The user columns other than ids, in the API's order: the record's keys but its shared id. */
export const USER_FIELDS = USER_RECORD_KEYS.filter(
  (key): key is Exclude<(typeof USER_RECORD_KEYS)[number], 'shared_user_id'> => key !== 'shared_user_id',
);

/** Longest text any user column holds (characters); the import checks it first. */
export const USER_FIELD_MAX_LENGTH = 255;
/** Longest API key the import accepts, in UTF-8 bytes: its JWE must fit `sealed_key` (2048). */
export const API_KEY_MAX_LENGTH = 512;
