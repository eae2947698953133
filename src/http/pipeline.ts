/**
 * The request flow, once for every route (docs/architecture.md): match the
 * route table, start the trace, run the limits before authentication, run
 * the hooks, authenticate, run the limits around the handler, run the
 * handler, and turn whatever came out, answer or error, into one `Response`
 * in the JSON shape of its endpoint.
 */
import { authenticate } from '../auth/basic-auth.js';
import { MerchantApiError } from '../errors.js';
import type { LimitPoints } from '../limits/limit.js';
import { noteRefusal, Refusal } from '../limits/refusal.js';
import { heldBack } from '../limits/tarpit.js';
import { describeError, type Logger } from '../observe/logger.js';
import { createMatcher, NOT_FOUND } from '../routes/match.js';
import type { HandlerDeps, Route } from '../routes/route.js';
import { allowedMethods } from '../routes/table.js';
import { createContext, type RequestContext, type RequestInfo } from './context.js';
import { errorReply, isUnavailable } from './error-reply.js';
import { HookAnswer, type MerchantApiHooks } from './hooks.js';
import { toResponse, type ErrorShape, type Reply } from './responses.js';
import { matchPath, splitUrl } from './url.js';
import type { MerchantLookup } from '../storage/contract.js';

/** The lookup after a key matched none of the merchant's (cached) keys. */
const REFRESH: MerchantLookup = Object.freeze({ refresh: true });

export interface PipelineParts {
  routes: readonly Route[];
  deps: HandlerDeps;
  hooks: MerchantApiHooks;
  logger: Logger;
  basePath: string;
  trustProxy: boolean;
  /** Every limit, at its points (src/limits/limit.ts). */
  limits: LimitPoints;
  /** Starts the request's trace span, before any limit can refuse it; undefined when tracing is off. */
  begin: ((ctx: RequestContext) => void) | undefined;
  /** Where each streamed answer still being written leaves the function that cuts it (`abortStreams`). */
  inFlight: Set<() => void>;
}

/** A reply, and what to call once its body is handed over (a slot to give back). */
type Answer = Reply & { release?: () => void };

