/**
 * `createMerchantApi`: the web-standard core, `(Request) => Promise<Response>`.
 * One pipeline runs the route table (src/routes/table.ts): match, hooks,
 * authentication, handler, and one place where every answer, error or not,
 * becomes a `Response` in the JSON shape of its endpoint.
 */
import { accessLogHooks } from './observe/access-log.js';
import { authenticate } from './auth/basic-auth.js';
import { createContext, type RequestContext, type RequestInfo } from './http/context.js';
import { CursorCodec } from './listing/cursor.js';
import { FairShare, type FairShareOptions } from './limits/fair-share.js';
import { heldBack, refusalDelay, Tarpit, type TarpitOptions } from './limits/tarpit.js';
import { MerchantApiError } from './errors.js';
import { guardStorage, type StorageCall, type StorageOperation } from './storage/guard.js';
import { MerchantStorageShare } from './limits/storage-share.js';
import { rateLimitFields } from './limits/ratelimit-fields.js';
import { composeHooks, type MerchantApiHooks } from './http/hooks.js';
import { createJsonLogger, describeError, type Logger } from './observe/logger.js';
import { openApiDocument } from './openapi/document.js';
import { createPublicBaseResolver } from './http/public-url.js';
import { errorReply, toResponse, type ErrorShape, type Reply } from './http/responses.js';
import { createMatcher, NOT_FOUND } from './routes/match.js';
import type { HandlerDeps, Route } from './routes/route.js';
import { allowedMethods, ROUTES } from './routes/table.js';
import type { Storage } from './storage/contract.js';
import { FailureThrottle, type Block, type ThrottleOptions } from './limits/throttle.js';
import { shareThrottle } from './limits/throttle-sharing.js';
import { parseBasicAuth } from './auth/basic-auth.js';
import { parseQuery } from './http/query.js';
import { tracingHooks } from './observe/tracing.js';

export interface MerchantApiOptions {
  /** Where merchants, keys, salts and users live. The caller owns it and closes it. */
  storage: Storage;
  /** Mount path inside another server, e.g. `/merchant-api`. Default: none. */
  basePath?: string;
  /**
   * The public URL(s) merchants call, e.g. `https://api.example.com`; the
   * signature covers it. The only trusted source in production.
   */
  publicUrl?: string | readonly string[];
  /** Take the public origin from `X-Forwarded-Proto`/`-Host` (only behind a proxy that sets them). */
  trustProxy?: boolean;
  /** Accepted distance of `ts` from now, in seconds, either way. Default 300. */
  timestampTolerance?: number;
  /** Deadline of every storage call in milliseconds; later is a 503. Default 5000. */
  storageTimeout?: number;
  /** Secret sealing page cursors, shared by every instance (32+ bytes). Default: random per process. */
  cursorSecret?: string | Uint8Array;
  /** Users per storage read while streaming the whole list. Default 1000. */
  streamBatchSize?: number;
  /** Clock in milliseconds since the epoch, for tests. Default `Date.now`. */
  now?: () => number;
  /** Where the access log and events go: any logger with pino's shape. Default: JSON lines on standard output. */
  logger?: Logger;
  /** One line per request on the logger. Default true. */
  accessLog?: boolean;
  /** Your own hooks (quota, metrics, tracing); several sets run in order. */
  hooks?: MerchantApiHooks | readonly MerchantApiHooks[];
  /** A span per request and storage call through `@opentelemetry/api`: a no-op until an SDK is registered. Default true. */
  tracing?: boolean;
  /**
   * Throttling of failed authentication per client address and per
   * (merchant, address) (docs/security.md#throttling); `false` turns it off.
   * Needs the client address, which the adapters pass to `fetch`.
   */
  throttle?: ThrottleOptions | false;
  /** Listing requests (`GET /merchant/users`) one merchant may have running at once; the next gets 429. Default 4. */
  merchantConcurrency?: number;
  /**
   * While the instance is busy, a merchant keeping several connections busy and using more
   * than its share gets 429 (docs/security.md#fair-sharing); `{}` turns it on with the defaults.
   * It counts connections by `RequestInfo.clientPort`, which our adapters give. Default off in
   * the library: the CPU it samples is the whole process's, in your server not only this
   * handler's (on by default in the standalone server, `FAIR_SHARE`).
   */
  fairShare?: FairShareOptions | false;
  /**
   * A connection refused with 429 and `Retry-After` that sends again before
   * that time gets its next refusal only when the time is up (at most
   * `maxDelayMs`, default 5000, later), so that a client ignoring
   * `Retry-After` costs a timer instead of a core (docs/security.md#clients-that-ignore-retry-after).
   * Needs `RequestInfo.clientPort`, which our adapters give. Default on; `false` turns it off.
   */
  tarpit?: TarpitOptions | false;
}

