/**
 * `createMerchantClient`: a typed client of the Merchant API for merchants
 * (docs/client.md). It signs `/validatesignature` with `merchant-api/signing`
 * (a fresh `ts` and salt on every attempt), authenticates the user endpoints
 * with HTTP Basic, follows cursors, streams the whole list through an
 * incremental parser, and retries what may be retried (./retry.ts).
 *
 * Web APIs only (fetch, streams, TextDecoder, AbortController, btoa), plus
 * `node:crypto` through src/signing/index.ts for HMAC-SHA224, which Web Crypto
 * lacks and Node, Bun and Deno all implement.
 */
import { pct, signUrl } from '../signing/index.js';
import { toPairs } from '../signing/params.js';
import { MerchantApiError, MerchantClientError, MerchantTimeoutError, networkError } from './errors.js';
import { JsonEnvelopeParser, JsonStreamError } from './json-stream.js';
import { backoffMs, isRetryableStatus, retryAfterMs, retryPolicy, sleep, type RetryPolicy } from './retry.js';
import type {
  ErrorDetail,
  ExportOptions,
  MerchantClientOptions,
  RequestOptions,
  ErrorEnvelope,
  SignatureErrorBody,
  SignatureErrorCode,
  SignatureResult,
  SigningParams,
  UserFilters,
  UserPage,
  UserPagesOptions,
  UserListBody,
  UserPageBody,
  UserRecord,
  UsersOptions,
  UsersQuery,
  ValidateSignatureOptions,
} from './types.js';

/** A client for one merchant. Every method is an idempotent read. */
export interface MerchantClient {
  /** The base URL requests go to, without a trailing slash. */
  readonly baseUrl: string;
  readonly merchantId: string;
  /**
   * Signs and sends `GET /validatesignature`: resolves to `{status:'ok', is_valid:true}`
   * when the key and the signing are right, else throws `MerchantApiError`
   * (`code` tells why: `signature_mismatch`, `timestamp_out_of_window`, `unknown_merchant`, …).
   */
  validateSignature(options?: ValidateSignatureOptions): Promise<SignatureResult>;
  /** One user as shared with this merchant; `MerchantApiError` with status 404 when there is none. */
  user(sharedUserId: string, options?: RequestOptions): Promise<UserRecord>;
  /** Every user matching the filters, page after page as the iteration needs them. */
  users(options?: UsersOptions): AsyncIterableIterator<UserRecord>;
  /** The pages themselves, each with its `nextCursor`, to resume later with `userPages({ cursor })`. */
  userPages(options?: UserPagesOptions): AsyncIterableIterator<UserPage>;
  /** Every user in one streamed request, parsed as it arrives: memory stays flat however many there are. */
  exportUsers(options?: ExportOptions): AsyncIterableIterator<UserRecord>;
}

/** The largest `limit` the server takes, and the page size of `users()` and `userPages()` by default. */
export const MAX_PAGE_SIZE = 1000;
const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * @example
 * const client = createMerchantClient({ baseUrl: 'http://127.0.0.1:8787', merchantId: 'demo-merchant', apiKey: 'demo-secret' });
 * await client.validateSignature(); // { status: 'ok', is_valid: true }
 * for await (const user of client.users({ active: true })) console.log(user.shared_user_id);
 */
export function createMerchantClient(options: MerchantClientOptions): MerchantClient {
  return new Client(options);
}

interface Target {
  method: string;
  /** What errors and `onRetry` show: no signature, no credentials. */
  url: string;
}

/** One attempt's abort controller, timeout and listeners. */
class Attempt {
  readonly controller = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timedOutAs: 'request' | 'deadline' | undefined;
  private readonly cleanups: (() => void)[] = [];

