/**
 * The last step of every request: the `Response` of its answer, with the
 * headers every answer has, the `auth_failed` event, and what runs once the
 * body is handed over (the slot given back, a cut stream logged, `onFinish`);
 * then `onResponse`, which may answer another `Response`. A host that writes
 * the answer itself (the Node adapter's direct path) gets it without the
 * `Response` when nothing needs one (`direct`).
 */
import type { RequestContext } from '../http/context.js';
import type { MerchantApiHooks } from '../http/hooks.js';
import { byteLength, isWholeBody, toResponse, type Reply, type WholeBody } from '../http/responses.js';
import { describeError, type Logger } from '../observe/logger.js';

/** A reply, and what to call once its body is handed over (a limit's slot to give back). */
export type Answer = Reply & { release?: () => void };

/**
 * The answer with other headers or a slot to give back, in an object of one
 * fixed shape. Not `{ ...answer, headers }`: V8 gives the clone of a clone
 * with a property added a hidden class of its own on every request, and the
 * single-user read paid about 8 µs for it in the steps that read the answer
 * after (docs/benchmarks.md#hidden-classes-per-request-6-december-2026).
 */
export function answerWith(answer: Answer, status: number, body: Answer['body'], headers: Answer['headers'], release: Answer['release']): Answer {
  return { status, body, headers, validator: answer.validator, release };
}

/**
 * `unsent`: the adapter will not send the answer; it is finished as cut, with nothing handed over.
 * `secure`: the request came over TLS (here or at a proxy its URL reflects).
 */
export type Respond = (ctx: RequestContext, answer: Answer | Response, head: boolean, started: number, unsent: boolean, secure: boolean) => Response;

/**
 * An answer a host writes itself (the Node adapter's direct path): the
 * status, the headers and the whole body (undefined for HEAD), exactly what
 * the `Response` of the same answer would carry.
 */
export interface DirectReply {
  status: number;
  headers: Record<string, string>;
  body: WholeBody | undefined;
}

/**
 * The answer as a `DirectReply` where nothing needs a `Response`: a whole
 * body, and no `onResponse` hook to hand one to. Otherwise the `Response`
 * (a stream, a hook's own `Response`).
 */
export type RespondDirect = (ctx: RequestContext, answer: Answer | Response, head: boolean, started: number, secure: boolean) => DirectReply | Response;

