/**
 * The failed-authentication throttle shared through a store
 * (docs/security.md#sharing-the-counters-on-mysql). The local
 * `FailureThrottle` still answers every check, synchronously and without a
 * query; this layer reports each failure to the store, takes the store's
 * answer (which counts every instance's failures) as the local state, and
 * learns what the other instances changed. A success is reported only when a
 * count for its pair may exist, so the common request costs no query.
 * When the store fails, the local throttle goes on deciding alone: nothing a
 * request gets changes, and the outage is logged once.
 */
import { describeError, type Logger } from '../observe/logger.js';
import type { FailureThrottle, Block, Room } from './throttle.js';
import type { ThrottleRecord, ThrottleReservation, ThrottleRules, ThrottleStore, ThrottleStoreListener } from '../storage/throttle-store.js';

/** What the handler asks of a throttle, shared or not. */
export interface AuthThrottle {
  blocked(address: string, claimedMerchant: () => string | undefined, nowSeconds: number): Block | undefined;
  /** Failures left before a block of the address, and of the pair (`merchantId` as claimed, existing or not). */
  room(address: string, merchantId: string | undefined, nowSeconds: number): Room;
  /** The limits in force. */
  readonly rules: ThrottleRules;
  /** Whether anything is known of the address (src/limits/throttle.ts). */
  hasHistory(address: string): boolean;
  /**
   * May answer a promise: settled once the store has the failure (or gave up), so the answer can wait for it.
   * `reserved`: the check held a reservation, given back with the count.
   */
  failed(address: string, merchantId: string | undefined, nowSeconds: number, reserved?: { address: boolean; pair: boolean }): void | Promise<void>;
  succeeded(address: string, merchantId: string): void;
  /**
   * Only where a shared store can reserve (docs/security.md#ten-checks-even-all-at-once): whether
   * the checks may start, decided by the store over every instance. Undefined when the store fails
   * (nothing was reserved, forced checks neither): the local throttle decides alone meanwhile.
   */
  reserve?(reservation: ThrottleReservation): Promise<boolean | undefined>;
  /** Gives back reserved checks that ended without a failure; in the background. */
  release?(reservation: ThrottleReservation): void;
}

export interface ThrottleSharing {
  /** The storage's store (`storage.throttleStore?.()`); without one the throttle stays local. */
  store: ThrottleStore | undefined;
  /** The handler's clock, milliseconds. */
  now: () => number;
  logger: Logger;
}

/** A full store (`throttle_full`) is logged at most this often, ms. */
export const FULL_LOG_INTERVAL_MS = 60_000;
/** Store writes running at once: a slow database never takes the whole pool from the requests. */
export const MAX_REPORTS_IN_FLIGHT = 4;
/** The longest a failed authentication's answer waits for the store to have the failure, ms. */
export const REPORT_WAIT_MS = 1000;
/** Reports waiting for a slot; beyond this the store misses them (the local count still has them). */
export const MAX_REPORTS_QUEUED = 1000;

/** The local throttle, shared through `sharing.store` when the storage has one. */
export function shareThrottle(local: FailureThrottle, sharing: ThrottleSharing): AuthThrottle {
  if (sharing.store === undefined) return local;
  const shared = new SharedThrottle(local, sharing.store, sharing);
  // A store that cannot reserve: each process gets the limit in a burst it did not know of.
  if (sharing.store.reserveChecks === undefined) Object.assign(shared, { reserve: undefined, release: undefined });
  return shared;
}

/** A store call; `dropped` is told when the queue is full and the call will never run. */
type Report = (() => Promise<readonly ThrottleRecord[]>) & { dropped?: () => void };

class SharedThrottle implements AuthThrottle {
  readonly #local: FailureThrottle;
  readonly #store: ThrottleStore;
  readonly #logger: Logger;
  readonly #now: () => number;
  /** Held here: the store holds it weakly, so it lives exactly as long as this throttle. */
  readonly #listener: ThrottleStoreListener;
  readonly #queue: (() => void)[] = [];
  #inFlight = 0;
  #storeFailing = false;
  #dropping = false;
  #fullLoggedAt = -Infinity;
  #fullSinceLog = 0;

  constructor(local: FailureThrottle, store: ThrottleStore, { now, logger }: ThrottleSharing) {
    this.#local = local;
    this.#store = store;
    this.#logger = logger;
    this.#now = now;
    this.#listener = {
      learn: (records) => {
        for (const record of records) local.learn(record);
        this.#storeAnswered();
      },
      failed: (error) => this.#storeFailed(error),
      busy: (addresses) => {
        for (const address of addresses) local.busyElsewhere(address);
      },
      full: (cap) => this.#storeFull(cap),
    };
    store.subscribe(this.#listener);
    // Blocks made before this instance started apply here too.
    this.#enqueue(() => store.activeBlocks(Math.floor(now() / 1000)), false);
  }

  blocked(address: string, claimedMerchant: () => string | undefined, nowSeconds: number): Block | undefined {
    return this.#local.blocked(address, claimedMerchant, nowSeconds);
  }

