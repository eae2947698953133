/**
 * Groups the calls that wait for the database into one statement (docs/benchmarks.md#mysql): a call goes
 * out at once while fewer than `concurrency` statements are in flight, else it waits and goes
 * with the others waiting in the next one. On a loaded server a round trip, a statement and a
 * commit then serve many requests; a lone request waits on no timer, so it pays nothing.
 */
import { StorageUnavailableError } from '../../errors.js';

/** Bounds of a batcher. */
export interface BatchOptions {
  /** Statements in flight at once: the pool connections the batcher may hold. */
  concurrency: number;
  /** Calls per statement: bounds its size and what one failure touches. */
  maxBatch: number;
  /** Calls that may wait; beyond, a call is refused as unavailable storage (the database has fallen behind). */
  maxWaiting: number;
  /** The database the calls wait for, as the refusal names it (`MySQL`). */
  database: string;
}

/** One waiting call: what it asks, and how to answer it. */
export interface Waiting<T, R> {
  item: T;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

/**
 * Batches calls for `write`, which must settle every call of the batch it is given; a call it
 * leaves unsettled when it throws gets its error.
 */
export class StatementBatcher<T, R> {
  readonly #write: (batch: Waiting<T, R>[]) => Promise<void>;
  readonly #options: Omit<BatchOptions, 'database'>;
  readonly #refusal: string;
  #waiting: Waiting<T, R>[] = [];
  #inFlight = 0;

  constructor(write: (batch: Waiting<T, R>[]) => Promise<void>, options: BatchOptions) {
    this.#write = write;
    this.#options = { concurrency: Math.max(1, options.concurrency), maxBatch: Math.max(1, options.maxBatch), maxWaiting: Math.max(1, options.maxWaiting) };
    this.#refusal = `Too many requests are waiting for ${options.database}.`;
  }

  /** The answer `write` gives for `item`. */
  add(item: T): Promise<R> {
    if (this.#waiting.length >= this.#options.maxWaiting) return Promise.reject(new StorageUnavailableError(this.#refusal));
    return new Promise<R>((resolve, reject) => {
      this.#waiting.push({ item, resolve, reject });
      this.#send();
    });
  }

  #send(): void {
    const { concurrency, maxBatch } = this.#options;
    while (this.#inFlight < concurrency && this.#waiting.length > 0) {
      const batch = this.#waiting.length <= maxBatch ? this.#waiting : this.#waiting.slice(0, maxBatch);
      this.#waiting = batch === this.#waiting ? [] : this.#waiting.slice(maxBatch);
      this.#inFlight++;
      this.#write(batch)
        .catch((error: unknown) => {
          for (const each of batch) each.reject(error);
        })
        .finally(() => {
          this.#inFlight--;
          this.#send();
        });
    }
  }
}
