/**
 * What every limit does when it refuses a request: note the reason on the
 * context (for the access log and metrics) and log one `throttled` event.
 */
import type { RequestContext } from '../http/context.js';
import type { Logger } from '../observe/logger.js';

export function noteRefusal(logger: Logger, ctx: RequestContext, reason: string): void {
  ctx.throttled = reason;
  logger.warn({ event: 'throttled', reason, request_id: ctx.requestId, route: ctx.route ?? null, client_address: ctx.clientAddress ?? null });
}
