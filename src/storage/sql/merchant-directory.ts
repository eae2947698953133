/**
 * Every merchant id, read at most `ttlMs` ago, so that an id no merchant
 * has is answered unknown without a query: guessing new ids costs no
 * database work and answers as fast as a wrong key for a known merchant.
 *
 * The price is the key cache's: a merchant added by another process (the
 * CLI, another instance) is unknown to this one until its next read, at
 * most `ttlMs` later. The list is read again by the first lookup after it
 * is `ttlMs` old; until that read is done, lookups go to the database as
 * without the list. With more than `maxIds` merchants the list is not kept
 * (each unknown id then costs a primary-key read, cached as absent).
 */

export interface MerchantDirectoryOptions {
  /** How old the list may be; 0 or less keeps no list. */
  ttlMs: number;
  /** Reads up to `limit` merchant ids. */
  readIds: (limit: number) => Promise<string[]>;
  /** Most ids kept. Default 100,000 (a few MB; one read of them every `ttlMs`). */
  maxIds?: number;
  clock?: () => number;
}

export class MerchantDirectory {
  readonly #ttlMs: number;
  readonly #readIds: (limit: number) => Promise<string[]>;
  readonly #maxIds: number;
  readonly #clock: () => number;
  #ids: Set<string> | undefined;
  /** When the read that gave `#ids` started: the list is at least as new as that. */
  #readAt = -Infinity;
  #reading: Promise<void> | undefined;
  /** A change made through this process since the list was read. */
  #generation = 0;

  constructor(options: MerchantDirectoryOptions) {
    this.#ttlMs = options.ttlMs;
    this.#readIds = options.readIds;
    this.#maxIds = options.maxIds ?? 100_000;
    this.#clock = options.clock ?? (() => performance.now());
  }

  /** False when no merchant had this id at most `ttlMs` ago; true when one may have it. */
  mayExist(id: string): boolean {
    if (this.#ttlMs <= 0) return true;
    if (this.#clock() - this.#readAt > this.#ttlMs) {
      this.#read();
      return true;
    }
    return this.#ids === undefined || this.#ids.has(id);
  }

  /** A merchant was added or changed through this process: the list is read again before it is trusted. */
  invalidate(): void {
    this.#generation++;
    this.#readAt = -Infinity;
    this.#ids = undefined;
  }

  /** Ids held, for tests; undefined while no list is trusted. */
  get size(): number | undefined {
    return this.#ids?.size;
  }

  /** The read to await in tests. */
  get reading(): Promise<void> | undefined {
    return this.#reading;
  }

  #read(): void {
    if (this.#reading) return;
    const startedAt = this.#clock();
    const generation = this.#generation;
    this.#reading = this.#readIds(this.#maxIds + 1)
      .then((ids) => {
        if (generation !== this.#generation) return;
        // Too many to keep: stay without a list, and ask again only after ttlMs.
        this.#ids = ids.length > this.#maxIds ? undefined : new Set(ids);
        this.#readAt = startedAt;
      })
      // The database is down: lookups go to it (and answer 503) until a read succeeds.
      .catch(() => {})
      .finally(() => {
        this.#reading = undefined;
      });
  }
}
