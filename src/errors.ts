/**
 * The errors the handler answers with: every error code is a `MerchantApiError`
 * (a storage that fails throws a `StorageUnavailableError`), and
 * `src/http/error-reply.ts` turns it into the documented JSON shape of the
 * endpoint that raised it, and its headers, in one place; anything else thrown
 * is answered as `internal_error`. The errors of setting up (bad options, a
 * seed, a master key, an import) are not these: they never reach a client.
 */

/** Every error code the handler can answer with (docs/protocol.md#errors). */
export type MerchantApiErrorCode =
  | 'not_found'
  | 'method_not_allowed'
  | 'unauthorized'
  | 'merchant_disabled'
  | 'insufficient_scope'
  | 'address_not_allowed'
  | 'test_mode_disabled'
  | 'test_key_required'
  | 'unknown_parameter'
  | 'invalid_parameter'
  | 'invalid_cursor'
  | 'gone'
  | 'malformed_request'
  | 'uri_too_long'
  | 'request_timeout'
  | 'headers_too_large'
  | 'expectation_failed'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'conflict'
  | 'idempotency_in_progress'
  | 'idempotency_mismatch'
  | 'not_implemented'
  | 'storage_unavailable'
  | 'too_many_requests'
  | 'internal_error';

const statusByCode: Record<MerchantApiErrorCode, number> = {
  not_found: 404,
  method_not_allowed: 405,
  unauthorized: 401,
  merchant_disabled: 403,
  insufficient_scope: 403,
  address_not_allowed: 403,
  test_mode_disabled: 403,
  test_key_required: 403,
  unknown_parameter: 400,
  invalid_parameter: 400,
  invalid_cursor: 400,
  gone: 410,
  malformed_request: 400,
  uri_too_long: 414,
  request_timeout: 408,
  headers_too_large: 431,
  expectation_failed: 417,
  payload_too_large: 413,
  unsupported_media_type: 415,
  conflict: 409,
  idempotency_in_progress: 409,
  idempotency_mismatch: 422,
  not_implemented: 501,
  storage_unavailable: 503,
  too_many_requests: 429,
  internal_error: 500,
};

/** One problem as the envelope lists it: `{code, message, param?}`. */
export interface ErrorDetail {
  code: MerchantApiErrorCode;
  message: string;
  param?: string;
}

/**
 * The limit a refusal passed, for the IETF `RateLimit-Policy` and `RateLimit`
 * fields (draft-ietf-httpapi-ratelimit-headers): its name, its quota, and
 * its window in seconds when it has one (a count held at once has none).
 */
export interface RateLimitPolicy {
  name: string;
  quota: number;
  window?: number;
  /** The draft's quota unit (`qu`), when it is not requests per window: listing slots count requests at once. */
  unit?: 'concurrent-requests';
}

/** What a `MerchantApiError` may carry besides its code and message. */
export interface MerchantApiErrorOptions {
  param?: string;
  cause?: unknown;
  details?: ErrorDetail[];
  status?: number;
  /** Seconds the client should wait before trying again (`Retry-After`). */
  retryAfter?: number;
  /** The limit that was passed (with `retryAfter`: a 429's RateLimit fields). */
  policy?: RateLimitPolicy;
  /** The methods the path answers, for a 405's `Allow`. */
  allow?: string;
}

/**
 * An error with a `code` callers can `switch` on, the HTTP status it answers
 * with, and optionally several details (one per bad parameter). It carries
 * data, not headers: `src/http/error-reply.ts` writes every error's body and
 * headers in one place.
 *
 * @example
 * throw new MerchantApiError('invalid_parameter', 'limit must be 1-1000.', { param: 'limit' });
 */
export class MerchantApiError extends Error {
  readonly code: MerchantApiErrorCode;
  readonly status: number;
  readonly details: ErrorDetail[];
  /** Seconds to wait before trying again, answered as `Retry-After`. */
  readonly retryAfter: number | undefined;
  /** The limit that was passed, answered as the RateLimit fields. */
  readonly policy: RateLimitPolicy | undefined;
  /** The methods the path answers, for a 405. */
  readonly allow: string | undefined;

  constructor(code: MerchantApiErrorCode, message: string, options: MerchantApiErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'MerchantApiError';
    this.code = code;
    this.status = options.status ?? statusByCode[code];
    const detail: ErrorDetail = { code, message };
    if (options.param !== undefined) detail.param = options.param;
    this.details = options.details ?? [detail];
    this.retryAfter = options.retryAfter;
    this.policy = options.policy;
    this.allow = options.allow;
  }
}

/**
 * What a storage throws when its backend cannot be reached, fails or timed
 * out: a `MerchantApiError` with code `storage_unavailable` (503), so every
 * storage, the memory one included, fails the same way. The message is for
 * operators and never reaches a client, which gets the generic 503 (with the
 * error's own `Retry-After`, if it has one as `retryAfter`, else 1 second).
 *
 * @example
 * throw new StorageUnavailableError('MySQL getMerchant failed (ECONNREFUSED).', { cause });
 */
export class StorageUnavailableError extends MerchantApiError {
  constructor(message = 'Storage unavailable.', options: { cause?: unknown; retryAfter?: number } = {}) {
    super('storage_unavailable', message, options);
    this.name = 'StorageUnavailableError';
  }
}
