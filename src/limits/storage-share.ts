/**
 * One merchant may hold at most half of the storage's connections
 * (docs/security.md#fair-sharing): its further calls wait in a queue of its
 * own instead of the pool's, so another merchant's call finds a free
 * connection however many requests the first one sends. Bounded: past
 * `maxWaiting` queued calls the merchant gets 429 at once.
 */
import type { Limit } from './limit.js';
import { Refusal } from './refusal.js';

export class MerchantStorageShare implements Limit {
  /** Calls one merchant may have running at once. */
  readonly limit: number;
  readonly #maxWaiting: number;
  readonly #running = new Map<string, number>();
  readonly #waiting = new Map<string, (() => void)[]>();

  /** `connections`: what the storage can run at once (a pool's size); one merchant gets half, at least one. */
  constructor(connections: number, maxWaiting = 1000) {
    if (!Number.isInteger(connections) || connections < 1) throw new TypeError('The storage concurrency must be a whole number, at least 1.');
    this.limit = Math.max(1, Math.floor(connections / 2));
    this.#maxWaiting = maxWaiting;
  }

  /** An authenticated request's calls run within its merchant's share, any other as it comes. */
  aroundStorageCall<T>(ctx: { readonly merchantId: string | undefined }, call: () => Promise<T>): Promise<T> {
    return ctx.merchantId === undefined ? call() : this.run(ctx.merchantId, call);
  }

  /** Runs `call` once the merchant is under its share. */
  async run<T>(merchantId: string, call: () => Promise<T>): Promise<T> {
    const running = this.#running.get(merchantId) ?? 0;
    if (running >= this.limit) await this.#wait(merchantId);
    else this.#running.set(merchantId, running + 1);
    try {
      return await call();
    } finally {
      this.#release(merchantId);
    }
  }

  #wait(merchantId: string): Promise<void> {
    let queue = this.#waiting.get(merchantId);
    if (queue === undefined) this.#waiting.set(merchantId, (queue = []));
    if (queue.length >= this.#maxWaiting) {
      throw new Refusal('storage_share', `This merchant already has ${queue.length} storage calls waiting for its share of the storage's connections; retry shortly.`, {
        retryAfter: 1,
        policy: { name: 'storage-share', quota: this.limit },
      });
    }
    // The slot is handed over by #release without being given back in between.
    return new Promise((resolve) => queue.push(resolve));
  }

  #release(merchantId: string): void {
    const queue = this.#waiting.get(merchantId);
    const next = queue?.shift();
    if (next !== undefined) {
      if (queue!.length === 0) this.#waiting.delete(merchantId);
      next();
      return;
    }
    const left = (this.#running.get(merchantId) ?? 1) - 1;
    if (left <= 0) this.#running.delete(merchantId);
    else this.#running.set(merchantId, left);
  }

  /** Calls running and waiting for a merchant, for tests and monitoring. */
  usage(merchantId: string): { running: number; waiting: number } {
    return { running: this.#running.get(merchantId) ?? 0, waiting: this.#waiting.get(merchantId)?.length ?? 0 };
  }
}
