/**
 * The request flow, once for every route (docs/architecture.md#one-request-through-the-files):
 * match the route table, start the trace, run the limits before
 * authentication, run the `onRequest` hooks, authenticate and run the
 * handler (authentication.ts), and turn whatever came out, answer or error
 * (failure.ts), into one `Response` in the JSON shape of its endpoint
 * (answer.ts), held back and counted by the limits on the way out.
 */
import { MerchantApiError } from '../errors.js';
import { createContext, createLazyContext, type LazySource, type RequestContext, type RequestInfo } from '../http/context.js';
import { UNREADABLE_FORWARDED_FOR } from '../http/forwarded-for.js';
import { HookAnswer, type MerchantApiHooks } from '../http/hooks.js';
import { allowedMethods, methodsInWords } from '../http/methods.js';
import type { ErrorShape } from '../http/responses.js';
import { matchPath, splitUrl } from '../http/url.js';
import type { LimitPoints } from '../limits/limit.js';
import { noteRefusal } from '../limits/refusal.js';
import { heldBack } from '../limits/tarpit.js';
import type { Logger } from '../observe/logger.js';
import { createMatcher, NOT_FOUND } from '../routes/match.js';
import type { HandlerDeps, Route } from '../routes/route.js';
import { responder, type Answer, type DirectReply } from './answer.js';
import { routeRunner } from './authentication.js';
import { failure } from './failure.js';

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

/**
 * A request a host hands over without a Fetch `Request` (the Node adapter's
 * direct path): its method, its URL as the `Request` constructor would
 * normalise it, a header reader, and how to make the `Request` should a
 * hook read `ctx.request` (made once: the same `Request` every time).
 */
export interface RequestHead extends LazySource {
  readonly url: string;
}

/**
 * Where a `MerchantApi` made by `createMerchantApi` keeps `Pipeline.direct`
 * for the Node adapter: not part of the public type, and a registered symbol,
 * so an API made by the ESM build is served directly by the CommonJS
 * adapter too. An object of the embedder's with only `fetch` is served
 * through `fetch`.
 */
export const DIRECT_ENTRY = Symbol.for('merchant-api.direct');

export interface Pipeline {
  /** `api.fetch`: every host's entry. */
  fetch(request: Request, info?: RequestInfo): Promise<Response>;
  /** The same pipeline for a host that writes the answer itself: a `DirectReply` where no `Response` is needed. */
  direct(head: RequestHead, info?: RequestInfo): Promise<DirectReply | Response>;
}

export function createPipeline(parts: PipelineParts): Pipeline {
  const { hooks, logger, basePath, trustProxy, begin } = parts;
  const { beforeAuthentication, onConnection, afterAnswer } = parts.limits;
  const match = createMatcher(parts.routes);
  const onRequest = hooks.onRequest;
  const run = routeRunner(parts.deps, parts.limits.aroundHandler);
  const failed = failure(logger, hooks.onError);
  const { respond, direct } = responder(logger, hooks, parts.inFlight);

  /**
   * Everything up to the answer, the same for both entries, then `finish`
   * (the entry's last step, one function per entry made once: no closure or
   * extra async step per request).
   */
  async function decide<R>(ctx: RequestContext, url: string, head: boolean, info: RequestInfo | undefined, started: number, finish: Finish<R>): Promise<R> {
    let shape: ErrorShape = 'envelope';
    let answer: Answer | Response;
    try {
      if (info?.refusal) {
        // The adapter's connection caps: noted as every limit's refusal, their event logged by the adapter once per cap.
        if (info.connectionLimit !== undefined) noteRefusal(logger, ctx, info.connectionLimit, false);
        throw info.refusal;
      }
      const { origin, path: received, search } = splitUrl(url);
      // The path the merchant called, the base path put back where a mount stripped it.
      const located = info?.dotSegments ? undefined : matchPath(match, received, basePath, info?.pathAsSent === true);
      if (!located) throw NOT_FOUND;
      const { found, path } = located;
      const { params } = found;
      ctx.route = found.route.pattern;
      // First: a request refused by a limit is traced too (docs/observability.md#traces).
      begin?.(ctx);
      shape = found.route.errorShape;
      // Behind a trusted proxy, an X-Forwarded-For that names no client left the address undefined: refused before any limit or key reads it.
      if (trustProxy && ctx.clientAddress === undefined && ctx.header('x-forwarded-for') !== null) throw UNREADABLE_FORWARDED_FOR;
      const route = found.routes.length === 1 ? found.route : routeFor(found.routes, ctx.method, head);
      if (route === undefined || (ctx.method !== route.method && !(head && route.method === 'GET'))) {
        const allow = allowedMethods(found.routes.map((r) => r.method));
        throw new MerchantApiError('method_not_allowed', `Only ${methodsInWords(allow)} ${allow.includes(',') ? 'are' : 'is'} allowed here.`, { allow });
      }
      // A promise only when a burst's check waits for another (src/limits/checks-in-flight.ts).
      const gate = beforeAuthentication?.(ctx, route.auth, search);
      if (gate) await gate;
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
      if (wait) {
        ctx.heldMs = wait;
        await heldBack(wait);
      }
    }
    // A failure shared through a store is answered once the store has it (bounded).
    const counted = afterAnswer?.(ctx);
    if (counted) await counted;
    return finish(ctx, answer, head, started, info, url);
  }

  const toResponse: Finish<Response> = (ctx, answer, head, started, info, url) => respond(ctx, answer, head, started, info?.unsent === true, url.startsWith('https:'));
  const toDirect: Finish<DirectReply | Response> = (ctx, answer, head, started, _info, url) => direct(ctx, answer, head, started, url.startsWith('https:'));

  return {
    fetch(request, info) {
      const started = performance.now();
      const ctx = createContext(request, info, trustProxy);
      return decide(ctx, request.url, ctx.method === 'HEAD', info, started, toResponse);
    },
    direct(source, info) {
      const started = performance.now();
      const ctx = createLazyContext(source, info, trustProxy);
      return decide(ctx, source.url, ctx.method === 'HEAD', info, started, toDirect);
    },
  };
}

/** An entry's last step: the decided answer as what the entry returns. */
type Finish<R> = (ctx: RequestContext, answer: Answer | Response, head: boolean, started: number, info: RequestInfo | undefined, url: string) => R;

/** The route of a path with several (one per method) that answers `method`; HEAD is answered by GET's. */
function routeFor(routes: readonly Route[], method: string, head: boolean): Route | undefined {
  return routes.find((r) => r.method === method || (head && r.method === 'GET'));
}
