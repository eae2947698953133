/**
 * What the handler knows about one request as it goes through the pipeline,
 * and what hooks see (docs/observability.md#hooks).
 */

import type { AuthFailureReason } from '../auth/merchant-check.js';
import type { MerchantApiError } from '../errors.js';
import type { KeyMode } from '../storage/key-limits.js';
import { forwardedForAddress } from './forwarded-for.js';

export type { AuthFailureReason };

export interface RequestContext {
  readonly request: Request;
  /** A request header, as `request.headers.get(name)` answers it (name in lower case). */
  header(name: string): string | null;
  /** The request's `X-Request-Id` when valid (1-128 visible ASCII characters), else a new UUID. */
  readonly requestId: string;
  /** The request method, upper case. */
  readonly method: string;
  /** The matched route's pattern, such as `/merchant/users/{shared_user_id}`; undefined for an unknown path. */
  route: string | undefined;
  /** The client's address as the adapter saw it (the socket's peer), when it told. */
  readonly clientAddress: string | undefined;
  /**
   * The client's port on the socket the request came in on, when the adapter
   * told: with the socket's address it tells one connection from another
   * (behind a proxy, one of the proxy's connections).
   */
  readonly clientPort: number | undefined;
  /** When the request arrived, in milliseconds since the epoch. */
  readonly startTime: number;
  /** The authenticated merchant's id, from the moment its credentials are verified. */
  merchantId: string | undefined;
  /** The merchant the credentials name, once the storage knows it exists (also when the credentials are wrong). */
  claimedMerchantId: string | undefined;
  /**
   * The limit that refused the request, as the `throttled` event and
   * `merchant_api_throttled_total` name it: `auth_address`, `auth_pair`,
   * `merchant_concurrency`, `fair_share`, `storage_share`, or one of the Node
   * adapter's connection caps (`connections`, `connections_per_address`).
   */
  throttled: string | undefined;
  /** The error code of the answer, when it is an error. */
  errorCode: string | undefined;
  /** Set when authentication failed, with the reason. */
  authFailure: AuthFailureReason | undefined;
  /** Which of the merchant's keys matched (its index in `Merchant.keys`), for the key's limits; -1 before one did. */
  keyIndex: number;
  /**
   * The mode of the key that matched (docs/test-mode.md): `test` from the moment a test key is
   * accepted, when every storage call of the request goes to the merchant's test dataset; `live`
   * before and otherwise. The access log and the metrics label the request with it.
   */
  mode: KeyMode;
  /** How long a refusal was deliberately held back (late refusals, src/limits/tarpit.ts), ms: not latency. */
  heldMs?: number;
  /**
   * The IETF RateLimit fields of a limit this request holds a part of (a
   * listing slot, src/limits/listing-slots.ts), for every answer it gets:
   * `policy` for `RateLimit-Policy`, `state` for `RateLimit`.
   */
  rateLimit?: { policy: string; state: string };
}

/** What an adapter tells the handler about a request beyond the `Request` itself. */
export interface RequestInfo {
  /** The client's address: the socket's peer (not a forwarded header). */
  clientAddress?: string;
  /**
   * The socket peer's port. Fair sharing counts a merchant's connections by it
   * (docs/security.md#fair-sharing): without it nobody is refused for their share.
   */
  clientPort?: number;
  /**
   * Reads a header (lower-case name) exactly as `request.headers.get` would,
   * from headers the runtime has parsed already. The Node adapter passes one:
   * a Fetch `Headers` built from Node's raw list only to read three of its
   * fields cost more than the rest of the request handling.
   */
  header?: (name: string) => string | null;
  /**
   * The request URL is the one the client sent, no mount prefix stripped
   * from it: with `basePath`, a path outside it is then a 404 rather than
   * taken as stripped (docs/embedding.md#the-base-path). merchant-api's own
   * `serve` and Node listener set it.
   */
  pathAsSent?: boolean;
  /**
   * The request target as sent had a `.` or `..` path segment (plain or
   * percent-encoded, `hasDotSegment`), which the URL parser removed: such a
   * request is a 404, since no resource has one (`/merchant/users/.` must not
   * become the list). The Node and Deno adapters set it; Bun cannot: its
   * `fetch` handler gets only a `Request` whose URL Bun already resolved,
   * and no raw request target (docs/protocol.md#endpoints).
   */
  dotSegments?: boolean;
  /**
   * The adapter's own answer to this request (a parser error, an `Expect`
   * it does not meet, two Host lines): the pipeline answers it as it answers
   * its own errors, so it has an access line, metrics, hooks, the request's
   * `X-Request-Id`, `nosniff` and, over TLS, HSTS.
   */
  refusal?: MerchantApiError;
  /**
   * With `refusal`: the adapter's connection limit that refused the
   * connection (`connections`, `connections_per_address`). The refusal is
   * counted under it in `merchant_api_throttled_total` (without a `throttled`
   * event per connection: the adapter reports a cap once, not per
   * connection), and no late refusal is kept for it: the connection is
   * closed after its answer.
   */
  connectionLimit?: string;
  /**
   * The adapter closes the connection without sending the answer (over TLS,
   * a connection refused before its handshake). The answer is decided,
   * logged and counted all the same, with 0 bytes and `aborted`, so that the
   * access log and the metrics see every refusal.
   */
  unsent?: boolean;
}

