/**
 * What the pipeline does with anything thrown while answering a request:
 * a hook's own `Response` is sent as it is; a limit's refusal is noted
 * (src/limits/refusal.ts); the code the client gets is noted for logs, hooks
 * and traces; anything but a `MerchantApiError` is logged as unexpected; the
 * `onError` hooks see it; and it becomes its reply in the route's shape.
 */
import { MerchantApiError } from '../errors.js';
import { errorReply, isUnavailable } from '../http/error-reply.js';
import type { RequestContext } from '../http/context.js';
import { HookAnswer, type MerchantApiHooks } from '../http/hooks.js';
import type { ErrorShape, Reply } from '../http/responses.js';
import { noteRefusal, Refusal } from '../limits/refusal.js';
import { describeError, type Logger } from '../observe/logger.js';

export type Failure = (ctx: RequestContext, error: unknown, shape: ErrorShape) => Reply | Response;

export function failure(logger: Logger, onError: MerchantApiHooks['onError']): Failure {
  return (ctx, error, shape) => {
    if (error instanceof HookAnswer) return error.response;
    if (error instanceof MerchantApiError) {
      if (error instanceof Refusal) noteRefusal(logger, ctx, error.reason);
      // Logs, hooks and traces name the code the client got: a 503 is `storage_unavailable` whatever it carries.
      ctx.errorCode = isUnavailable(error) ? 'storage_unavailable' : error.code;
    } else {
      ctx.errorCode = 'internal_error';
      logger.error({ event: 'unexpected_error', request_id: ctx.requestId, route: ctx.route ?? null, ...describeError(error) });
    }
    if (onError) safely(logger, 'onError', () => onError(ctx, error));
    return errorReply(error, shape);
  };
}

/** Runs a hook that may not answer: one that throws is logged and the request goes on. */
export function safely(logger: Logger, hook: string, call: () => void): void {
  try {
    call();
  } catch (error) {
    logger.error({ event: 'hook_failed', hook, ...describeError(error) });
  }
}
