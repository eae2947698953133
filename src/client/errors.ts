/**
 * The errors of `merchant-api/client`. They are the client's own classes, not
 * the server's `MerchantApiError` of `merchant-api`: that one describes an
 * answer about to be written (its status follows from its code), while these
 * describe an answer received (status, request id, parsed body, headers) or
 * no answer at all. Keeping them apart keeps the client free of server code
 * and lets either side change without breaking the other; naming them apart
 * keeps an editor's auto-import from offering the server's class here.
 *
 *     MerchantClientError            every error the client throws itself
 *     ├─ MerchantResponseError       the server answered with an error status, or with an unreadable body
 *     ├─ MerchantNetworkError        no answer: refused, reset, DNS, TLS, or a body cut off
 *     └─ MerchantTimeoutError        no answer in time: timeoutMs, or the call's total deadline
 *
 * An abort through a caller's `signal` rejects with the signal's reason, as
 * `fetch` does, not with one of these.
 */
import type { ErrorCode, ErrorDetail } from './types.js';

/** The base class of every error the client throws itself. */
export class MerchantClientError extends Error {
  override name = 'MerchantClientError';
  /** The method and URL of the request (never a signature or credentials). */
  readonly method: string;
  readonly url: string;

  constructor(message: string, request: { method: string; url: string }, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.method = request.method;
    this.url = request.url;
  }
}

/**
 * The server answered, and the answer is an error: a 4xx or 5xx status, or a
 * 2xx whose body is not the documented JSON (`code` 'invalid_response').
 *
 * @example
 * try { await client.user('nobody'); }
 * catch (error) { if (error instanceof MerchantResponseError && error.status === 404) { ... } }
 */
export class MerchantResponseError extends MerchantClientError {
  override name = 'MerchantResponseError';
  /** The HTTP status. */
  readonly status: number;
  /**
   * The server's error code: `errors[0].code` of the envelope; for
   * `/validatesignature`, whose bodies have none, a code derived from the
   * status and the message (`signature_mismatch`, `timestamp_out_of_window`, …).
   */
  readonly code: ErrorCode | (string & {});
  /** The answer's `X-Request-Id`: quote it when you ask the operator about a request. */
  readonly requestId: string | undefined;
  /**
   * The parsed body: an `ErrorEnvelope`, or a `SignatureErrorBody` from
   * `/validatesignature`; its text when it is not JSON (undefined when empty).
   */
  readonly body: unknown;
  /** Every problem the envelope lists (one per bad parameter); empty for `/validatesignature`. */
  readonly details: readonly ErrorDetail[];
  /** The answer's headers (`Retry-After`, `Date`, `WWW-Authenticate`, …). */
  readonly headers: Headers;
  /** Seconds the server asked to wait (`Retry-After`), when it said. */
  readonly retryAfter: number | undefined;

  constructor(
    init: { status: number; code: string; message: string; requestId?: string; body?: unknown; details?: readonly ErrorDetail[]; headers?: Headers; retryAfter?: number },
    request: { method: string; url: string },
    options?: { cause?: unknown },
  ) {
    super(init.message, request, options);
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.body = init.body;
    this.details = init.details ?? [];
    this.headers = init.headers ?? new Headers();
    this.retryAfter = init.retryAfter;
  }
}

/** What went wrong on the way, as far as the runtime tells. */
export type NetworkErrorKind =
  /** Nothing listens there (ECONNREFUSED). */
  | 'refused'
  /** The host name does not resolve. */
  | 'dns'
  /** The TLS handshake failed: an untrusted or mismatched certificate, or TLS spoken to a plain HTTP port. */
  | 'tls'
  /** The connection broke: reset, closed early, or the body was cut before its end. */
  | 'connection'
  /** Anything else the runtime's fetch rejected with. */
  | 'other';

