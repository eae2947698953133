/**
 * How a limit refuses, and how the refusal is noted: one way for every limit
 * (docs/architecture.md#where-to-add). A limit throws a `Refusal`, a 429 that
 * names the limit; the pipeline notes it with `noteRefusal` wherever it was
 * thrown (before the handler, inside it, or inside a storage call), so the
 * `throttled` event, `merchant_api_throttled_total` and the access line's
 * `code` see every limit alike.
 */
import { MerchantApiError, type RateLimitPolicy } from '../errors.js';
import type { RequestContext } from '../http/context.js';
import type { Logger } from '../observe/logger.js';

/** A 429 that names the limit refusing: its `reason` is what the event and the metric say. */
export class Refusal extends MerchantApiError {
  readonly reason: string;

  constructor(reason: string, message: string, limit: { retryAfter: number; policy: RateLimitPolicy }) {
    super('too_many_requests', message, limit);
    this.reason = reason;
  }
}

/**
 * Notes a refusal on the context (the metric counts it under `reason`) and
 * logs one `throttled` event. `logged` false: the adapter's connection caps,
 * which report a cap once rather than a line per connection refused.
 */
export function noteRefusal(logger: Logger, ctx: RequestContext, reason: string, logged = true): void {
  ctx.throttled = reason;
  if (logged) logger.warn({ event: 'throttled', reason, request_id: ctx.requestId, route: ctx.route ?? null, client_address: ctx.clientAddress ?? null });
}
