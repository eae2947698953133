/**
 * The throttle's shared counters on MySQL (docs/security.md#sharing-the-counters-on-mysql):
 * failures and resets are written as they come (`throttle-queries.ts`); every
 * `pollIntervalMs` one read of the rows changed since the last read tells
 * each throttle of this process what the other instances did, so a block
 * made anywhere is enforced everywhere within about that interval; now and
 * then expired rows are deleted in bounded batches. Nothing runs while no
 * throttle listens, and the storage's `close()` stops it all.
 */
import type { Kysely } from 'kysely';
import { StorageUnavailableError } from '../../../errors.js';
import type { ReservationAnswer, ThrottleFailure, ThrottleRecord, ThrottleReservation, ThrottleRules, ThrottleStore, ThrottleStoreListener } from '../../throttle-store.js';
import { countThrottleFull, WeakListeners } from '../../throttle-store.js';
import { storageError } from '../sql-values.js';
import { mysqlErrorCode } from '../storage-error.js';
import { pruneAuthFailures, recordFailure, releaseChecks, reserveChecks, resetPair, selectActiveBlocks, selectChanges } from './throttle-queries.js';

/** Options of the shared throttle on MySQL (`MysqlStorageOptions.throttleSharing`). */
export interface MysqlThrottleOptions {
  /** How often each instance reads what the others changed, in ms (default 1000): how fast a block spreads. */
  pollIntervalMs?: number;
  /** Rows per read, and reads per interval at most (defaults 1000 and 10). */
  batchSize?: number;
  maxBatches?: number;
  /** How often expired rows are deleted, in ms (default 60,000), `batchSize` rows per statement, at most `maxBatches` statements. */
  pruneIntervalMs?: number;
}

/**
 * Each read starts this far before the newest change already read: a row's
 * `updated_at` is taken when its statement starts, so a statement still
 * running (a lock wait) commits a change older than one already read. An
 * upsert of one row takes far less; one that takes longer is read at its
 * row's next change, and the instance that made it enforces it anyway.
 */
const OVERLAP_MICROS = 2_000_000;
/** Tries of a statement InnoDB chose as a deadlock's victim. */
const DEADLOCK_TRIES = 5;
/** Most blocks an instance that starts reads at once. */
const MAX_ACTIVE_BLOCKS = 10_000;

export class MysqlThrottleStore implements ThrottleStore {
  readonly #db: Kysely<any>;
  readonly #poll: number;
  readonly #batchSize: number;
  readonly #maxBatches: number;
  readonly #pruneInterval: number;
  /** Weak: a handler nobody holds any more stops being told, and its throttle can be collected. */
  readonly #listeners = new WeakListeners();
  /** The newest `updated_at` read so far (undefined: none yet). */
  #cursor: string | undefined;
  #lastPrune = -Infinity;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #running: Promise<void> | undefined;
  /**
   * Queries under way (writes and reads the handlers asked for), so that `close()` waits for them:
   * the storage ends the pool right after, and mysql2's end queues a QUIT behind a statement still
   * running, which then gets that statement's raw driver error (a reset connection) instead of ending.
   */
  readonly #inFlight = new Set<Promise<unknown>>();
  #closed = false;