/** No answer: the connection could not be made or broke. `cause` is the runtime's own error. */
export class MerchantNetworkError extends MerchantClientError {
  override name = 'MerchantNetworkError';
  readonly kind: NetworkErrorKind;
  /** The runtime's error code when it gave one (ECONNREFUSED, ENOTFOUND, DEPTH_ZERO_SELF_SIGNED_CERT, …). */
  readonly errorCode: string | undefined;

  constructor(message: string, request: { method: string; url: string }, init: { kind: NetworkErrorKind; errorCode?: string; cause?: unknown }) {
    super(message, request, { cause: init.cause });
    this.kind = init.kind;
    this.errorCode = init.errorCode;
  }
}

/** No answer in time: `timeoutMs` passed waiting for headers or for the next piece of the body, or the call's deadline passed. */
export class MerchantTimeoutError extends MerchantClientError {
  override name = 'MerchantTimeoutError';
  /** 'request': one request exceeded `timeoutMs`; 'deadline': the call's retries exceeded `deadlineMs`. */
  readonly kind: 'request' | 'deadline';
  readonly timeoutMs: number;

  constructor(request: { method: string; url: string }, init: { kind: 'request' | 'deadline'; timeoutMs: number }) {
    super(
      init.kind === 'request'
        ? `No answer from ${request.url} within ${init.timeoutMs} ms.`
        : `${request.method} ${request.url} did not succeed within its deadline of ${init.timeoutMs} ms.`,
      request,
    );
    this.kind = init.kind;
    this.timeoutMs = init.timeoutMs;
  }
}

/**
 * Classifies what a runtime's fetch rejected with. Node (undici) puts the
 * system error in `cause`, Bun sets `code` on the error itself, and Deno
 * only says it in the message, so all three are read.
 */
export function networkError(error: unknown, request: { method: string; url: string }): MerchantNetworkError {
  const codes: string[] = [];
  const texts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    const e = current as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
    if (typeof e.code === 'string') codes.push(e.code);
    if (typeof e.message === 'string') texts.push(e.message);
    // undici reports an address family failure as an AggregateError of both attempts.
    if (Array.isArray(e.errors) && e.errors[0]) current = e.errors[0];
    else current = e.cause;
  }
  const code = codes.find((c) => c !== 'UND_ERR_SOCKET') ?? codes[0];
  const text = `${codes.join(' ')} ${texts.join(' ')}`;
  let kind: NetworkErrorKind = 'other';
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL|\bTLS\b|SSL|certificate|handshake|wrong version number|UnknownIssuer|InvalidCertificate|NotValidForName/i.test(text)) kind = 'tls';
  else if (/ECONNREFUSED|ConnectionRefused|connection refused/i.test(text)) kind = 'refused';
  else if (/ENOTFOUND|EAI_AGAIN|EAI_NONAME|getaddrinfo|dns error|failed to lookup|DNS|name resolution/i.test(text)) kind = 'dns';
  else if (/ECONNRESET|EPIPE|ConnectionReset|ConnectionClosed|socket|terminated|closed|reset|broken pipe|other side closed|UND_ERR|unexpected end|connection/i.test(text)) kind = 'connection';
  const detail = readable(texts.filter((t) => t && t !== 'fetch failed').at(-1) ?? texts[0] ?? String(error));
  return new MerchantNetworkError(`${request.method} ${request.url} failed: ${detail}${code && !detail.includes(code) ? ` (${code})` : ''}`, request, { kind, errorCode: code, cause: error });
}

/**
 * One line of a runtime's message: OpenSSL's `…:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:…`
 * becomes its reason, and a URL's query (Deno quotes the signed URL) is left out.
 */
function readable(message: string): string {
  const openssl = /error:[0-9A-F]+:[^:]*:[^:]*:([^:\n]+)/.exec(message);
  const text = openssl ? openssl[1]! : message;
  return text.replace(/(https?:\/\/[^\s?)]*)\?[^\s)]*/g, '$1').replace(/\s+/g, ' ').trim();
}
