/**
 * What a storage offers to share the failed-authentication throttle between
 * instances (docs/security.md#sharing-the-counters-on-mysql). The throttle in
 * each process stays the decision point, so the check before authentication
 * costs no query; the store holds the counters every instance adds to, and
 * tells each instance what the others changed. The MySQL storage implements
 * it (`src/storage/mysql/throttle/throttle-store.ts`); the memory storage, which lives
 * in one process, has nothing to share.
 */
/** The limits every failure is counted under (the throttle's options, all set; docs/security.md#throttling). */
export interface ThrottleRules {
  readonly pairFailures: number;
  readonly pairBlockSeconds: number;
  readonly pairMaxBlockSeconds: number;
  readonly addressFailures: number;
  readonly addressWindowSeconds: number;
  readonly addressBlockSeconds: number;
  readonly maxEntries: number;
}

/** The shared state of one counter, as a store holds it after a change. */
export interface ThrottleRecord {
  /** `address`: the client address for every merchant; `pair`: one existing merchant from the address. */
  scope: 'address' | 'pair';
  address: string;
  /** Set for `pair` only. */
  merchantId: string | undefined;
  /** Failures in the address's window, or consecutive failures of the pair. */
  failures: number;
  /** Unix seconds the address's window started (the throttle's clock). */
  windowStart: number;
  /** Blocks of the pair so far: the next one lasts `pairBlockSeconds` * 2^blocks. */
  blocks: number;
  /** Unix seconds the block ends (the throttle's clock); 0 or past: not blocked. */
  blockedUntil: number;
  /**
   * An operator lifted the block (`merchant-api throttle unblock`): every instance drops the
   * block it holds, even one it counted itself, where otherwise another instance's copy only
   * ever makes a block longer.
   */
  lifted?: boolean;
  /**
   * When the store last changed the record, as text that sorts in time order:
   * of two copies of one record, the greater version is the newer.
   */
  version: string;
}

/** Where a store sends what changed, and its failures. */
export interface ThrottleStoreListener {
  /** Records changed by any instance since the last call (this one's included); called after every read that worked, empty or not. */
  learn(records: readonly ThrottleRecord[]): void;
  /** A background read failed; it is tried again at the next interval. */
  failed(error: unknown): void;
  /**
   * Another instance reserved checks of these addresses just now (a store that publishes it):
   * their first check here is reserved too, not taken as the first of a quiet address.
   */
  busy?(addresses: readonly string[]): void;
  /**
   * The store holds as many counters as it may (`cap`, docs/scaling.md#the-throttles-keys): the
   * failure just reported is counted by each instance alone.
   */
  full?(cap: number): void;
}

/** A failure to count: `merchantId` only when that merchant exists. */
export interface ThrottleFailure {
  address: string;
  merchantId: string | undefined;
  /** Unix seconds, the throttle's clock. */
  now: number;
  /**
   * The check this failure ends held a reservation (`reserveChecks`) of the address, and of the
   * pair: it is given back in the same atomic change that counts the failure, so the count never
   * drops between them.
   */
  reserved?: { address: boolean; pair: boolean };
}

/**
 * Key checks about to start (docs/security.md#ten-checks-even-all-at-once): `addressCount`
 * checks of the address, `pairCount` of them for `merchantId` (as claimed, existing or not).
 */
export interface ThrottleReservation {
  address: string;
  merchantId: string | undefined;
  addressCount: number;
  pairCount: number;
  /**
   * Checks counted whatever the limits say, before the others are decided: a check that already
   * started without a reservation (its address was quiet) and is counted now that a second comes.
   */
  forced?: { address: number; pair: number };
  /** Unix seconds, the throttle's clock. */
  now: number;
}

/** Whether the checks may start; `records`: the counters as they are now, when the store read them. */
export interface ReservationAnswer {
  granted: boolean;
  records: readonly ThrottleRecord[];
}

let throttleFull = 0;

/** A store could not count a failure because it holds as many counters as it may (docs/scaling.md#the-throttles-keys). */
export function countThrottleFull(): void {
  throttleFull++;
}

/** Failures of the process so far that a full store could not count, for `merchant_api_throttle_full_total`. */
export function throttleFullCount(): number {
  return throttleFull;
}

/** How long a reservation holds at most, in seconds: a process that died holding one blocks nothing longer. */
export const RESERVATION_SECONDS = 15;

export interface ThrottleStore {
  /**
   * Counts one failure atomically under `rules` (a failure counted by two
   * instances at once is never lost) and answers the records it changed, as
   * they are now; a record a block was decided for says so.
   */
  recordFailure(failure: ThrottleFailure, rules: ThrottleRules): Promise<readonly ThrottleRecord[]>;
  /**
   * A verified merchant from this address: its consecutive count and doubling start again (a
   * block in force stays). Answers the record, if any. `now`: Unix seconds, the throttle's clock.
   */
  resetPair(address: string, merchantId: string, now: number): Promise<readonly ThrottleRecord[]>;
  /**
   * Reserves key checks before their keys are compared, atomically: granted only when the
   * failures counted and the checks already reserved by every instance, plus these, stay within
   * the limits, and nothing is blocked; then they are counted as reserved for at most
   * `RESERVATION_SECONDS`. A store without it shares counts only (each process then gets the limit).
   */
  reserveChecks?(reservation: ThrottleReservation, rules: ThrottleRules): Promise<ReservationAnswer>;
  /** Gives back reserved checks that ended without a failure (a success). */
  releaseChecks?(reservation: ThrottleReservation): Promise<void>;
  /** The records blocked after `now` (bounded), for an instance that starts. */
  activeBlocks(now: number): Promise<readonly ThrottleRecord[]>;
  /**
   * Tells `listener` about every record any instance changes, from now on,
   * until the returned function is called or the storage closes. The store
   * holds the listener weakly: a throttle nobody uses any more stops costing.
   */
  subscribe(listener: ThrottleStoreListener): () => void;
}

/**
 * The listeners of a store, held weakly as `subscribe` promises: a throttle
 * nobody uses any more stops being told, and can be collected.
 */
export class WeakListeners {
  readonly #refs = new Set<WeakRef<ThrottleStoreListener>>();

  get size(): number {
    return this.#refs.size;
  }

  /** Adds `listener`; the function returned removes it. */
  add(listener: ThrottleStoreListener): () => void {
    const ref = new WeakRef(listener);
    this.#refs.add(ref);
    return () => void this.#refs.delete(ref);
  }

  clear(): void {
    this.#refs.clear();
  }

  /** The listeners still held by someone; the others are forgotten. */
  live(): ThrottleStoreListener[] {
    const live: ThrottleStoreListener[] = [];
    for (const ref of this.#refs) {
      const listener = ref.deref();
      if (listener === undefined) this.#refs.delete(ref);
      else live.push(listener);
    }
    return live;
  }
}
