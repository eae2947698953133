/**
 * The types of `merchant-api/client`, in one place. The record and the error
 * codes are the server's own types (type-only imports: nothing of the server
 * is bundled); the rest describe the wire (docs/protocol.md#users) and the
 * client's options. test/client/types.test.ts checks them both ways against
 * types generated from the server's OpenAPI document, so they cannot drift.
 */
import type { MerchantApiErrorCode } from '../errors.js';
import type { SigningParams } from '../signing/index.js';
import type { ChangedUserRecord, KeyInfo, UserRecord } from '../storage/contract.js';

export type { ChangedUserRecord, KeyInfo, UserRecord, SigningParams };

/** The codes the server puts in `errors[].code` of the envelope (docs/protocol.md#errors). */
export type ServerErrorCode = MerchantApiErrorCode;

/**
 * Codes the client gives `/validatesignature` answers, whose bodies carry a
 * message but no code; derived from the status and the documented message
 * (docs/protocol.md#validating-a-signature).
 */
export type SignatureErrorCode =
  | 'missing_parameter'
  | 'invalid_parameter'
  | 'unknown_merchant'
  | 'merchant_disabled'
  | 'insufficient_scope'
  | 'address_not_allowed'
  | 'signature_mismatch'
  | 'invalid_timestamp'
  | 'timestamp_out_of_window'
  | 'salt_reused'
  | 'malformed_request';

/**
 * The client's own codes: `invalid_response` for an answer that is not the
 * documented JSON (a proxy's HTML page, a cut document); `redirected` for a
 * 3xx, which the client does not follow (a signature covers the URL called).
 */
export type ClientErrorCode = 'invalid_response' | 'redirected';

/** Every code `MerchantResponseError.code` can hold, known today; a newer server may send others. */
export type ErrorCode = ServerErrorCode | SignatureErrorCode | ClientErrorCode;

/** One problem as the envelope lists it. */
export interface ErrorDetail {
  code: ServerErrorCode;
  message: string;
  /** The parameter concerned, as it was sent. */
  param?: string;
}

/** What `/validatesignature` answers when the signature is valid: `{"status":"ok","is_valid":true}`. */
export interface SignatureResult {
  status: 'ok';
  is_valid: true;
}

/** What `/validatesignature` answers otherwise (the body of the `MerchantResponseError`); the unknown merchant's 404 has no message. */
export interface SignatureErrorBody {
  status: 'error';
  message?: string;
  is_valid: false;
}

/** One page of `GET /merchant/users` (with `limit` or `cursor`); records carry `updated_at` in `order=updated_at`. */
export interface UserPageBody {
  status: 'ok';
  data: (UserRecord | ChangedUserRecord)[];
  /** The cursor of the next page, or null on the last one. */
  next_cursor: string | null;
  errors: unknown[];
}

/** The whole list, or `GET /merchant/users/{shared_user_id}` (`data` holds the one record). */
export interface UserListBody {
  status: 'ok';
  data: (UserRecord | ChangedUserRecord)[];
  errors: unknown[];
}

/** The error envelope of every path but `/validatesignature` (the body of the `MerchantResponseError`). */
export interface ErrorEnvelope {
  status: 'error';
  data: unknown[];
  errors: ErrorDetail[];
}

/**
 * The query of `GET /merchant/users` as sent on the wire
 * (docs/protocol.md#pagination-and-cursors and #filters).
 */
export interface UsersQuery {
  limit?: number;
  cursor?: string;
  active?: 'true' | 'false';
  joined_after?: string;
  joined_before?: string;
  updated_since?: string;
  order?: UserOrder;
  include_removed?: 'true' | 'false';
}

/** A share removed from the merchant, in the change feed (docs/protocol.md#removals): drop the record held under its id. */
export interface RemovedUser {
  shared_user_id: string;
  /** When the share was removed: canonical, like `updated_at`. */
  removed_at: string;
}

/** One entry of the change feed: a record (with `updated_at`) or a tombstone (with `removed_at`). */
export type ChangeEntry = ChangedUserRecord | RemovedUser;

/** Options of `changes()`. */
export interface ChangesOptions {
  /** Changes and removals at or after this time (inclusive); absent, every user (a fresh copy). */
  updatedSince?: Timestamp;
  /** Entries per request, 1 to 1000 (default 1000). */
  pageSize?: number;
  /** Stops the iteration: the request in flight is aborted. */
  signal?: AbortSignal;
}

/** The orders of the user list (docs/protocol.md#pagination-and-cursors). */
export type UserOrder = 'shared_user_id' | 'date_joined' | 'updated_at';

/** A timestamp filter: an ISO 8601 / RFC 3339 string as docs/protocol.md#filters accepts, or a `Date`. */
export type Timestamp = string | Date;

