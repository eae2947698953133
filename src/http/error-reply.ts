/**
 * The one renderer of errors: every error body, in the JSON shape of its
 * endpoint (docs/protocol.md#errors), and every header an error answers with
 * (`Retry-After`, the RateLimit fields, `Allow`, `WWW-Authenticate`), from
 * the data the error carries. The pipeline and the adapters' own early
 * answers (400, 408, 431) both come here.
 */
import { MerchantApiError, type ErrorDetail, type RateLimitPolicy } from '../errors.js';
import { toResponse, type ErrorShape, type Reply } from './responses.js';

/** The validatesignature body for an error; `message` absent for the 404. */
export function signatureError(message: string | undefined): string {
  return message === undefined
    ? '{"status":"error","is_valid":false}'
    : `{"status":"error","message":${JSON.stringify(message)},"is_valid":false}`;
}

/** The envelope with `status` "error" and the problems listed. */
export function envelopeError(details: readonly ErrorDetail[]): string {
  return `{"status":"error","data":[],"errors":${JSON.stringify(details)}}`;
}

const INTERNAL = new MerchantApiError('internal_error', 'Internal server error.');
const STORAGE_UNAVAILABLE_DETAILS: ErrorDetail[] = [{ code: 'storage_unavailable', message: 'The storage is unavailable; try again shortly.' }];

/**
 * Renders any thrown value. A `MerchantApiError` speaks for itself (a
 * storage failure says only that the storage is unavailable); anything else
 * is a bare 500 that says nothing of its internals.
 */
export function errorReply(error: unknown, shape: ErrorShape): Reply {
  const e = error instanceof MerchantApiError ? error : INTERNAL;
  const details = e.code === 'storage_unavailable' ? STORAGE_UNAVAILABLE_DETAILS : e.details;
  const body = shape === 'signature' ? signatureError(details.map((d) => d.message).join(' ')) : envelopeError(details);
  return { status: e.status, body, headers: errorHeaders(e) };
}

/** The headers of an error's answer, from what it carries. */
export function errorHeaders(e: MerchantApiError): Record<string, string> {
  const headers: Record<string, string> = {};
  const retryAfter = e.retryAfter ?? (e.code === 'storage_unavailable' ? 1 : undefined);
  if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
  if (e.policy !== undefined && retryAfter !== undefined) Object.assign(headers, rateLimitFields(e.policy, retryAfter));
  if (e.allow !== undefined) headers.allow = e.allow;
  if (e.code === 'unauthorized') headers['www-authenticate'] = 'Basic realm="merchant", charset="UTF-8"';
  return headers;
}

/**
 * The IETF `RateLimit-Policy` and `RateLimit` fields
 * (draft-ietf-httpapi-ratelimit-headers): which policy was passed, and that
 * nothing is left of it until it resets.
 */
function rateLimitFields(policy: RateLimitPolicy, retryAfter: number): Record<string, string> {
  const window = policy.window === undefined ? '' : `;w=${policy.window}`;
  return {
    'ratelimit-policy': `"${policy.name}";q=${policy.quota}${window}`,
    ratelimit: `"${policy.name}";r=0;t=${retryAfter}`,
  };
}

/**
 * A JSON error `Response` for an answer given outside the handler (an
 * adapter refusing a request its runtime could not represent).
 *
 * @example
 * errorResponse(new MerchantApiError('malformed_request', 'Bad Host header.'))
 */
export function errorResponse(error: unknown, options: { shape?: ErrorShape; head?: boolean } = {}): Response {
  // Headers every answer has; a request id of its own, since no handler saw the request.
  return toResponse(errorReply(error, options.shape ?? 'envelope'), options.head ?? false, { 'x-request-id': crypto.randomUUID(), 'x-content-type-options': 'nosniff' });
}