  constructor(
    private readonly external: readonly AbortSignal[],
    private readonly timeoutMs: number,
    private readonly deadline: number,
  ) {
    for (const signal of external) {
      if (signal.aborted) {
        this.controller.abort(signal.reason);
        break;
      }
      const onAbort = () => this.controller.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      this.cleanups.push(() => signal.removeEventListener('abort', onAbort));
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Starts the clock: `timeoutMs`, or what is left of the deadline if that is sooner. */
  arm(): void {
    this.disarm();
    const left = this.deadline - Date.now();
    const kind = left < this.timeoutMs ? 'deadline' : 'request';
    this.timer = setTimeout(() => {
      this.timedOutAs = kind;
      this.controller.abort(new Error('timeout'));
    }, Math.max(0, Math.min(left, this.timeoutMs)));
  }

  disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  finish(): void {
    this.disarm();
    for (const cleanup of this.cleanups.splice(0)) cleanup();
  }

  /** The caller's abort reason, when a caller's signal ended the attempt. */
  callerAbort(): { reason: unknown } | undefined {
    const aborted = this.external.find((signal) => signal.aborted);
    return aborted && this.timedOutAs === undefined ? { reason: aborted.reason } : undefined;
  }

  /** Turns whatever a fetch or a body read threw into the client's error (or the caller's abort reason). */
  failure(error: unknown, target: Target, policy: RetryPolicy, timeoutMs: number): unknown {
    const caller = this.callerAbort();
    if (caller) return caller.reason;
    if (this.timedOutAs) return new MerchantTimeoutError(target, this.timedOutAs === 'request' ? { kind: 'request', timeoutMs } : { kind: 'deadline', timeoutMs: policy.deadlineMs });
    if (error instanceof MerchantClientError) return error;
    return networkError(error, target);
  }
}

class Client implements MerchantClient {
  readonly baseUrl: string;
  readonly merchantId: string;
  private readonly apiKey: string;
  private readonly fetchImpl: typeof fetch;
  private readonly timeoutMs: number;
  private readonly policy: RetryPolicy;
  private readonly headers: Record<string, string>;
  private readonly signal: AbortSignal | undefined;
  private readonly now: (() => number) | undefined;
  private readonly salt: (() => string) | undefined;

  constructor(options: MerchantClientOptions) {
    if (!options || typeof options !== 'object') throw new TypeError('createMerchantClient needs { baseUrl, merchantId, apiKey }.');
    this.baseUrl = normaliseBaseUrl(options.baseUrl);
    for (const name of ['merchantId', 'apiKey'] as const) {
      if (typeof options[name] !== 'string' || options[name] === '') throw new TypeError(`createMerchantClient: ${name} must be a non-empty string.`);
    }
    this.merchantId = options.merchantId;
    this.apiKey = options.apiKey;
    const fetchImpl = options.fetch ?? globalThis.fetch;
    if (typeof fetchImpl !== 'function') throw new TypeError('createMerchantClient: no fetch in this runtime; pass options.fetch.');
    // Called unbound, some runtimes' fetch refuses to run ("Illegal invocation").
    this.fetchImpl = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(this.timeoutMs > 0) || !Number.isFinite(this.timeoutMs)) throw new RangeError(`createMerchantClient: timeoutMs must be a positive number (got ${String(options.timeoutMs)}).`);
    this.policy = retryPolicy(options.retries);
    this.signal = options.signal;
    this.now = options.now;
    this.salt = options.salt;
    this.headers = { accept: 'application/json', 'user-agent': options.userAgent ?? 'merchant-api-client' };
  }

  async validateSignature(options: ValidateSignatureOptions = {}): Promise<SignatureResult> {
    const url = `${this.baseUrl}/validatesignature`;
    const extra = options.params === undefined ? [] : [...toPairs(options.params)];
    const target = { method: 'GET', url };
    // A new ts and salt for every attempt: the server refuses a salt it has seen.
    const signed = () => signUrl(this.apiKey, url, [['cp', this.merchantId], ...extra], { now: this.now, salt: this.salt?.() });
    return this.call(target, signed, {}, options.signal, (body) => {
      const result = body as SignatureResult;
      if (typeof result !== 'object' || result === null || result.status !== 'ok' || result.is_valid !== true) throw new Error('not {"status":"ok","is_valid":true}');
      return result;
    });
  }

  async user(sharedUserId: string, options: RequestOptions = {}): Promise<UserRecord> {
    if (typeof sharedUserId !== 'string' || sharedUserId === '') throw new TypeError('user(): sharedUserId must be a non-empty string.');
    const url = `${this.baseUrl}/merchant/users/${pct(sharedUserId)}`;
    return this.call({ method: 'GET', url }, () => url, this.basicAuth(), options.signal, (body) => {
      const user = listBody(body).data[0];
      if (!user) throw new Error('no record in "data"');
      return user;
    });
  }

  async *users(options: UsersOptions = {}): AsyncIterableIterator<UserRecord> {
    for await (const page of this.userPages(options)) yield* page.users;
  }

  async *userPages(options: UserPagesOptions = {}): AsyncIterableIterator<UserPage> {
    const filters = filterQuery(options);
    const pageSize = options.pageSize;
    if (pageSize !== undefined && (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE)) {
      throw new RangeError(`pageSize must be a whole number from 1 to ${MAX_PAGE_SIZE} (got ${String(pageSize)}).`);
    }
    if (options.cursor !== undefined && (typeof options.cursor !== 'string' || options.cursor === '')) throw new TypeError('cursor must be the nextCursor of a page.');
    let cursor: string | null | undefined = options.cursor;
    do {
      // Without pageSize, a cursor keeps the page size of its listing; a first page needs one.
      const limit = pageSize ?? (cursor === undefined ? MAX_PAGE_SIZE : undefined);
      const query: UsersQuery = { ...(limit === undefined ? {} : { limit }), ...filters, ...(cursor === undefined ? {} : { cursor }) };
      const url = `${this.baseUrl}/merchant/users?${queryString(query)}`;
      // Each page is its own call, retried with the same cursor: a retry never restarts the listing or repeats a user.
      const page = await this.call({ method: 'GET', url }, () => url, this.basicAuth(), options.signal, (body) => {
        const answer = listBody(body) as UserPageBody;
        const next = answer.next_cursor;
        if (next !== null && (typeof next !== 'string' || next === '')) throw new Error('no "next_cursor" on a page');
        return { users: answer.data, nextCursor: next };
      });
      yield page;
      cursor = page.nextCursor;
    } while (cursor !== null);
  }

  async *exportUsers(options: ExportOptions = {}): AsyncIterableIterator<UserRecord> {
    const filters = filterQuery(options);
    const search = queryString(filters);
    const url = `${this.baseUrl}/merchant/users${search ? `?${search}` : ''}`;
    const target = { method: 'GET', url };
    const { response, attempt } = await this.send(target, () => url, this.basicAuth(), options.signal);
    const reader = response.body!.getReader();
    const decoder = new TextDecoder('utf-8', { fatal: true });
    const parser = new JsonEnvelopeParser('data');
    let finished = false;
    const read = async () => {
      attempt.arm();
      try {
        return await reader.read();
      } catch (error) {
        throw attempt.failure(error, target, this.policy, this.timeoutMs);
      } finally {
        attempt.disarm();
      }
    };
    const invalid = (error: unknown) => {
      if (error instanceof JsonStreamError && error.truncated) {
        return networkError(new Error(`the streamed list was cut off after ${parser.elements} user(s)`, { cause: error }), target);
      }
      return new MerchantApiError(
        { status: response.status, code: 'invalid_response', message: `The streamed list from ${url} is not the documented JSON: ${(error as Error).message}`, requestId: requestIdOf(response), headers: response.headers },
        target,
        { cause: error },
      );
    };
    try {
      for (;;) {
        const chunk = await read();
        let users: unknown[];
        try {
          users = chunk.done ? [...parser.push(decoder.decode()), ...parser.end()] : parser.push(decoder.decode(chunk.value, { stream: true }));
          if (parser.members.status !== undefined && parser.members.status !== 'ok') throw new JsonStreamError(`status is ${JSON.stringify(parser.members.status)}`);
        } catch (error) {
          throw invalid(error);
        }
        for (const user of users) yield user as UserRecord;
        if (chunk.done) break;
      }
      finished = true;
    } finally {
      attempt.finish();
      // Stopped early (a break, an error): close the connection rather than read the rest.
      if (!finished) await reader.cancel().catch(() => undefined);
    }
  }

  private basicAuth(): Record<string, string> {
    const bytes = new TextEncoder().encode(`${this.merchantId}:${this.apiKey}`);
    let binary = '';
    for (const byte of bytes) binary += String.fromCharCode(byte);
    return { authorization: `Basic ${btoa(binary)}` };
  }

  /** One JSON answer: sent, retried as the policy says, read, and checked by `accept`. */
  private async call<T>(target: Target, url: () => string, headers: Record<string, string>, signal: AbortSignal | undefined, accept: (body: unknown) => T): Promise<T> {
    return this.send(target, url, headers, signal, async (response, attempt) => {
      const text = await readText(response, attempt, target, this.policy, this.timeoutMs);
      let body: unknown;
      try {
        body = JSON.parse(text);
        return accept(body);
      } catch (error) {
        throw new MerchantApiError(
          { status: response.status, code: 'invalid_response', message: `The answer of ${target.url} is not the documented JSON: ${(error as Error).message}`, requestId: requestIdOf(response), body: body ?? text, headers: response.headers },
          target,
          { cause: error },
        );
      }
    });
  }

  /**
   * Sends a request and retries it: on 503 and 429 (after `Retry-After`, else
   * a backoff) and on connection failures, within `maxRetries` and the call's
   * deadline. `url()` is called for each attempt, so a signed URL is signed
   * again. With `consume`, reading the body is part of the attempt (a body cut
   * off is retried too) and its result is returned; without, the response is
   * handed over with its attempt still open, to be streamed.
   */
  private send(target: Target, url: () => string, headers: Record<string, string>, signal: AbortSignal | undefined): Promise<{ response: Response; attempt: Attempt }>;
  private send<T>(target: Target, url: () => string, headers: Record<string, string>, signal: AbortSignal | undefined, consume: (response: Response, attempt: Attempt) => Promise<T>): Promise<T>;
  private async send<T>(
    target: Target,
    url: () => string,
    headers: Record<string, string>,
    signal: AbortSignal | undefined,
    consume?: (response: Response, attempt: Attempt) => Promise<T>,
  ): Promise<T | { response: Response; attempt: Attempt }> {
    const policy = this.policy;
    const deadline = Date.now() + policy.deadlineMs;
    const external = [this.signal, signal].filter((s): s is AbortSignal => s !== undefined);
    for (let retry = 0; ; retry++) {
      // Aborted already: not even a first attempt (a custom fetch may not look at the signal).
      const aborted = external.find((s) => s.aborted);
      if (aborted) throw aborted.reason;
      const attempt = new Attempt(external, this.timeoutMs, deadline);
      let failure: MerchantClientError;
      let retryAfter: number | undefined;
      try {
        attempt.arm();
        let response: Response;
        try {
          response = await this.fetchImpl(url(), { method: target.method, headers: { ...this.headers, ...headers }, signal: attempt.signal, redirect: 'manual' });
        } catch (error) {
          throw attempt.failure(error, target, policy, this.timeoutMs);
        } finally {
          attempt.disarm();
        }
        if (response.ok && response.status !== 204) {
          if (!consume) {
            if (!response.body) throw new MerchantApiError({ status: response.status, code: 'invalid_response', message: `The answer of ${target.url} has no body.`, requestId: requestIdOf(response), headers: response.headers }, target);
            return { response, attempt };
          }
          const result = await consume(response, attempt);
          attempt.finish();
          return result;
        }
        const error = await errorOf(response, attempt, target, policy, this.timeoutMs);
        if (!isRetryableStatus(response.status)) throw error;
        failure = error;
        retryAfter = retryAfterMs(response.headers.get('retry-after'), Date.now());
      } catch (error) {
        attempt.finish();
        if (!(error instanceof MerchantClientError) || !isRetryableFailure(error)) throw error;
        failure = error;
      }
      attempt.finish();
      if (retry >= policy.maxRetries) throw failure;
      const delay = retryAfter ?? backoffMs(policy, retry + 1);
      // A wait longer than maxDelayMs (a Retry-After of minutes), or one that would end past the
      // deadline, is not worth starting: the last answer, with its retryAfter, is the best one to give.
      if (delay > policy.maxDelayMs || Date.now() + delay >= deadline) throw failure;
      policy.onRetry?.({ retry: retry + 1, delayMs: delay, method: target.method, url: target.url, status: failure instanceof MerchantApiError ? failure.status : undefined, error: failure });
      await sleep(delay, external);
    }
  }
}

/** Connection failures are retried; a timeout, TLS and DNS failures, and answers other than 503/429 are not. */
function isRetryableFailure(error: MerchantClientError): boolean {
  if (error instanceof MerchantApiError) return isRetryableStatus(error.status);
  return error.name === 'MerchantNetworkError' && ['refused', 'connection', 'other'].includes((error as { kind?: string }).kind ?? '');
}

/** The body as text; each piece must come within the timeout. */
async function readText(response: Response, attempt: Attempt, target: Target, policy: RetryPolicy, timeoutMs: number): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      attempt.arm();
      const { done, value } = await reader.read();
      if (done) return text + decoder.decode();
      text += decoder.decode(value, { stream: true });
    }
  } catch (error) {
    await reader.cancel().catch(() => undefined);
    throw attempt.failure(error, target, policy, timeoutMs);
  } finally {
    attempt.disarm();
  }
}

