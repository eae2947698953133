/**
 * Listings one merchant may run at once (`merchantConcurrency`,
 * docs/security.md#throttling): a listing holds its slot until its answer
 * is finished, streamed or not, so one merchant cannot keep every storage
 * connection busy with exports; the next one gets 429 at once.
 */
import { MerchantApiError } from '../errors.js';
import type { RequestContext } from '../http/context.js';
import type { Logger } from '../observe/logger.js';
import { noteRefusal } from './refusal.js';

export class ListingSlots {
  readonly #limit: number;
  readonly #logger: Logger;
  /** Listings running now, by merchant; entries leave at zero, so this stays small. */
  readonly #running = new Map<string, number>();

  constructor(limit: number, logger: Logger) {
    if (!Number.isInteger(limit) || limit < 1) throw new TypeError('merchantConcurrency must be a whole number, at least 1.');
    this.#limit = limit;
    this.#logger = logger;
  }

  /** Takes one of the merchant's slots, or throws the 429; call the function returned once the answer is finished (twice is harmless). */
  take(ctx: RequestContext, merchantId: string): () => void {
    const running = this.#running.get(merchantId) ?? 0;
    if (running >= this.#limit) {
      noteRefusal(this.#logger, ctx, 'merchant_concurrency');
      throw new MerchantApiError('too_many_requests', `At most ${this.#limit} listings of one merchant run at once; retry when one has finished.`, {
        retryAfter: 1,
        policy: { name: 'listings', quota: this.#limit },
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
