/**
 * The access log: one line per request, health checks included
 * (docs/observability.md#access-log). The route is the pattern, never the
 * raw path or query: those hold user ids and signatures.
 */
import type { RequestContext } from './context.js';
import type { MerchantApiHooks, RequestSummary } from './hooks.js';
import type { Logger } from './logger.js';

export function accessLogHooks(logger: Logger): MerchantApiHooks {
  return {
    onFinish(ctx: RequestContext, summary: RequestSummary) {
      const line: Record<string, unknown> = {
        event: 'request',
        request_id: ctx.requestId,
        method: ctx.method,
        route: ctx.route ?? null,
        status: summary.status,
        duration_ms: Math.round(summary.durationMs * 1000) / 1000,
        bytes: summary.bytes,
      };
      if (ctx.merchantId !== undefined) line.merchant_id = ctx.merchantId;
      if (ctx.clientAddress !== undefined) line.client_address = ctx.clientAddress;
      if (ctx.errorCode !== undefined) line.code = ctx.errorCode;
      if (summary.aborted) line.aborted = true;
      logger.info(line);
    },
  };
}
