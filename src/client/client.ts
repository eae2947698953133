/**
 * `createMerchantClient`: a typed client of the Merchant API for merchants
 * (docs/client.md). It signs `/validatesignature` with `merchant-api/signing`
 * (a fresh `ts` and salt on every attempt), authenticates the user endpoints
 * with HTTP Basic, follows cursors, streams the whole list through an
 * incremental parser (./json-stream.ts), and retries what may be retried
 * (./transport.ts, by the policy of ./retry.ts).
 *
 * Web APIs only (fetch, streams, TextDecoder, AbortController, btoa), plus
 * `node:crypto` through src/signing/index.ts for HMAC-SHA224, which Web Crypto
 * lacks and Node, Bun and Deno all implement.
 */
import { pct, signUrl } from '../signing/index.js';
import { toPairs } from '../signing/params.js';
import { requestIdOf } from './decode-error.js';
import { MerchantResponseError, networkError } from './errors.js';
import { JsonEnvelopeParser, JsonStreamError } from './json-stream.js';
import { filterQuery, queryString } from './query.js';
import { retryPolicy } from './retry.js';
import { Transport } from './transport.js';
import { webhooksClient, type WebhooksClient } from './webhooks.js';
import { keysClient, type KeysClient } from './keys.js';
import { testModeClient, type TestModeClient } from './test-mode.js';
import type {
  ChangedUserRecord,
  ChangeEntry,
  ChangesOptions,
  ExportOptions,
  KeyInfo,
  MerchantClientOptions,
  RequestOptions,
  SignatureResult,
  UserPage,
  UserPagesOptions,
  UserListBody,
  UserPageBody,
  UserRecord,
  UsersOptions,
  UsersQuery,
  ValidateSignatureOptions,
} from './types.js';