export function createPipeline(parts: PipelineParts): (request: Request, info?: RequestInfo) => Promise<Response> {
  const { deps, hooks, logger, basePath, trustProxy, begin } = parts;
  const { beforeAuthentication, aroundHandler, onConnection, afterAnswer } = parts.limits;
  const match = createMatcher(parts.routes);
  const { onRequest, onError, onFinish, onResponse } = hooks;

  /** Everything up to the reply; throws for errors. Not async: fewer promises on the hot path. */
  function run(ctx: RequestContext, route: Route, path: string, search: string, origin: string, params: Record<string, string>): Answer | Promise<Answer> {
    if (route.auth !== 'basic') return route.handle(ctx, { path, search, origin, params, merchant: undefined }, deps);
    return authenticate(ctx, (id, refresh) => deps.storage(ctx).getMerchant(id, refresh ? REFRESH : undefined)).then(async (merchant): Promise<Answer> => {
      const release = aroundHandler?.(ctx, merchant.id, route.limit);
      try {
        const hooked = deps.authenticated(ctx, merchant.id);
        if (hooked) await hooked;
        const answer = await route.handle(ctx, { path, search, origin, params, merchant }, deps);
        // A copy: handlers may answer with a shared constant reply.
        return release ? { ...answer, release } : answer;
      } catch (error) {
        release?.();
        throw error;
      }
    });
  }

  function failed(ctx: RequestContext, error: unknown, shape: ErrorShape): Reply | Response {
    if (error instanceof HookAnswer) return error.response;
    if (error instanceof MerchantApiError) {
      if (error instanceof Refusal) noteRefusal(logger, ctx, error.reason);
      // Logs, hooks and traces name the code the client got: a 503 is `storage_unavailable` whatever it carries.
      ctx.errorCode = isUnavailable(error) ? 'storage_unavailable' : error.code;
    } else {
      ctx.errorCode = 'internal_error';
      logger.error({ event: 'unexpected_error', request_id: ctx.requestId, route: ctx.route ?? null, ...describeError(error) });
    }
    if (onError) safely('onError', () => onError(ctx, error));
    return errorReply(error, shape);
  }

  function safely(hook: string, call: () => void): void {
    try {
      call();
    } catch (error) {
      logger.error({ event: 'hook_failed', hook, ...describeError(error) });
    }
  }

  /**
   * Called once the body is handed over in full (or cut): gives back the
   * slot, logs a cut stream, runs onFinish. An answer the adapter will not
   * send (`unsent`) is finished as cut, with nothing handed over.
   */
  function finisher(ctx: RequestContext, status: number, started: number, release: (() => void) | undefined, unsent: boolean) {
    return (bytes: number, aborted: boolean) => {
      release?.();
      if (aborted) logger.error({ event: 'stream_aborted', request_id: ctx.requestId, route: ctx.route ?? null, bytes });
      if (onFinish) safely('onFinish', () => onFinish(ctx, { status, bytes, durationMs: performance.now() - started, aborted: aborted || unsent }));
    };
  }

  function respond(ctx: RequestContext, answer: Answer | Response, head: boolean, started: number, unsent: boolean): Response {
    if (ctx.authFailure !== undefined) {
      logger.warn({ event: 'auth_failed', reason: ctx.authFailure, request_id: ctx.requestId, route: ctx.route ?? null, client_address: ctx.clientAddress ?? null });
    }
    let response: Response;
    if (answer instanceof Response) {
      response = answer;
      finisher(ctx, response.status, started, undefined, unsent)(unsent ? 0 : Number(response.headers.get('content-length') ?? 0), false);
    } else {
      const extra: Record<string, string> = { 'x-request-id': ctx.requestId, 'x-content-type-options': 'nosniff' };
      // Served over TLS (here or at a proxy the URL reflects): browsers are told to keep to HTTPS.
      if (ctx.request.url.startsWith('https:')) extra['strict-transport-security'] = 'max-age=31536000';
      const done = onFinish || answer.release ? finisher(ctx, answer.status, started, answer.release, unsent) : undefined;
      // An answer that will not be sent is made as for HEAD: no body is built, and none is counted.
      response = toResponse(answer, head || unsent, extra, done, parts.inFlight);
    }
    if (!onResponse) return response;
    try {
      return onResponse(ctx, response) ?? response;
    } catch (error) {
      logger.error({ event: 'hook_failed', hook: 'onResponse', ...describeError(error) });
      return response;
    }
  }

  return async function fetch(request: Request, info?: RequestInfo): Promise<Response> {
    const started = performance.now();
    const ctx = createContext(request, info, trustProxy);
    const head = request.method === 'HEAD';
    let shape: ErrorShape = 'envelope';
    let answer: Answer | Response;
    try {
      if (info?.refusal) {
        if (info.connectionLimit !== undefined) noteRefusal(logger, ctx, info.connectionLimit, false);
        throw info.refusal;
      }
      const { origin, path: received, search } = splitUrl(request.url);
      // The path the merchant called, the base path put back where a mount stripped it.
      const located = info?.dotSegments ? undefined : matchPath(match, received, basePath, info?.pathAsSent === true);
      if (!located) throw NOT_FOUND;
      const { found: { route, params }, path } = located;
      ctx.route = route.pattern;
      // First: a request refused by a limit is traced too (docs/observability.md#traces).
      begin?.(ctx);
      shape = route.errorShape;
      if (request.method !== route.method && !(head && route.method === 'GET')) {
        const allow = allowedMethods(route);
        throw new MerchantApiError('method_not_allowed', `Only ${allow.replace(', ', ' and ')} are allowed here.`, { allow });
      }
      beforeAuthentication?.(ctx, route.auth, search);
      if (onRequest) {
        const early = onRequest(ctx);
        const answered = early instanceof Promise ? await early : early;
        if (answered) throw new HookAnswer(answered);
      }
      answer = await run(ctx, route, path, search, origin, params);
    } catch (error) {
      answer = failed(ctx, error, shape);
      // A connection refused by the adapter's cap is closed after this answer: no request comes back on it to hold back.
      const wait = onConnection && info?.connectionLimit === undefined && onConnection(ctx, error);
      if (wait) await heldBack(wait);
    }
    // A failure shared through a store is answered once the store has it (bounded).
    const counted = afterAnswer?.(ctx);
    if (counted) await counted;
    return respond(ctx, answer, head, started, info?.unsent === true);
  };
}
