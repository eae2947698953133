/**
 * What a route's own OpenAPI operation says. Each route's text lives beside
 * its handler in src/routes/ and is named by its table entry
 * (`Route.openapi`), so adding an endpoint touches no file here; the builder
 * (document.ts) adds what the table says and the answers every route shares.
 */
import type { AuthScheme } from '../auth/scheme.js';
import type { KeyScope } from '../storage/key-limits.js';
import type { MerchantApiErrorCode } from '../errors.js';
import type { ErrorShape } from '../http/responses.js';
import type { RouteLimit } from '../limits/limit.js';
import type { RouteMethod } from '../http/methods.js';

/** A piece of the OpenAPI document, as JSON. */
export type Json = Record<string, unknown>;

/** What the document reads of a route table entry (the `Route` of src/routes/route.ts is one, with its handler). */
export interface DocumentedRoute {
  /** The operation's name, also its OpenAPI `operationId`. */
  id: string;
  method: RouteMethod;
  /** Path under the base path; `{name}` matches one percent-decoded segment. */
  pattern: string;
  auth: AuthScheme;
  /**
   * The scope a key needs on a `basic` route (docs/security.md#key-scopes-and-allowlists); default
   * `users:read`. Its 403 `insufficient_scope` names it.
   */
  scope?: KeyScope;
  /** The JSON shape its errors take. */
  errorShape: ErrorShape;
  /** A limit of the route's own: `listings`, at most `merchantConcurrency` of one merchant's requests to it at once. */
  limit?: RouteLimit;
  /** True when `pattern` + `/` is the same route. */
  trailingSlash?: boolean;
  /** Whole 200 bodies carry a strong `ETag`, and `If-None-Match` naming it answers 304 (src/pipeline/conditional.ts). */
  etag?: boolean;
  /**
   * Takes `Idempotency-Key` (src/pipeline/idempotency.ts, docs/protocol.md#safe-retries); default:
   * every POST with Basic authentication. `false` opts a POST out, `true` opts another method in.
   */
  idempotencyKey?: boolean;
  summary: string;
  /** The operation's own OpenAPI text, kept beside its handler; the rest of the document comes from the fields above. */
  openapi: OperationDoc;
}

/** What the route table does not say about an operation. */
export interface OperationDoc {
  tag: 'Signatures' | 'Users' | 'Keys' | 'Webhooks' | 'Test mode' | 'Service';
  description: string;
  parameters?: Json[];
  /** The JSON body a POST reads (OpenAPI `requestBody`). */
  requestBody?: Json;
  /** The answers of this operation itself (successes and errors of its own). */
  responses: Record<string, Json>;
  /** Parses the query string: 414, and the 400 of a malformed query. */
  readsQuery: boolean;
  /** Calls the storage without authenticating first (authenticated routes always do): 503. */
  usesStorage?: boolean;
  /** Why this operation itself answers 400, before the adapter's reasons. */
  badRequest?: string;
  badRequestCodes?: MerchantApiErrorCode[];
  /** Why this operation itself answers 429, besides the throttling of failed authentication. */
  tooManyRequests?: string;
}

/**
 * The routes that take `Idempotency-Key` (src/pipeline/idempotency.ts, docs/protocol.md#safe-retries):
 * their table entry says so, else every POST with Basic authentication.
 */
export function takesIdempotencyKey(route: DocumentedRoute): boolean {
  return route.idempotencyKey ?? (route.method === 'POST' && route.auth === 'basic');
}