/** The `MerchantApiError` of an answer that is not a success. */
async function errorOf(response: Response, attempt: Attempt, target: Target, policy: RetryPolicy, timeoutMs: number): Promise<MerchantApiError> {
  const requestId = requestIdOf(response);
  const retryAfterHeader = response.headers.get('retry-after');
  const retryAfter = retryAfterHeader !== null && /^\s*\d+\s*$/.test(retryAfterHeader) ? Number(retryAfterHeader) : undefined;
  const common = { status: response.status, requestId, headers: response.headers, retryAfter };
  if (response.status >= 300 && response.status < 400) {
    await response.body?.cancel().catch(() => undefined);
    const location = response.headers.get('location');
    return new MerchantApiError(
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
    return new MerchantApiError({ ...common, body, details, code: String(details[0]!.code), message: details.map((d) => d.message).join(' ') }, target);
  }
  if (shaped && typeof shaped === 'object' && shaped.status === 'error' && 'is_valid' in shaped) {
    const message = typeof shaped.message === 'string' ? shaped.message : undefined;
    const code = signatureCode(response.status, message);
    return new MerchantApiError({ ...common, body, code, message: message ?? (code === 'unknown_merchant' ? 'No merchant has this id.' : `${response.status} ${response.statusText}`.trim()) }, target);
  }
  const type = response.headers.get('content-type') ?? 'no content type';
  return new MerchantApiError(
    { ...common, body, code: 'invalid_response', message: `${target.url} answered ${response.status} ${response.statusText} (${type}), not the Merchant API's JSON: check baseUrl.`.replace('  ', ' ') },
    target,
  );
}

/** A stable code for an answer of `/validatesignature`, whose bodies have a message but no code. */
export function signatureCode(status: number, message: string | undefined): SignatureErrorCode | ErrorDetail['code'] {
  const text = message ?? '';
  if (status === 404 && message === undefined) return 'unknown_merchant';
  if (status === 403) return 'merchant_disabled';
  if (status === 429) return 'too_many_requests';
  if (status === 503) return 'storage_unavailable';
  if (status === 414) return 'uri_too_long';
  if (status === 405) return 'method_not_allowed';
  if (status === 408) return 'request_timeout';
  if (status === 431) return 'headers_too_large';
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

function requestIdOf(response: Response): string | undefined {
  return response.headers.get('x-request-id') ?? undefined;
}

function listBody(body: unknown): UserListBody {
  const answer = body as UserListBody;
  if (typeof answer !== 'object' || answer === null || answer.status !== 'ok' || !Array.isArray(answer.data)) throw new Error('not {"status":"ok","data":[…]}');
  return answer;
}

function normaliseBaseUrl(baseUrl: string | URL): string {
  let url: URL;
  try {
    url = new URL(String(baseUrl));
  } catch {
    throw new TypeError(`createMerchantClient: baseUrl "${String(baseUrl)}" is not a URL.`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`createMerchantClient: baseUrl must be http or https (got ${url.protocol}).`);
  if (url.username || url.password) throw new TypeError('createMerchantClient: baseUrl must not contain credentials; pass merchantId and apiKey.');
  if (url.search || url.hash) throw new TypeError('createMerchantClient: baseUrl must not have a query or fragment.');
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

/** The query of the filters (docs/protocol.md#filters). */
function filterQuery(filters: UserFilters): UsersQuery {
  const query: UsersQuery = {};
  if (filters.active !== undefined) {
    if (typeof filters.active !== 'boolean') throw new TypeError('active must be true or false.');
    query.active = filters.active ? 'true' : 'false';
  }
  if (filters.joinedAfter !== undefined) query.joined_after = timestamp(filters.joinedAfter, 'joinedAfter');
  if (filters.joinedBefore !== undefined) query.joined_before = timestamp(filters.joinedBefore, 'joinedBefore');
  return query;
}

function timestamp(value: string | Date, name: string): string {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new RangeError(`${name} is an invalid Date.`);
    return value.toISOString();
  }
  if (typeof value !== 'string' || value === '') throw new TypeError(`${name} must be an ISO 8601 string or a Date.`);
  return value;
}

/** Every parameter encoded with pct, so `+` in an offset is sent as %2B, never read as a space. */
function queryString(query: UsersQuery): string {
  return Object.entries(query)
    .filter(([, value]) => value !== undefined)
    .map(([key, value]) => `${key}=${pct(String(value))}`)
    .join('&');
}

