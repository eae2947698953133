/**
 * `createMerchantApi`: the web-standard core, `(Request) => Promise<Response>`.
 * Routing is ours (docs/protocol.md#endpoints); every thrown error is rendered in one
 * place in the JSON shape of the endpoint it came from.
 */
import { CursorCodec } from './cursor.js';
import { MerchantApiError } from './errors.js';
import { guardStorage } from './guarded-storage.js';
import { consoleLogger, describeError, type Logger } from './logger.js';
import { openApiDocument } from './openapi.js';
import { createPublicBaseResolver } from './public-url.js';
import { decodePathSegment, parseQuery } from './query.js';
import { errorResponse, json, type ErrorShape } from './responses.js';
import type { Storage } from './storage.js';
import { getUser, listUsers } from './users.js';
import { validateSignature } from './validate-signature.js';

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
  /** Where storage failures and unexpected errors are reported. Default: JSON lines on the console. */
  logger?: Logger;
}

export interface MerchantApi {
  /** Answers one request. Never rejects: every failure is a JSON response. */
  fetch(request: Request): Promise<Response>;
}

type Route =
  | { name: 'validatesignature' | 'users' | 'healthz' | 'readyz' | 'openapi'; id?: undefined }
  | { name: 'user'; id: string };

// The fixed routes, allocated once rather than per request.
const VALIDATESIGNATURE: Route = { name: 'validatesignature' };
const USERS: Route = { name: 'users' };
const HEALTHZ: Route = { name: 'healthz' };
const READYZ: Route = { name: 'readyz' };
const OPENAPI: Route = { name: 'openapi' };

const NOT_FOUND = new MerchantApiError('not_found', 'No such endpoint.');
const METHOD_NOT_ALLOWED = new MerchantApiError('method_not_allowed', 'Only GET and HEAD are allowed here.');

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
  const streamBatchSize = options.streamBatchSize ?? 1000;
  const logger = options.logger ?? consoleLogger;
  const now = options.now ?? Date.now;
  const resolveBases = createPublicBaseResolver(options);
  const storage = guardStorage(options.storage, storageTimeout, logger);
  const cursors = new CursorCodec(options.cursorSecret);
  const openApiBody = JSON.stringify(openApiDocument(basePath));

  // Not async: the hot endpoints return their own promise, so one promise and
  // one microtask per request fewer (bench/); fetch() awaits and catches.
  function handle(request: Request, route: Route, path: string, search: string, origin: string, head: boolean): Response | Promise<Response> {
    switch (route.name) {
      case 'healthz':
        return json(200, '{"status":"ok"}', head);
      case 'readyz':
        return storage('ping', (s) => s.ping()).then(() => json(200, '{"status":"ok"}', head));
      case 'openapi':
        return json(200, openApiBody, head);
      case 'validatesignature':
        return validateSignature({
          method: request.method,
          head,
          bases: resolveBases(request, origin),
          path,
          pairs: parseQuery(search),
          nowMs: now(),
          tolerance,
          storage,
        });
      case 'users':
      case 'user': {
        const ctx = {
          request,
          head,
          pairs: parseQuery(search),
          storage,
          cursors,
          logger,
          listUrl: `${resolveBases(request, origin)[0]}${basePath}/merchant/users`,
          streamBatchSize,
        };
        return route.name === 'user' ? getUser(ctx, route.id) : listUsers(ctx);
      }
    }
  }

  return {
    async fetch(request: Request): Promise<Response> {
      const head = request.method === 'HEAD';
      let shape: ErrorShape = 'envelope';
      try {
        const { origin, path, search } = splitUrl(request.url);
        const route = matchRoute(path, basePath);
        if (route.name === 'validatesignature') shape = 'signature';
        if (!head && request.method !== 'GET') throw METHOD_NOT_ALLOWED;
        return await handle(request, route, path, search, origin, head);
      } catch (error) {
        if (!(error instanceof MerchantApiError)) logger.error('unexpected_error', describeError(error));
        return errorResponse(error, shape, head);
      }
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

function matchRoute(fullPath: string, basePath: string): Route {
  let path = fullPath;
  if (basePath) {
    if (!path.startsWith(basePath) || (path.length > basePath.length && path[basePath.length] !== '/')) throw NOT_FOUND;
    path = path.slice(basePath.length) || '/';
  }
  switch (path) {
    case '/validatesignature':
      return VALIDATESIGNATURE;
    case '/merchant/users':
    case '/merchant/users/':
      return USERS;
    case '/healthz':
      return HEALTHZ;
    case '/readyz':
      return READYZ;
    case '/openapi.json':
      return OPENAPI;
  }
  if (path.startsWith('/merchant/users/')) {
    const segment = path.slice('/merchant/users/'.length);
    if (!segment.includes('/')) return { name: 'user', id: decodePathSegment(segment) };
  }
  throw NOT_FOUND;
}

function normaliseBasePath(basePath: string | undefined): string {
  if (basePath === undefined || basePath === '' || basePath === '/') return '';
  if (!basePath.startsWith('/') || /[?#]/.test(basePath)) throw new TypeError(`basePath "${basePath}" must be a path starting with "/".`);
  return new URL(basePath.replace(/\/+$/, ''), 'http://x').pathname;
}