  room(address: string, merchantId: string | undefined, nowSeconds: number): Room {
    return this.#local.room(address, merchantId, nowSeconds);
  }

  get rules(): ThrottleRules {
    return this.#local.rules;
  }

  hasHistory(address: string): boolean {
    return this.#local.hasHistory(address);
  }

  async reserve(reservation: ThrottleReservation): Promise<boolean | undefined> {
    // A failing store is not waited for on every check: the local throttle decides until it answers again.
    if (this.#storeFailing || this.#store.reserveChecks === undefined) return undefined;
    try {
      const answer = await this.#store.reserveChecks(reservation, this.#local.rules);
      // A read, not this instance's report: it makes a block longer, never lifts one.
      for (const record of answer.records) this.#local.learn(record);
      this.#storeAnswered();
      return answer.granted;
    } catch (error) {
      this.#storeFailed(error);
      return undefined;
    }
  }

  release(reservation: ThrottleReservation): void {
    if (this.#store.releaseChecks === undefined) return;
    this.#store.releaseChecks(reservation).catch((error: unknown) => this.#storeFailed(error));
  }

  failed(address: string, merchantId: string | undefined, nowSeconds: number, reserved?: { address: boolean; pair: boolean }): Promise<void> | undefined {
    // Counted here first: the block this failure completes applies at once, and stands if the store is down.
    this.#local.failed(address, merchantId, nowSeconds);
    const rules = this.#local.rules;
    // Answered, failed or dropped, the report ends: the local throttle takes its answers as they are again once none is left.
    const ended = () => this.#local.answered(address, merchantId);
    const report: Report = () => {
      try {
        return this.#store.recordFailure({ address, merchantId, now: nowSeconds, ...(reserved ? { reserved } : {}) }, rules).finally(ended);
      } catch (error) {
        ended();
        throw error;
      }
    };
    report.dropped = ended;
    // A store that is failing or behind is not waited for: the local count decides meanwhile.
    if (this.#storeFailing || this.#inFlight >= MAX_REPORTS_IN_FLIGHT) return void this.#enqueue(report, true);
    // Otherwise the answer waits for the store (at most REPORT_WAIT_MS): the
    // client's next request, to any instance, then finds the failure counted there.
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, REPORT_WAIT_MS);
      this.#enqueue(report, true, () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  succeeded(address: string, merchantId: string): void {
    if (!this.#local.succeeded(address, merchantId)) return;
    const now = Math.floor(this.#now() / 1000);
    this.#enqueue(() => this.#store.resetPair(address, merchantId, now), true);
  }

  /** `own`: a report of this instance's (src/limits/throttle.ts `learn`), not a read. */
  #enqueue(report: Report, own: boolean, settled?: () => void): void {
    const run = () => this.#run(report, own, settled);
    if (this.#inFlight < MAX_REPORTS_IN_FLIGHT) return run();
    if (this.#queue.length >= MAX_REPORTS_QUEUED) {
      if (!this.#dropping) this.#logger.warn({ event: 'throttle_store_behind', queued: this.#queue.length }, 'failures are counted in this instance only until the store catches up');
      this.#dropping = true;
      report.dropped?.();
      settled?.();
      return;
    }
    this.#queue.push(run);
  }

  #run(report: Report, own: boolean, settled?: () => void): void {
    this.#inFlight++;
    let pending: Promise<readonly ThrottleRecord[]>;
    try {
      pending = report();
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending
      .then(
        (records) => {
          for (const record of records) this.#local.learn(record, own);
          this.#storeAnswered();
        },
        (error: unknown) => this.#storeFailed(error),
      )
      .finally(() => {
        settled?.();
        this.#inFlight--;
        const next = this.#queue.shift();
        if (next) next();
        else this.#dropping = false;
      });
  }

  #storeAnswered(): void {
    if (this.#storeFailing) this.#logger.info({ event: 'throttle_store_recovered' }, 'failed authentications are shared again');
    this.#storeFailing = false;
  }

  /**
   * The store holds as many counters as it may (docs/scaling.md#the-throttles-keys): the failures
   * it cannot count are counted here alone. Logged at most once a minute, with how many since.
   */
  #storeFull(cap: number): void {
    this.#fullSinceLog++;
    const now = this.#now();
    if (now - this.#fullLoggedAt < FULL_LOG_INTERVAL_MS) return;
    this.#fullLoggedAt = now;
    this.#logger.warn({ event: 'throttle_full', cap, failures: this.#fullSinceLog }, 'the shared throttle store holds as many counters as it may: failures of new addresses are counted in this instance only');
    this.#fullSinceLog = 0;
  }

  /** Logged once per outage: a failing store must not flood the log at the rate of failed logins. */
  #storeFailed(error: unknown): void {
    if (this.#storeFailing) return;
    this.#storeFailing = true;
    this.#logger.error({ event: 'throttle_store_unavailable', ...describeError(error) }, 'failed authentications are counted in this instance only until the store answers');
  }
}