export interface MerchantApi {
  /** Answers one request. Never rejects: every failure is a JSON response. */
  fetch(request: Request, info?: RequestInfo): Promise<Response>;
}

/** A `Response` a hook answered with, carried past the handler. */
class HookAnswer {
  constructor(readonly response: Response) {}
}

/**
 * Creates the handler.
 *
 * @example
 * const api = createMerchantApi({ storage: createMemoryStorage({ seed }), publicUrl: 'https://api.example.com' });
 * const response = await api.fetch(new Request('https://api.example.com/healthz'));
 */
export function createMerchantApi(options: MerchantApiOptions): MerchantApi {
  if (!options?.storage) throw new TypeError('createMerchantApi: the storage option is required.');
  const basePath = normaliseBasePath(options.basePath);
  const tolerance = options.timestampTolerance ?? 300;
  if (!Number.isInteger(tolerance) || tolerance < 1) throw new TypeError('timestampTolerance must be a whole number of seconds, at least 1.');
  const storageTimeout = options.storageTimeout ?? 5000;
  if (!(storageTimeout > 0)) throw new TypeError('storageTimeout must be a positive number of milliseconds.');
  const logger = options.logger ?? createJsonLogger();
  const given = options.hooks === undefined ? [] : Array.isArray(options.hooks) ? options.hooks : [options.hooks as MerchantApiHooks];
  // Off unless asked for: in an application's own process, the CPU it samples is not only ours.
  const fairShare = options.fairShare === undefined || options.fairShare === false ? undefined : new FairShare(options.fairShare, logger);
  const hooks = composeHooks([
    ...(fairShare ? [fairShare.hooks] : []),
    ...(options.tracing === false ? [] : [tracingHooks()]),
    ...(options.accessLog === false ? [] : [accessLogHooks(logger)]),
    ...given,
  ]);

  const guarded = guardStorage<RequestContext>(
    options.storage,
    storageTimeout,
    (operation: StorageOperation, ctx, error) => logger.error({ event: 'storage_unavailable', request_id: ctx.requestId, operation, ...describeError(error) }),
    hooks.onStorageCall && ((operation, ctx) => hooks.onStorageCall!(ctx, operation) ?? undefined),
  );
  // An authenticated merchant's calls take at most half of a pooled storage's connections.
  const share = options.storage.concurrency === undefined ? undefined : new MerchantStorageShare(options.storage.concurrency);
  const storage: StorageCall<RequestContext> =
    share === undefined
      ? guarded
      : (operation, ctx, call) => (ctx.merchantId === undefined ? guarded(operation, ctx, call) : guarded(operation, ctx, (s) => share.run(ctx.merchantId!, () => call(s))));
  const onAuthenticated = hooks.onAuthenticated;
  const deps: HandlerDeps = {
    storage,
    cursors: new CursorCodec(options.cursorSecret),
    resolveBases: createPublicBaseResolver(options),
    tolerance,
    now: options.now ?? Date.now,
    basePath,
    streamBatchSize: options.streamBatchSize ?? 1000,
    openApiBody: JSON.stringify(openApiDocument(basePath)),
    authenticated(ctx, merchantId) {
      ctx.merchantId = merchantId;
      fairShare?.admit(ctx, merchantId);
      if (!onAuthenticated) return;
      return Promise.resolve(onAuthenticated(ctx)).then((answer) => {
        if (answer) throw new HookAnswer(answer);
      });
    },
  };
  const match = createMatcher(ROUTES);
  const trustProxy = options.trustProxy === true;
  // Shared by every instance when the storage offers a store (MySQL); the local throttle still decides.
  const throttle = options.throttle === false ? undefined : shareThrottle(new FailureThrottle(options.throttle), { store: options.storage.throttleStore?.(), now: deps.now, logger });
  const tarpit = options.tarpit === false ? undefined : new Tarpit(options.tarpit);
  const concurrency = options.merchantConcurrency ?? 4;
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new TypeError('merchantConcurrency must be a whole number, at least 1.');
  // Listing requests running now, by merchant (entries leave at zero, so this stays small).
  const listing = new Map<string, number>();

  /** 429 before any key is compared or any storage read, for an address or (merchant, address) blocked after failures. */
  function checkThrottle(ctx: RequestContext, route: Route, search: string): void {
    if (!throttle || ctx.clientAddress === undefined || route.auth === 'none') return;
    const block = throttle.blocked(ctx.clientAddress, () => claimedMerchant(ctx, route, search), Math.floor(deps.now() / 1000));
    if (block) throw refuse(ctx, block.scope === 'address' ? 'auth_address' : 'auth_pair', tooManyFailures(block));
  }

  function refuse(ctx: RequestContext, reason: string, error: MerchantApiError): MerchantApiError {
    ctx.throttled = reason;
    logger.warn({ event: 'throttled', reason, request_id: ctx.requestId, route: ctx.route ?? null, client_address: ctx.clientAddress ?? null });
    return error;
  }

  /** Counts the outcome of an authentication for the throttle. */
  function countAuthentication(ctx: RequestContext): void {
    if (!throttle || ctx.clientAddress === undefined) return;
    if (ctx.authFailure !== undefined) throttle.failed(ctx.clientAddress, ctx.claimedMerchantId, Math.floor(deps.now() / 1000));
    else if (ctx.merchantId !== undefined) throttle.succeeded(ctx.clientAddress, ctx.merchantId);
  }

  /** Takes one of the merchant's listing slots, or refuses; the slot is given back when the answer is finished. */
  function takeListingSlot(ctx: RequestContext, merchantId: string): () => void {
    const running = listing.get(merchantId) ?? 0;
    if (running >= concurrency) {
      throw refuse(
        ctx,
        'merchant_concurrency',
        new MerchantApiError('too_many_requests', `At most ${concurrency} listings of one merchant run at once; retry when one has finished.`, {
          headers: rateLimitFields('listings', concurrency, 1),
        }),
      );
    }
    listing.set(merchantId, running + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (listing.get(merchantId) ?? 1) - 1;
      if (left <= 0) listing.delete(merchantId);
      else listing.set(merchantId, left);
    };
  }
  const releases = new WeakMap<RequestContext, () => void>();

  /** Everything up to the reply; throws for errors. Not async: fewer promises on the hot path. */
  function run(ctx: RequestContext, route: Route, path: string, search: string, origin: string, params: Record<string, string>): Reply | Promise<Reply> {
    if (route.auth === 'basic') {
      return authenticate(ctx, (id) => storage('getMerchant', ctx, (s) => s.getMerchant(id))).then(async (merchant) => {
        if (route.id === 'listUsers') releases.set(ctx, takeListingSlot(ctx, merchant.id));
        const hooked = deps.authenticated(ctx, merchant.id);
        if (hooked) await hooked;
        return route.handle(ctx, { path, search, origin, params, merchant }, deps);
      });
    }
    return route.handle(ctx, { path, search, origin, params, merchant: undefined }, deps);
  }

  function failed(ctx: RequestContext, error: unknown, shape: ErrorShape): Reply | Response {
    if (error instanceof HookAnswer) return error.response;
    if (error instanceof MerchantApiError) {
      ctx.errorCode = error.code;
    } else {
      ctx.errorCode = 'internal_error';
      logger.error({ event: 'unexpected_error', request_id: ctx.requestId, route: ctx.route ?? null, ...describeError(error) });
    }
    if (hooks.onError) safely('onError', () => hooks.onError!(ctx, error));
    return errorReply(error, shape);
  }

  function safely(hook: string, call: () => void): void {
    try {
      call();
    } catch (error) {
      logger.error({ event: 'hook_failed', hook, ...describeError(error) });
    }
  }

  const onFinish = hooks.onFinish;
  function finisher(ctx: RequestContext, status: number, started: number) {
    return (bytes: number, aborted: boolean) => {
      releases.get(ctx)?.();
      if (aborted) logger.error({ event: 'stream_aborted', request_id: ctx.requestId, route: ctx.route ?? null, bytes });
      if (!onFinish) return;
      try {
        onFinish(ctx, { status, bytes, durationMs: performance.now() - started, aborted });
      } catch (error) {
        logger.error({ event: 'hook_failed', hook: 'onFinish', ...describeError(error) });
      }
    };
  }

  function respond(ctx: RequestContext, answer: Reply | Response, head: boolean, started: number): Response {
    if (ctx.authFailure !== undefined) {
      logger.warn({ event: 'auth_failed', reason: ctx.authFailure, request_id: ctx.requestId, route: ctx.route ?? null, client_address: ctx.clientAddress ?? null });
    }
    countAuthentication(ctx);
    let response: Response;
    if (answer instanceof Response) {
      response = answer;
      const length = Number(response.headers.get('content-length') ?? 0);
      finisher(ctx, response.status, started)(length, false);
    } else {
      const extra: Record<string, string> = { 'x-request-id': ctx.requestId, 'x-content-type-options': 'nosniff' };
      // Served over TLS (here or at a proxy the URL reflects): browsers are told to keep to HTTPS.
      if (ctx.request.url.startsWith('https:')) extra['strict-transport-security'] = 'max-age=31536000';
      response = toResponse(answer, head, extra, finisherFor(ctx, answer.status, started));
    }
    if (!hooks.onResponse) return response;
    try {
      return hooks.onResponse(ctx, response) ?? response;
    } catch (error) {
      logger.error({ event: 'hook_failed', hook: 'onResponse', ...describeError(error) });
      return response;
    }
  }

  const finisherFor = (ctx: RequestContext, status: number, started: number) => (onFinish || releases.has(ctx) ? finisher(ctx, status, started) : undefined);

  return {
    async fetch(request: Request, info?: RequestInfo): Promise<Response> {
      const started = performance.now();
      const ctx = createContext(request, info, trustProxy);
      const head = request.method === 'HEAD';
      let shape: ErrorShape = 'envelope';
      let answer: Reply | Response;
      try {
        const { origin, path, search } = splitUrl(request.url);
        const found = match(stripBasePath(path, basePath));
        if (!found) throw NOT_FOUND;
        const { route, params } = found;
        ctx.route = route.pattern;
        shape = route.errorShape;
        if (request.method !== route.method && !(head && route.method === 'GET')) {
          const allow = allowedMethods(route);
          throw new MerchantApiError('method_not_allowed', `Only ${allow.replace(', ', ' and ')} are allowed here.`, { headers: { allow } });
        }
        checkThrottle(ctx, route, search);
        if (hooks.onRequest) {
          const early = hooks.onRequest(ctx);
          const answered = early instanceof Promise ? await early : early;
          if (answered) throw new HookAnswer(answered);
        }
        answer = await run(ctx, route, path, search, origin, params);
      } catch (error) {
        answer = failed(ctx, error, shape);
        const wait = tarpit && refusalDelay(tarpit, ctx, error);
        if (wait) await heldBack(wait);
      }
      return respond(ctx, answer, head, started);
    },
  };
}

