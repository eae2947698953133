/**
 * The one renderer of errors: every error body, in the JSON shape of its
 * endpoint (docs/protocol.md#errors), and every header an error answers with
 * (`Retry-After`, the RateLimit fields, `Allow`, `WWW-Authenticate`), from
 * the data the error carries. The pipeline and the adapters' own early
 * answers (400, 408, 417, 431) both come here.
 *
 * Every string of an error body goes through `errorText`: a message or a
 * `param` may quote what a client sent, and JSON lets C1 controls (and DEL)
 * through raw, which terminals and log viewers obey. So the body never holds
 * a control character raw, and no field is longer than `MAX_ERROR_TEXT`.
 */
import { MerchantApiError, type ErrorDetail, type RateLimitPolicy } from '../errors.js';
import { toResponse, type ErrorShape, type Reply } from './responses.js';

/** The most UTF-16 units of any string field of an error body (a cut one ends with `…`). */
export const MAX_ERROR_TEXT = 512;

/** What JSON.stringify leaves raw but a terminal or a script reads as a control: DEL, C1, and the JavaScript line separators. */
const RAW_CONTROLS = /[\u007f-\u009f\u2028\u2029]/g;
const escapeControl = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * A string field of an error body as JSON text: cut to `MAX_ERROR_TEXT`
 * units (never inside a surrogate pair) and quoted with every C0, DEL and C1
 * control escaped (`\u0085`), so it reads back as the text it was, minus
 * what was cut.
 */
export function errorText(text: string): string {
  let bounded = text;
  if (text.length > MAX_ERROR_TEXT) {
    let end = MAX_ERROR_TEXT - 1;
    const last = text.charCodeAt(end - 1);
    if (last >= 0xd800 && last <= 0xdbff) end--;
    bounded = `${text.slice(0, end)}…`;
  }
  return JSON.stringify(bounded).replace(RAW_CONTROLS, escapeControl);
}

/** The validatesignature body for an error; `message` absent for the 404. */
export function signatureError(message: string | undefined): string {
  return message === undefined ? '{"status":"error","is_valid":false}' : `{"status":"error","message":${errorText(message)},"is_valid":false}`;
}

/** The envelope with `status` "error" and the problems listed. */
export function envelopeError(details: readonly ErrorDetail[]): string {
  let errors = '';
  for (const { code, message, param } of details) {
    errors += `${errors === '' ? '' : ','}{"code":${errorText(code)},"message":${errorText(message)}${param === undefined ? '' : `,"param":${errorText(param)}`}}`;
  }
  return `{"status":"error","data":[],"errors":[${errors}]}`;
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
  const details = isUnavailable(e) ? STORAGE_UNAVAILABLE_DETAILS : e.details;
  const body = shape === 'signature' ? signatureError(details.map((d) => d.message).join(' ')) : envelopeError(details);
  return { status: e.status, body, headers: errorHeaders(e) };
}

/**
 * A 503: whatever its code says, it answers the generic message with
 * `Retry-After` (1 second unless it carries its own). Its own message is
 * for operators (a storage's names its backend and the driver's code).
 */
export function isUnavailable(e: MerchantApiError): boolean {
  return e.status === 503 || e.code === 'storage_unavailable';
}

/** The headers of an error's answer, from what it carries. */
export function errorHeaders(e: MerchantApiError): Record<string, string> {
  const headers: Record<string, string> = {};
  const retryAfter = e.retryAfter ?? (isUnavailable(e) ? 1 : undefined);
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
  const unit = policy.unit === undefined ? '' : `;qu="${policy.unit}"`;
  return {
    'ratelimit-policy': `"${policy.name}";q=${policy.quota}${window}${unit}`,
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
