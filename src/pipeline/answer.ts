/**
 * The last step of every request: the `Response` of its answer, with the
 * headers every answer has, the `auth_failed` event, and what runs once the
 * body is handed over (the slot given back, a cut stream logged, `onFinish`);
 * then `onResponse`, which may answer another `Response`.
 */
import type { RequestContext } from '../http/context.js';
import type { MerchantApiHooks } from '../http/hooks.js';
import { toResponse, type Reply } from '../http/responses.js';
import { describeError, type Logger } from '../observe/logger.js';
import { safely } from './failure.js';

/** A reply, and what to call once its body is handed over (a limit's slot to give back). */
export type Answer = Reply & { release?: () => void };

/** `unsent`: the adapter will not send the answer; it is finished as cut, with nothing handed over. */
export type Respond = (ctx: RequestContext, answer: Answer | Response, head: boolean, started: number, unsent: boolean) => Response;

export function responder(logger: Logger, hooks: MerchantApiHooks, inFlight: Set<() => void>): Respond {
  const { onFinish, onResponse } = hooks;

  /** Called once the body is handed over in full (or cut). */
  function finisher(ctx: RequestContext, status: number, started: number, release: (() => void) | undefined, unsent: boolean) {
    return (bytes: number, aborted: boolean) => {
      release?.();
      if (aborted) logger.error({ event: 'stream_aborted', request_id: ctx.requestId, route: ctx.route ?? null, bytes });
      if (onFinish) safely(logger, 'onFinish', () => onFinish(ctx, { status, bytes, durationMs: performance.now() - started, aborted: aborted || unsent }));
    };
  }

  return (ctx, answer, head, started, unsent) => {
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
      response = toResponse(answer, head || unsent, extra, done, inFlight);
    }
    if (!onResponse) return response;
    try {
      return onResponse(ctx, response) ?? response;
    } catch (error) {
      logger.error({ event: 'hook_failed', hook: 'onResponse', ...describeError(error) });
      return response;
    }
  };
}
