/**
 * What a route is, and what its handler gets. The table itself is
 * `src/routes/table.ts`; the pipeline that runs it is `src/pipeline/pipeline.ts`.
 */
import type { RequestContext } from '../http/context.js';
import type { CursorCodec } from '../listing/cursor.js';
import type { StorageView } from '../storage/guard.js';
import type { PublicBaseResolver } from '../http/public-url.js';
import type { Reply } from '../http/responses.js';
import type { Merchant, PartHealth } from '../storage/contract.js';
import type { DocumentedRoute } from '../openapi/operation.js';
import type { KeyGate } from '../auth/key-gate.js';
import type { Logger } from '../observe/logger.js';
import type { AddressPolicy } from '../webhooks/address-guard.js';
import type { TestModeDeps } from '../testmode/test-mode.js';

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
  /** Test mode (docs/test-mode.md): whether test keys are accepted, and the test datasets the simulator changes. */
  testMode: TestModeDeps;
  cursors: CursorCodec;
  resolveBases: PublicBaseResolver;
  /** Accepted distance of `ts` from now, in seconds. */
  tolerance: number;
  /** How far ahead of now `ts` may be, in seconds (at most `tolerance`). */
  futureTolerance: number;
  now: () => number;
  basePath: string;
  streamBatchSize: number;
  /** The OpenAPI document, serialised once. */
  openApiBody: string;
  /** How the storage's parts did at their last use, when the storage reports them. */
  storageHealth: (() => Record<string, PartHealth> | undefined) | undefined;
  /** The check of a matched key's limits, which also notes its use (src/auth/key-gate.ts). */
  keys: KeyGate;
  /** The server's logger: the webhook endpoints log each change as the CLI does (`webhook_endpoint_added`, ...). */
  logger: Logger;
  /** What `/merchant/webhooks` checks: the address rules and the most endpoints per merchant. */
  webhooks: AddressPolicy & { maxEndpointsPerMerchant: number; supported: boolean; retentionMs: number };
  /** The storage keeps idempotency keys (`Storage.claimIdempotencyKey`): else a request with `Idempotency-Key` is 501. */
  idempotencyKeys: boolean;
  /** Marks the merchant authenticated, runs the limits after authentication and the `onAuthenticated` hooks (src/pipeline/authentication.ts). */
  authenticated(ctx: RequestContext, merchantId: string): void | Promise<void>;
}

export type Handler = (ctx: RequestContext, input: RouteInput, deps: HandlerDeps) => Reply | Promise<Reply>;

/** A table entry: what the OpenAPI document reads of it (`DocumentedRoute`), and its handler. */
export interface Route extends DocumentedRoute {
  handle: Handler;
}
