/**
 * An answer that is not a success, decoded into a `MerchantResponseError`: the
 * envelope's `errors` (docs/protocol.md#errors), the message of a
 * `/validatesignature` answer with a code derived from it, a redirect, or a
 * page that is not the Merchant API's JSON at all.
 */
import { readText, type Attempt, type Target } from './attempt.js';
import { MerchantResponseError } from './errors.js';
import type { RetryPolicy } from './retry.js';
import type { ErrorDetail, ErrorEnvelope, SignatureErrorBody, SignatureErrorCode } from './types.js';

/** The `MerchantResponseError` of an answer that is not a success. */
export async function errorOf(response: Response, attempt: Attempt, target: Target, policy: RetryPolicy, timeoutMs: number): Promise<MerchantResponseError> {
  const requestId = requestIdOf(response);
  const retryAfterHeader = response.headers.get('retry-after');
  const retryAfter = retryAfterHeader !== null && /^\s*\d+\s*$/.test(retryAfterHeader) ? Number(retryAfterHeader) : undefined;
  const common = { status: response.status, requestId, headers: response.headers, retryAfter };
  if (response.status >= 300 && response.status < 400) {
    await response.body?.cancel().catch(() => undefined);
    const location = response.headers.get('location');
    return new MerchantResponseError(
      { ...common, code: 'redirected', message: `${target.url} redirects (${response.status}) to ${location ?? 'another URL'}; use the URL the API answers at as baseUrl.` },
      target,
    );
  }
  const text = await readText(response, attempt, target, policy, timeoutMs);
  let body: unknown = text === '' ? undefined : text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON: a proxy's or another server's page.
  }
  const shaped = body as Partial<ErrorEnvelope & SignatureErrorBody> | undefined;
  if (shaped && typeof shaped === 'object' && Array.isArray(shaped.errors) && shaped.errors.length > 0) {
    const details = shaped.errors as ErrorDetail[];
    return new MerchantResponseError({ ...common, body, details, code: String(details[0]!.code), message: details.map((d) => d.message).join(' ') }, target);
  }
  if (shaped && typeof shaped === 'object' && shaped.status === 'error' && 'is_valid' in shaped) {
    const message = typeof shaped.message === 'string' ? shaped.message : undefined;
    const code = signatureCode(response.status, message);
    return new MerchantResponseError({ ...common, body, code, message: message ?? (code === 'unknown_merchant' ? 'No merchant has this id.' : `${response.status} ${response.statusText}`.trim()) }, target);
  }
  const type = response.headers.get('content-type') ?? 'no content type';
  return new MerchantResponseError(
    { ...common, body, code: 'invalid_response', message: `${target.url} answered ${response.status} ${response.statusText} (${type}), not the Merchant API's JSON: check baseUrl.`.replace('  ', ' ') },
    target,
  );
}

/** A stable code for an answer of `/validatesignature`, whose bodies have a message but no code. */
export function signatureCode(status: number, message: string | undefined): SignatureErrorCode | ErrorDetail['code'] {
  const text = message ?? '';
  if (status === 404 && message === undefined) return 'unknown_merchant';
  if (status === 403 && text.startsWith('Test mode is turned off')) return 'test_mode_disabled';
  if (status === 403) return text.startsWith('This API key lacks the scope') ? 'insufficient_scope' : text.startsWith('This API key may not be used from this address') ? 'address_not_allowed' : 'merchant_disabled';
  if (status === 429) return 'too_many_requests';
  if (status === 503) return 'storage_unavailable';
  if (status === 414) return 'uri_too_long';
  if (status === 405) return 'method_not_allowed';
  if (status === 408) return 'request_timeout';
  if (status === 431) return 'headers_too_large';
  if (status === 417) return 'expectation_failed';
  if (status === 404) return 'not_found';
  if (status >= 500) return 'internal_error';
  if (text.startsWith('Missing required parameter')) return 'missing_parameter';
  if (text.startsWith('Signature does not match')) return 'signature_mismatch';
  if (text.startsWith('Invalid timestamp: ts is outside')) return 'timestamp_out_of_window';
  if (text.startsWith('Invalid timestamp')) return 'invalid_timestamp';
  if (text.startsWith('This salt was already used')) return 'salt_reused';
  if (text.startsWith('Parameter given more than once') || text.startsWith('Invalid parameter')) return 'invalid_parameter';
  return 'malformed_request';
}

export function requestIdOf(response: Response): string | undefined {
  return response.headers.get('x-request-id') ?? undefined;
}