/** The filters of the user list (docs/protocol.md#filters). They combine. */
export interface UserFilters {
  /** true: users with `deactivated_at` null; false: deactivated users. */
  active?: boolean;
  /** Users who joined strictly after this time. */
  joinedAfter?: Timestamp;
  /** Users who joined strictly before this time. */
  joinedBefore?: Timestamp;
  /**
   * Users whose record or share changed at or after this time (inclusive); lists in
   * `order: 'updated_at'` (docs/protocol.md#changed-since).
   */
  updatedSince?: Timestamp;
  /**
   * `shared_user_id` (the default), `date_joined` (oldest first) or `updated_at` (least recently
   * changed first; each record then carries `updated_at`: a `ChangedUserRecord`).
   */
  order?: UserOrder;
}

/** Options of `users()`: the filters and the page size of the requests made. */
export interface UsersOptions extends UserFilters {
  /** Users per request, 1 to 1000 (default 1000). */
  pageSize?: number;
  /** Stops the iteration: the request in flight is aborted. */
  signal?: AbortSignal;
}

/** Options of `userPages()`. */
export interface UserPagesOptions extends UsersOptions {
  /**
   * Resume after a page: the `nextCursor` of the last page you have. Pass the
   * same filters as for the first page. Without `pageSize`, the page size stays
   * what it was.
   */
  cursor?: string;
}

/** One page of the user list. */
export interface UserPage {
  users: UserRecord[];
  /** The cursor of the next page, or null on the last page. */
  nextCursor: string | null;
}

/** Options of `exportUsers()`. */
export interface ExportOptions extends UserFilters {
  /** Stops the export: the streamed response is aborted. */
  signal?: AbortSignal;
}

/** Options of `validateSignature()`. */
export interface ValidateSignatureOptions {
  /** Further query parameters; the signature covers them too. */
  params?: SigningParams;
  signal?: AbortSignal;
}

/** Options of `user()`. */
export interface RequestOptions {
  signal?: AbortSignal;
}

/**
 * The options of a POST (docs/protocol.md#safe-retries): `idempotencyKey`, sent as `Idempotency-Key`
 * on every attempt of the call (default: a new random UUID per call). Pass your own to make a call
 * your process repeats after a crash safe too: the same key and body within 24 hours answer the first
 * call's answer.
 */
export interface ChangeOptions extends RequestOptions {
  idempotencyKey?: string;
}

/** How the client retries (see `MerchantClientOptions.retries`). */
export interface RetryOptions {
  /** Retries after the first attempt (default 3); 0 never retries. */
  maxRetries?: number;
  /** First backoff in ms, doubled on each retry, with full jitter (default 250). */
  baseDelayMs?: number;
  /** Longest backoff in ms, and the longest `Retry-After` honoured by waiting (default 10,000). */
  maxDelayMs?: number;
  /** Total time in ms for all attempts and waits of one call (default 60,000). */
  deadlineMs?: number;
  /** Called before each wait: for logs and metrics. */
  onRetry?: (info: RetryInfo) => void;
}

/** What `onRetry` learns about a retry. */
export interface RetryInfo {
  /** The retry about to be made: 1 for the first. */
  retry: number;
  /** Milliseconds the client waits before it. */
  delayMs: number;
  method: string;
  /** The URL of the failed attempt, without a signature or credentials. */
  url: string;
  /** The status that caused it (503, 429), or undefined for a connection failure. */
  status?: number;
  /** The error that caused it. */
  error: Error;
}

/** Options of `createMerchantClient`. */
export interface MerchantClientOptions {
  /** Where the API is, with its base path if it is mounted under one: `https://api.example.com/merchant-api`. */
  baseUrl: string | URL;
  merchantId: string;
  apiKey: string;
  /** The `fetch` to use (default the global one): for proxies, instrumentation and tests. */
  fetch?: typeof fetch;
  /**
   * Milliseconds one request may wait for the answer's headers, and then for
   * each further piece of its body (default 30,000). A streamed export may
   * take longer in total as long as data keeps coming.
   */
  timeoutMs?: number;
  /** Retry policy; a number is `maxRetries`; false or 0 never retries (default: 3 retries within 60 s). */
  retries?: number | false | RetryOptions;
  /** The `User-Agent` header (default `merchant-api-client`). */
  userAgent?: string;
  /** Aborts every request of this client. */
  signal?: AbortSignal;
  /** The clock for the `ts` of signatures, in ms (default `Date.now`): for tests, or to correct a known offset. */
  now?: () => number;
  /** Makes the salt of each signature (default 16 random bytes as hex): for tests; must differ every time. */
  salt?: () => string;
}