export function responder(logger: Logger, hooks: MerchantApiHooks, inFlight: Set<() => void>): { respond: Respond; direct: RespondDirect } {
  const { onFinish, onResponse } = hooks;

  /** What runs once the body is handed over in full (or cut). */
  function finish(ctx: RequestContext, status: number, started: number, release: (() => void) | undefined, unsent: boolean, bytes: number, aborted: boolean): void {
    release?.();
    if (aborted) logger.error({ event: 'stream_aborted', request_id: ctx.requestId, route: ctx.route ?? null, bytes });
    if (onFinish) {
      const summary = { status, bytes, durationMs: performance.now() - started, aborted: aborted || unsent };
      // Not `safely(() => ...)`: no closure per request on the common path.
      try {
        onFinish(ctx, summary);
      } catch (error) {
        logger.error({ event: 'hook_failed', hook: 'onFinish', ...describeError(error) });
      }
    }
  }

  /** `finish` as the callback of a body handed over later (a stream, a `Response`). */
  function finisher(ctx: RequestContext, status: number, started: number, release: (() => void) | undefined, unsent: boolean) {
    return (bytes: number, aborted: boolean) => finish(ctx, status, started, release, unsent, bytes, aborted);
  }

  function noteAuthFailure(ctx: RequestContext): void {
    if (ctx.authFailure !== undefined) {
      logger.warn({ event: 'auth_failed', reason: ctx.authFailure, request_id: ctx.requestId, route: ctx.route ?? null, client_address: ctx.clientAddress ?? null });
    }
  }

  /** The headers every answer of the pipeline carries; `own`, the answer's, for the RateLimit fields of a limit the request holds. */
  function extraHeaders(ctx: RequestContext, secure: boolean, own?: Record<string, string>): Record<string, string> {
    const extra: Record<string, string> = { 'x-request-id': ctx.requestId, 'x-content-type-options': 'nosniff' };
    // Served over TLS (here or at a proxy the URL reflects): browsers are told to keep to HTTPS.
    if (secure) extra['strict-transport-security'] = 'max-age=31536000';
    if (ctx.rateLimit) addRateLimit(extra, ctx.rateLimit, own);
    return extra;
  }

  function asResponse(ctx: RequestContext, answer: Answer | Response, head: boolean, started: number, unsent: boolean, secure: boolean): Response {
    let response: Response;
    if (answer instanceof Response) {
      response = answer;
      finisher(ctx, response.status, started, undefined, unsent)(unsent ? 0 : Number(response.headers.get('content-length') ?? 0), false);
    } else {
      const done = onFinish || answer.release ? finisher(ctx, answer.status, started, answer.release, unsent) : undefined;
      // An answer that will not be sent is made as for HEAD: no body is built, and none is counted.
      response = toResponse(answer, head || unsent, extraHeaders(ctx, secure, answer.headers), done, inFlight);
    }
    if (!onResponse) return response;
    try {
      return onResponse(ctx, response) ?? response;
    } catch (error) {
      logger.error({ event: 'hook_failed', hook: 'onResponse', ...describeError(error) });
      return response;
    }
  }

  /** A 304 as the host writes it: the headers of toResponse without a type or a length, and no body (RFC 9110 §15.4.5). */
  function notModified(ctx: RequestContext, answer: Answer, started: number, secure: boolean): DirectReply {
    const headers: Record<string, string> = { 'cache-control': 'no-store', ...answer.headers, ...extraHeaders(ctx, secure, answer.headers) };
    if (onFinish || answer.release) finish(ctx, 304, started, answer.release, false, 0, false);
    return { status: 304, headers, body: undefined };
  }

  return {
    respond(ctx, answer, head, started, unsent, secure) {
      noteAuthFailure(ctx);
      return asResponse(ctx, answer, head, started, unsent, secure);
    },
    direct(ctx, answer, head, started, secure) {
      noteAuthFailure(ctx);
      if (onResponse || answer instanceof Response || !isWholeBody(answer.body) || answer.status === 204) return asResponse(ctx, answer, head, started, false, secure);
      // A 304 here rather than as a Response: @hono/node-server gives a bodiless Response a text/plain type.
      if (answer.status === 304) return notModified(ctx, answer, started, secure);
      // The headers of toResponse for a whole body, in the same order, built in one object: no
      // Response, no object of extra headers copied in, no finishing callback.
      const length = byteLength(answer.body);
      let headers: Record<string, string>;
      if (answer.headers === undefined && !secure && ctx.rateLimit === undefined) {
        // The common answer: one object of its final size, made at once.
        headers = { 'content-type': 'application/json', 'cache-control': 'no-store', 'x-request-id': ctx.requestId, 'x-content-type-options': 'nosniff', 'content-length': String(length) };
      } else {
        headers = { 'content-type': 'application/json', 'cache-control': 'no-store' };
        if (answer.headers) Object.assign(headers, answer.headers);
        headers['x-request-id'] = ctx.requestId;
        headers['x-content-type-options'] = 'nosniff';
        if (secure) headers['strict-transport-security'] = 'max-age=31536000';
        if (ctx.rateLimit) addRateLimit(headers, ctx.rateLimit, answer.headers);
        headers['content-length'] = String(length);
      }
      if (onFinish || answer.release) finish(ctx, answer.status, started, answer.release, false, head ? 0 : length, false);
      return { status: answer.status, headers, body: head ? undefined : answer.body };
    },
  };
}

/**
 * Writes into `headers` the RateLimit fields of the limit the request holds,
 * before those of a limit that refused it (`own`, a 429's): one list per
 * field, as the draft allows, so both policies are named.
 */
function addRateLimit(headers: Record<string, string>, limit: { policy: string; state: string }, own: Record<string, string> | undefined): void {
  const policy = own?.['ratelimit-policy'];
  const state = own?.ratelimit;
  headers['ratelimit-policy'] = policy === undefined ? limit.policy : `${limit.policy}, ${policy}`;
  headers.ratelimit = state === undefined ? limit.state : `${limit.state}, ${state}`;
}