/** A client for one merchant. Every method is an idempotent read, but those of `webhooks` and `keys` that change an endpoint or a key. */
export interface MerchantClient {
  /** The base URL requests go to, without a trailing slash. */
  readonly baseUrl: string;
  readonly merchantId: string;
  /**
   * Signs and sends `GET /validatesignature`: resolves to `{status:'ok', is_valid:true}`
   * when the key and the signing are right, else throws `MerchantResponseError`
   * (`code` tells why: `signature_mismatch`, `timestamp_out_of_window`, `unknown_merchant`, …).
   */
  validateSignature(options?: ValidateSignatureOptions): Promise<SignatureResult>;
  /** One user as shared with this merchant; `MerchantResponseError` with status 404 when there is none. */
  user(sharedUserId: string, options?: RequestOptions): Promise<UserRecord>;
  /**
   * Every user matching the filters, page after page as the iteration needs them. With
   * `order: 'updated_at'` (and `updatedSince`) each record carries `updated_at`: a sync loop
   * remembers the last one it saw and asks again from it (docs/client.md#syncing-changes).
   */
  users(options: UsersOptions & { order: 'updated_at' }): AsyncIterableIterator<ChangedUserRecord>;
  users(options?: UsersOptions): AsyncIterableIterator<UserRecord>;
  /** The pages themselves, each with its `nextCursor`, to resume later with `userPages({ cursor })`. */
  userPages(options?: UserPagesOptions): AsyncIterableIterator<UserPage>;
  /**
   * The change feed (`include_removed=true`, docs/protocol.md#removals): every record changed and
   * every share removed at or after `updatedSince`, in one order, page after page. Store a record,
   * delete what a tombstone (`removed_at`) names, remember the last `updated_at`/`removed_at`
   * and ask again from it (docs/client.md#syncing-changes). A `MerchantResponseError` with status
   * 410 (`gone`): removals from then are no longer kept; start again without `updatedSince`.
   */
  changes(options?: ChangesOptions): AsyncIterableIterator<ChangeEntry>;
  /** Every user in one streamed request, parsed as it arrives: memory stays flat however many there are. */
  exportUsers(options?: ExportOptions): AsyncIterableIterator<UserRecord>;
  /**
   * The merchant's keys (docs/protocol.md#managing-keys). Called, or `keys.list()`: `GET /merchant/keys`,
   * its working keys (not revoked, not expired), oldest first, with their names, scopes, ends, last
   * use and networks; never a secret; needs `users:read`. `keys.create`, `rotate`, `update`,
   * `revoke` change them and need `keys:manage`.
   */
  readonly keys: KeysClient;
  /** The merchant's webhook endpoints (docs/webhooks.md#endpoints): list, create, remove, rotateSecret, test. Needs the scope `webhooks:manage`. */
  readonly webhooks: WebhooksClient;
  /** The test simulator (docs/test-mode.md#the-simulator): `events({ type } | { scenario })`, `reset()`. Needs a test key (`test_…`). */
  readonly test: TestModeClient;
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

class Client implements MerchantClient {
  readonly baseUrl: string;
  readonly merchantId: string;
  private readonly apiKey: string;
  private readonly transport: Transport;
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
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) throw new RangeError(`createMerchantClient: timeoutMs must be a positive number (got ${String(options.timeoutMs)}).`);
    this.transport = new Transport({
      // Called unbound, some runtimes' fetch refuses to run ("Illegal invocation").
      fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
      headers: { accept: 'application/json', 'user-agent': options.userAgent ?? 'merchant-api-client' },
      timeoutMs,
      policy: retryPolicy(options.retries),
      signal: options.signal,
    });
    this.now = options.now;
    this.salt = options.salt;
    this.webhooks = webhooksClient(this.baseUrl, this.transport, () => this.basicAuth());
    this.keys = keysClient(this.baseUrl, this.transport, () => this.basicAuth());
    this.test = testModeClient(this.baseUrl, this.transport, () => this.basicAuth());
  }

  readonly webhooks: WebhooksClient;
  readonly keys: KeysClient;
  readonly test: TestModeClient;

  async validateSignature(options: ValidateSignatureOptions = {}): Promise<SignatureResult> {
    const url = `${this.baseUrl}/validatesignature`;
    const extra = options.params === undefined ? [] : [...toPairs(options.params)];
    const target = { method: 'GET', url };
    // A new ts and salt for every attempt: the server refuses a salt it has seen.
    const signed = () => signUrl(this.apiKey, url, [['cp', this.merchantId], ...extra], { now: this.now, salt: this.salt?.() });
    return this.transport.call(target, signed, {}, options.signal, (body) => {
      const result = body as SignatureResult;
      if (typeof result !== 'object' || result === null || result.status !== 'ok' || result.is_valid !== true) throw new Error('not {"status":"ok","is_valid":true}');
      return result;
    });
  }

  async user(sharedUserId: string, options: RequestOptions = {}): Promise<UserRecord> {
    if (typeof sharedUserId !== 'string' || sharedUserId === '') throw new TypeError('user(): sharedUserId must be a non-empty string.');
    // URLs drop such segments (/merchant/users/. is the list), so no storage accepts them as ids.
    if (sharedUserId === '.' || sharedUserId === '..') throw new TypeError(`user(): no user has the id "${sharedUserId}": URLs drop such path segments.`);
    const url = `${this.baseUrl}/merchant/users/${pct(sharedUserId)}`;
    return this.transport.call({ method: 'GET', url }, () => url, this.basicAuth(), options.signal, (body) => {
      const user = listBody(body).data[0];
      if (!user) throw new Error('no record in "data"');
      return user;
    });
  }

  users(options: UsersOptions & { order: 'updated_at' }): AsyncIterableIterator<ChangedUserRecord>;
  users(options?: UsersOptions): AsyncIterableIterator<UserRecord>;
  async *users(options: UsersOptions = {}): AsyncIterableIterator<UserRecord> {
    for await (const page of this.userPages(options)) yield* page.users;
  }

  async *changes(options: ChangesOptions = {}): AsyncIterableIterator<ChangeEntry> {
    const extra: UsersQuery = { include_removed: 'true' };
    for await (const page of this.pages({ updatedSince: options.updatedSince, pageSize: options.pageSize, signal: options.signal }, extra)) yield* page.users as ChangeEntry[];
  }

  userPages(options: UserPagesOptions = {}): AsyncIterableIterator<UserPage> {
    return this.pages(options, {});
  }

  private async *pages(options: UserPagesOptions, extra: UsersQuery): AsyncIterableIterator<UserPage> {
    const filters = { ...filterQuery(options), ...extra };
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
      const page = await this.transport.call({ method: 'GET', url }, () => url, this.basicAuth(), options.signal, (body) => {
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
    const { response, attempt } = await this.transport.send(target, () => url, this.basicAuth(), options.signal);
    const reader = response.body!.getReader();
    const decoder = new TextDecoder('utf-8', { fatal: true });
    const parser = new JsonEnvelopeParser('data');
    let finished = false;
    const read = async () => {
      attempt.arm();
      try {
        return await reader.read();
      } catch (error) {
        throw this.transport.failure(attempt, error, target);
      } finally {
        attempt.disarm();
      }
    };
    const invalid = (error: unknown) => {
      if (error instanceof JsonStreamError && error.truncated) {
        return networkError(new Error(`the streamed list was cut off after ${parser.elements} user(s)`, { cause: error }), target);
      }
      return new MerchantResponseError(
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