  constructor(db: Kysely<any>, options: MysqlThrottleOptions = {}) {
    this.#db = db;
    this.#poll = options.pollIntervalMs ?? 1000;
    this.#batchSize = options.batchSize ?? 1000;
    this.#maxBatches = options.maxBatches ?? 10;
    this.#pruneInterval = options.pruneIntervalMs ?? 60_000;
    for (const [name, value] of Object.entries({ pollIntervalMs: this.#poll, batchSize: this.#batchSize, maxBatches: this.#maxBatches, pruneIntervalMs: this.#pruneInterval })) {
      if (!Number.isInteger(value) || value < 1) throw new TypeError(`throttleSharing.${name} must be a whole number, at least 1.`);
    }
  }

  recordFailure(failure: ThrottleFailure, rules: ThrottleRules): Promise<readonly ThrottleRecord[]> {
    return this.#query('throttle failure', () => recordFailure(this.#db, failure, rules, () => this.#full(rules.maxEntries)));
  }

  reserveChecks(reservation: ThrottleReservation, rules: ThrottleRules): Promise<ReservationAnswer> {
    return this.#query('throttle reservation', () => reserveChecks(this.#db, reservation, rules), true);
  }

  releaseChecks(reservation: ThrottleReservation): Promise<void> {
    return this.#query('throttle reservation release', () => releaseChecks(this.#db, reservation));
  }

  resetPair(address: string, merchantId: string, now: number): Promise<readonly ThrottleRecord[]> {
    return this.#query('throttle reset', () => resetPair(this.#db, address, merchantId, now));
  }

  activeBlocks(now: number): Promise<readonly ThrottleRecord[]> {
    return this.#query('throttle blocks read', () => selectActiveBlocks(this.#db, now, MAX_ACTIVE_BLOCKS));
  }

  /** The census refused a row (docs/scaling.md#the-throttles-keys): the failure is counted by each instance alone. */
  #full(cap: number): void {
    countThrottleFull();
    for (const listener of this.#listeners.live()) listener.full?.(cap);
  }

  subscribe(listener: ThrottleStoreListener): () => void {
    if (this.#closed) return () => undefined;
    const remove = this.#listeners.add(listener);
    this.#schedule();
    return remove;
  }

  /** Deletes expired rows now, in bounded batches; resolves to how many went. */
  prune(): Promise<number> {
    return this.#query('throttle pruning', () => pruneAuthFailures(this.#db, this.#batchSize, this.#maxBatches), true);
  }

  /** Stops reading and waits for a read and the queries under way (each bounded by the pool's query timeout). */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
    // Their failures went to their callers already.
    await Promise.allSettled(this.#inFlight);
  }

  /** `#attempts`, counted in `#inFlight` while it runs. */
  async #query<T>(operation: string, run: () => Promise<T>, idempotent = false): Promise<T> {
    if (this.#closed) throw new StorageUnavailableError('The MySQL storage is closed.');
    const running = this.#attempts(operation, run, idempotent);
    this.#inFlight.add(running);
    try {
      return await running;
    } finally {
      this.#inFlight.delete(running);
    }
  }

  /** `idempotent`: the whole of `run` may run again after a deadlock (a transaction, or one statement). */
  async #attempts<T>(operation: string, run: () => Promise<T>, idempotent: boolean): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await run();
      } catch (error) {
        // A burst's first writes of one row race for its gap, and the pruning's deletes cross
        // them: InnoDB picks a victim, whose statement is simply run again (each is atomic).
        if (idempotent && attempt < DEADLOCK_TRIES && mysqlErrorCode(error) === 'ER_LOCK_DEADLOCK') {
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt));
          continue;
        }
        throw storageError(error, operation);
      }
    }
  }

  #schedule(): void {
    if (this.#closed || this.#timer !== undefined || this.#running !== undefined || this.#listeners.size === 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#running = this.#readAndPrune().finally(() => {
        this.#running = undefined;
        this.#schedule();
      });
    }, this.#poll);
    // The reading alone never keeps a process alive (Node and Bun; Deno's timers have no unref).
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /** One interval's work; failures go to the listeners, and the next interval tries again. */
  async #readAndPrune(): Promise<void> {
    const listeners = this.#listeners.live();
    if (listeners.length === 0) return;
    try {
      const records = await this.#readChanges();
      for (const listener of listeners) listener.learn(records);
    } catch (error) {
      for (const listener of listeners) listener.failed(storageError(error, 'throttle changes read'));
      return;
    }
    if (performance.now() - this.#lastPrune < this.#pruneInterval) return;
    this.#lastPrune = performance.now();
    await this.prune().catch((error: unknown) => {
      for (const listener of listeners) listener.failed(error);
    });
  }

  /** The rows changed since the last read, at most `maxBatches` reads of `batchSize`; the rest is read next time. */
  async #readChanges(): Promise<ThrottleRecord[]> {
    const records: ThrottleRecord[] = [];
    let overlap = OVERLAP_MICROS;
    for (let batch = 0; batch < this.#maxBatches && !this.#closed; batch++) {
      const rows = await selectChanges(this.#db, this.#cursor, overlap, this.#batchSize);
      records.push(...rows);
      const newest = rows.at(-1)?.version;
      if (newest !== undefined && (this.#cursor === undefined || newest > this.#cursor)) this.#cursor = newest;
      if (rows.length < this.#batchSize) break;
      // A full batch: go on from the newest change read (ties included), not back by the overlap
      // again, so a burst larger than a batch within the overlap still moves forward.
      overlap = 0;
    }
    return records;
  }
}