const VALID_REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * The longest client address kept: an IPv6 address with a zone fits. A
 * host's longer value is cut, so that no log line, trace or map key grows
 * with what it passes.
 */
const MAX_CLIENT_ADDRESS_LENGTH = 64;

/**
 * The context of a request. With `trustProxy`, the client address is the one
 * the nearest proxy appended to `X-Forwarded-For` (its last entry, read by
 * `forwardedForAddress`, its port dropped): the entries before it are
 * whatever the client chose to send. An entry that is no address leaves the
 * client address undefined, never the socket's (the proxy's), and the
 * pipeline refuses the request (400 `UNREADABLE_FORWARDED_FOR`); without the
 * header the socket's address is the client's.
 */
export function createContext(request: Request, info: RequestInfo | undefined, trustProxy: boolean): RequestContext {
  const ctx = contextOf(request.method, info?.header ?? ((name: string) => request.headers.get(name)), info, trustProxy) as Omit<RequestContext, 'request'> & { request?: Request };
  ctx.request = request;
  return ctx as RequestContext;
}

/**
 * What a host hands over of a request without a Fetch `Request` (the Node
 * adapter's direct path): its method, a header reader, and the `Request`
 * made the first time something asks (the same one every time).
 */
export interface LazySource {
  readonly method: string;
  readonly header: (name: string) => string | null;
  request(): Request;
}

/**
 * The context of a request a host hands over without a Fetch `Request`
 * (the Node adapter's direct path, adapters/node-direct.ts): `ctx.request`
 * is made by `source.request()` the first time something reads it (a hook), never
 * on the common request.
 */
export function createLazyContext(source: LazySource, info: RequestInfo | undefined, trustProxy: boolean): RequestContext {
  return new LazyContext(source, info, trustProxy);
}

/**
 * A context whose `request` is a getter of its class: one shape for every
 * request (an accessor defined on each object made a slow one, a visible
 * cost per request). The other members are own data properties, as on
 * the Fetch path's context. It keeps the host's source rather than a
 * closure over it: one allocation fewer per request.
 */
class LazyContext {
  readonly #source: LazySource;

  constructor(source: LazySource, info: RequestInfo | undefined, trustProxy: boolean) {
    const header = source.header;
    this.header = header;
    this.requestId = requestIdOf(header);
    this.method = source.method;
    this.route = undefined;
    this.clientAddress = clientAddressOf(header, info, trustProxy);
    this.clientPort = info?.clientPort;
    this.startTime = Date.now();
    this.merchantId = undefined;
    this.claimedMerchantId = undefined;
    this.throttled = undefined;
    this.errorCode = undefined;
    this.authFailure = undefined;
    this.keyIndex = -1;
    this.mode = 'live';
    this.#source = source;
  }

  get request(): Request {
    return this.#source.request();
  }
}

interface LazyContext extends Omit<RequestContext, 'request'> {
  // Set once, in the constructor.
  header: RequestContext['header'];
  requestId: string;
  method: string;
  clientAddress: string | undefined;
  clientPort: number | undefined;
  startTime: number;
}

/** Everything of the context but `request`, which its maker adds. */
function contextOf(method: string, header: (name: string) => string | null, info: RequestInfo | undefined, trustProxy: boolean): Omit<RequestContext, 'request'> {
  return {
    header,
    requestId: requestIdOf(header),
    method,
    route: undefined,
    clientAddress: clientAddressOf(header, info, trustProxy),
    clientPort: info?.clientPort,
    startTime: Date.now(),
    merchantId: undefined,
    claimedMerchantId: undefined,
    throttled: undefined,
    errorCode: undefined,
    authFailure: undefined,
    keyIndex: -1,
    mode: 'live',
  };
}

/** The request's `X-Request-Id` when valid, else a new UUID. */
function requestIdOf(header: (name: string) => string | null): string {
  const given = header('x-request-id');
  return given !== null && VALID_REQUEST_ID.test(given) ? given : crypto.randomUUID();
}

/** The socket's address, or with `trustProxy` and an `X-Forwarded-For` the nearest proxy's entry (undefined when unreadable); cut to a bounded length. */
function clientAddressOf(header: (name: string) => string | null, info: RequestInfo | undefined, trustProxy: boolean): string | undefined {
  let clientAddress = info?.clientAddress;
  if (trustProxy) {
    const forwarded = header('x-forwarded-for');
    if (forwarded !== null) clientAddress = forwardedForAddress(forwarded);
  }
  if (clientAddress !== undefined && clientAddress.length > MAX_CLIENT_ADDRESS_LENGTH) clientAddress = clientAddress.slice(0, MAX_CLIENT_ADDRESS_LENGTH);
  return clientAddress;
}

/** The last entry of a comma-separated header: what the nearest proxy added. */
export function lastListValue(header: string | null): string | undefined {
  if (header === null) return undefined;
  const value = header.slice(header.lastIndexOf(',') + 1).trim();
  return value === '' ? undefined : value;
}