/**
 * Splits an absolute request URL without building a `URL`: the Request
 * constructor already normalised it (dot segments, host case, default port).
 */
function splitUrl(url: string): { origin: string; path: string; search: string } {
  const pathStart = url.indexOf('/', url.indexOf('//') + 2);
  if (pathStart === -1) return { origin: url.replace(/[?#].*$/, ''), path: '/', search: '' };
  let end = url.indexOf('#', pathStart);
  if (end === -1) end = url.length;
  const q = url.indexOf('?', pathStart);
  return q === -1 || q > end
    ? { origin: url.slice(0, pathStart), path: url.slice(pathStart, end), search: '' }
    : { origin: url.slice(0, pathStart), path: url.slice(pathStart, q), search: url.slice(q + 1, end) };
}

/** The path below the base path, or '' when the request is not under it. */
function stripBasePath(path: string, basePath: string): string {
  if (!basePath) return path;
  if (!path.startsWith(basePath) || (path.length > basePath.length && path[basePath.length] !== '/')) return '';
  return path.slice(basePath.length) || '/';
}

function normaliseBasePath(basePath: string | undefined): string {
  if (basePath === undefined || basePath === '' || basePath === '/') return '';
  if (!basePath.startsWith('/') || /[?#]/.test(basePath)) throw new TypeError(`basePath "${basePath}" must be a path starting with "/".`);
  return new URL(basePath.replace(/\/+$/, ''), 'http://x').pathname;
}

/** The merchant a request names, before anything is looked up: the Basic user, or `cp`. */
function claimedMerchant(ctx: RequestContext, route: Route, search: string): string | undefined {
  try {
    if (route.auth === 'basic') return parseBasicAuth(ctx.header('authorization'))?.id;
    return parseQuery(search).find(([key]) => key === 'cp')?.[1];
  } catch {
    return undefined;
  }
}

function tooManyFailures(block: Block): MerchantApiError {
  const who = block.scope === 'address' ? 'this address' : 'this merchant from this address';
  const name = block.scope === 'address' ? 'auth-address' : 'auth-merchant';
  return new MerchantApiError('too_many_requests', `Too many failed authentications from ${who}; try again in ${block.retryAfter} seconds.`, {
    headers: rateLimitFields(name, block.limit, block.retryAfter, block.window),
  });
}
