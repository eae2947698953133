/**
 * Listings one merchant may run at once (`merchantConcurrency`,
 * docs/security.md#throttling): a listing holds its slot until its answer
 * is finished, streamed or not, so one merchant cannot keep every storage
 * connection busy with exports; the next one gets 429 at once.
 */
import type { RequestContext } from '../http/context.js';
import type { Limit, RouteLimit } from './limit.js';
import { Refusal } from './refusal.js';

export class ListingSlots implements Limit {
  readonly #limit: number;
  /** `RateLimit-Policy` of the slots: a number of requests at once, not per time window. */
  readonly #policy: string;
  /** Listings running now, by merchant; entries leave at zero, so this stays small. */
  readonly #running = new Map<string, number>();

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new TypeError('merchantConcurrency must be a whole number, at least 1.');
    this.#limit = limit;
    this.#policy = `"listings";q=${limit};qu="concurrent-requests"`;
  }

  /**
   * On a route limited to `listings`: takes one of the merchant's slots, or
   * throws the 429; the request's answer says how many are left
   * (docs/protocol.md#ratelimit-fields).
   */
  aroundHandler(ctx: RequestContext, merchantId: string, routeLimit: RouteLimit | undefined): (() => void) | undefined {
    if (routeLimit !== 'listings') return undefined;
    const release = this.take(merchantId);
    ctx.rateLimit = { policy: this.#policy, state: `"listings";r=${this.#limit - this.#running.get(merchantId)!}` };
    return release;
  }

  /** Takes one of the merchant's slots, or throws the 429; call the function returned once the answer is finished (twice is harmless). */
  take(merchantId: string): () => void {
    const running = this.#running.get(merchantId) ?? 0;
    if (running >= this.#limit) {
      throw new Refusal('merchant_concurrency', `At most ${this.#limit} listings of one merchant run at once; retry when one has finished.`, {
        retryAfter: 1,
        policy: { name: 'listings', quota: this.#limit, unit: 'concurrent-requests' },
      });
    }
    this.#running.set(merchantId, running + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#running.get(merchantId) ?? 1) - 1;
      if (left <= 0) this.#running.delete(merchantId);
      else this.#running.set(merchantId, left);
    };
  }
}
