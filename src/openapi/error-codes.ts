/**
 * The error codes as the OpenAPI document describes them, and the envelope
 * error narrowed to some of them.
 */
import { MerchantApiError, type MerchantApiErrorCode } from '../errors.js';
import { MAX_QUERY_LENGTH } from '../http/query.js';
import { schemaRef } from './fragments.js';
import type { Json } from './operation.js';

/**
 * Every error code, with what it means. Typed against `MerchantApiErrorCode`
 * (src/errors.ts), so the compiler refuses a code missing here or one that
 * does not exist there; the HTTP status of each is asked of `MerchantApiError`.
 */
export const ERROR_CODES: Record<MerchantApiErrorCode, string> = {
  not_found: 'an unknown path, or a user this merchant cannot see',
  method_not_allowed: 'a method other than GET and HEAD',
  unauthorized: 'missing, malformed or wrong credentials, or an unknown merchant (always the same answer)',
  merchant_disabled: 'a disabled merchant with a valid key',
  insufficient_scope: 'a valid key without the scope the endpoint needs (`users:read` for the users and keys, `webhooks:manage` for `/merchant/webhooks`, `keys:manage` for changing keys), or a key asked to give a scope it lacks itself; the message names the scope',
  address_not_allowed: "a valid key presented from outside its allowlist of networks (counted as a failed authentication)",
  test_mode_disabled: 'a valid test key (`test_…`) on a server whose operator turned test mode off (`TEST_MODE=false`, docs/test-mode.md)',
  test_key_required: 'a live key on the test simulator (`/merchant/test/…`), which changes only test datasets: use a test key (docs/test-mode.md)',
  unknown_parameter: 'a parameter the endpoint does not take, one error per name',
  invalid_parameter: 'a bad or repeated value',
  invalid_cursor: 'a cursor this server did not issue for this merchant and these filters',
  gone: 'a change feed (`include_removed=true`) asked from before removals this server no longer keeps (`REMOVAL_RETENTION`): list everything again',
  malformed_request: 'a request that cannot be read honestly: bad percent-encoding, invalid UTF-8, a NUL, too many parameters, a bad or repeated Host',
  uri_too_long: `a query string longer than ${MAX_QUERY_LENGTH} characters`,
  request_timeout: 'the request did not arrive within the server\'s header or request timeout (the Node adapter)',
  headers_too_large: 'the request line and headers are larger than the runtime accepts (the Node adapter)',
  expectation_failed: 'an `Expect` header other than `100-continue` (answered by the adapters)',
  payload_too_large: 'a JSON request body larger than the endpoint accepts (`/merchant/webhooks`: 16 KiB)',
  unsupported_media_type: 'a request body whose `Content-Type` is not `application/json`',
  conflict: 'a change the current state refuses: the most webhook endpoints a merchant may have, or a test sent to a disabled endpoint',
  idempotency_in_progress: 'a request with this `Idempotency-Key` is still running (its answer comes to a retry after `Retry-After` seconds)',
  idempotency_mismatch: 'this `Idempotency-Key` was used within 24 hours for another request (another method, path or body)',
  not_implemented: 'an operation the storage behind this server does not have (webhooks, idempotency keys, on a storage of its own without them)',
  storage_unavailable: 'the storage failed or missed its deadline',
  too_many_requests:
    'refused by a limit: too many failed authentications, too many listings of one merchant at once, more than its share of a busy instance or of the ' +
    "storage's connections, half of the memory storage's replay store, or (the Node adapter) too many connections",
  internal_error: 'an unexpected failure (a bug); the answer says nothing about it',
};

export const ALL_CODES = Object.keys(ERROR_CODES) as MerchantApiErrorCode[];

/** The HTTP status of `code` (src/errors.ts decides, not this file). */
export function statusOf(code: MerchantApiErrorCode): number {
  return new MerchantApiError(code, '').status;
}

/** The codes answered with `status`. */
export function codesWithStatus(status: number): MerchantApiErrorCode[] {
  return ALL_CODES.filter((code) => statusOf(code) === status);
}

/** The envelope error with its codes narrowed to `codes` (all of them: the plain envelope). */
export function envelopeError(codes: readonly MerchantApiErrorCode[]): Json {
  if (codes.length === ALL_CODES.length) return schemaRef('ErrorEnvelope');
  return {
    allOf: [schemaRef('ErrorEnvelope')],
    type: 'object',
    properties: { errors: { type: 'array', items: { type: 'object', properties: { code: { type: 'string', enum: [...codes] } } } } },
  };
}
