/**
 * What a route is, and what its handler gets. The table itself is
 * `src/routes/table.ts`; the pipeline that runs it is `src/http/pipeline.ts`.
 */
import type { RequestContext } from '../http/context.js';
import type { CursorCodec } from '../listing/cursor.js';
import type { StorageView } from '../storage/guard.js';
import type { PublicBaseResolver } from '../http/public-url.js';
import type { ErrorShape, Reply } from '../http/responses.js';
import type { Merchant, PartHealth } from '../storage/contract.js';
import type { OperationDoc } from '../openapi/operation.js';

/** How a route authenticates: a signed query, HTTP Basic (done before the handler), or not at all. */
export type RouteAuth = 'signature' | 'basic' | 'none';

/** What the pipeline hands a handler besides the context. */
export interface RouteInput {
  /** The full path as received, still percent-encoded (the signature covers it). */
  path: string;
  /** The query string without `?`. */
  search: string;
  /** Scheme and authority of the request URL. */
  origin: string;
  /** Path parameters, percent-decoded: `{ shared_user_id: 'u-1' }`. */
  params: Record<string, string>;
  /** The merchant, on routes with `basic` authentication. */
  merchant: Merchant | undefined;
}

/** What every handler may use, fixed when the handler is created. */
export interface HandlerDeps {
  /** The storage as this request sees it: bounded in time, watched by the hooks, within the merchant's share. */
  storage(ctx: RequestContext): StorageView;
  cursors: CursorCodec;
  resolveBases: PublicBaseResolver;
  /** Accepted distance of `ts` from now, in seconds. */
  tolerance: number;
  now: () => number;
  basePath: string;
  streamBatchSize: number;
  /** The OpenAPI document, serialised once. */
  openApiBody: string;
  /** How the storage's parts did at their last use, when the storage reports them. */
  storageHealth: (() => Record<string, PartHealth>) | undefined;
  /** Marks the merchant authenticated and runs the `onAuthenticated` hooks. */
  authenticated(ctx: RequestContext, merchantId: string): void | Promise<void>;
}

export type Handler = (ctx: RequestContext, input: RouteInput, deps: HandlerDeps) => Reply | Promise<Reply>;

export interface Route {
  /** The operation's name, also its OpenAPI `operationId`. */
  id: string;
  method: 'GET';
  /** Path under the base path; `{name}` matches one percent-decoded segment. */
  pattern: string;
  auth: RouteAuth;
  /** The JSON shape its errors take. */
  errorShape: ErrorShape;
  /** A limit of the route's own: `listings`, at most `merchantConcurrency` of one merchant's requests to it at once. */
  limit?: 'listings';
  /** True when `pattern` + `/` is the same route. */
  trailingSlash?: boolean;
  summary: string;
  handle: Handler;
  /** The operation's own OpenAPI text, kept beside its handler; the rest of the document comes from the fields above. */
  openapi: OperationDoc;
}
