/**
 * The memory storage's replay store (docs/protocol.md#a-bounded-replay-store): every salt seen
 * inside its window, in a fixed amount of memory that the garbage collector never sees grow.
 *
 * - A salt is a 64-bit keyed fingerprint of (merchant id, salt): HalfSipHash-2-4 under a key
 *   drawn at random for each store, so nobody outside the process can craft fingerprints that
 *   collide or pile up in one place of the table. A salt is never compared as a string again.
 *   The hash is siphash.ts.
 * - Fingerprints live in one open-addressing table (linear probing) in an `Int32Array` of three
 *   words per slot (fingerprint high, fingerprint low, expiry second), allocated once, on the first
 *   salt, with twice as many slots as `maxSalts`: 24 bytes per salt, slack included. No
 *   JavaScript object, string or Map entry is kept per salt.
 * - Expiry: a salt is live while its expiry second (its ts plus the tolerance) has not passed, and
 *   a lookup treats an expired slot as free. Every new salt moves a sweeping hand 8 slots on,
 *   which empties the expired slots it passes (backward-shift deletion, so no tombstones), and a
 *   new salt may take an expired slot on its path. Hence at most `maxSalts` live salts plus
 *   `capacity / 8` expired ones occupy the table: it never fills, and a probe stays short.
 * - How many salts are live, overall and per merchant, is counted by expiry second in small
 *   sorted typed-array queues (one entry per second that has salts, not per salt), so the counts
 *   are exact, the caps are checked in constant time, and Retry-After is the time until the
 *   oldest salt expires (salt-expiry.ts).
 *
 * This file owns the table and the answers (the refusals and their status); the hash and the
 * counts are apart, each a piece that knows nothing of the table.
 */
import { MerchantApiError, StorageUnavailableError } from '../../errors.js';
import { ExpiryCounts } from './salt-expiry.js';
import { fingerprint, fpHigh, fpLow } from './siphash.js';
import { DEFAULTS } from '../../defaults.js';

export interface SaltStoreOptions {
  /**
   * Most salts held at once (default 1,000,000). One merchant may hold at most half of them:
   * beyond that its new signatures are refused with 429; a full store refuses with 503.
   */
  maxSalts?: number;
  /**
   * Unix seconds (a fraction allowed), on the handler's clock: a signature whose `ts` is earlier is
   * refused, since salts seen before then are not known. Default: when the store was created, to
   * the millisecond, so that a `ts` of the second it was created in is refused (a previous process
   * may have accepted it in that second).
   */
  startedAt?: number;
}

export const DEFAULT_MAX_SALTS = DEFAULTS.maxSalts;
/** The largest `maxSalts`: 2.4 GB of table. */
export const MAX_MAX_SALTS = 100_000_000;

/** Slots per salt of `maxSalts`; at most `maxSalts` + capacity / SWEEP_STEP slots are ever occupied. */
const SLOTS_PER_SALT = 2;
/** Slots the sweeping hand moves on per new salt. */
const SWEEP_STEP = 8;
/** Words per slot: fingerprint high, fingerprint low, expiry (seconds after `#epoch`). */
const WORDS = 3;

/** The answer to a signature whose ts lies before the store existed (docs/protocol.md#a-bounded-replay-store). */
export const BEFORE_START_MESSAGE = 'Invalid timestamp: ts is before this server started; sign the request again with the current time.';

export class SaltStore {
  readonly maxSalts: number;
  /** The most salts one merchant may hold: half of `maxSalts`. */
  readonly merchantShare: number;
  readonly #capacity: number;
  #table: Int32Array | undefined;
  /** Slots holding a fingerprint, live or expired. */
  #occupied = 0;
  #hand = 0;
  /** The clock second expiries are stored relative to (the first one seen), so they fit 32 bits. */
  #epoch = 0;
  /** The latest clock second seen, relative to `#epoch`; the clock never goes back for the store. */
  #now = Number.NEGATIVE_INFINITY;
  readonly #all = new ExpiryCounts();
  readonly #merchants = new Map<string, ExpiryCounts>();
  #startedAt: number | undefined;
  readonly #createdAt = Date.now();
  readonly #key = new Int32Array(2);

  constructor(options: SaltStoreOptions = {}) {
    const maxSalts = options.maxSalts ?? DEFAULT_MAX_SALTS;
    if (!Number.isInteger(maxSalts) || maxSalts < 2 || maxSalts > MAX_MAX_SALTS) {
      throw new RangeError(`maxSalts must be a whole number from 2 to ${MAX_MAX_SALTS} (got ${maxSalts}).`);
    }
    if (options.startedAt !== undefined && !Number.isFinite(options.startedAt)) throw new RangeError(`startedAt must be Unix seconds (got ${options.startedAt}).`);
    this.maxSalts = maxSalts;
    this.merchantShare = Math.floor(maxSalts / 2);
    this.#capacity = maxSalts * SLOTS_PER_SALT;
    this.#startedAt = options.startedAt;
    crypto.getRandomValues(this.#key);
  }

  /** Live salts, as of the latest clock second seen. */
  get size(): number {
    return this.#all.total;
  }

  /** Bytes the table takes once allocated (it is, on the first salt). */
  get tableBytes(): number {
    return this.#capacity * WORDS * 4;
  }

  /**
   * Records a salt of `merchantId` valid until `expiresAt` (inclusive) at clock second `now`.
   * True when it is new, false for a replay inside its window. Throws the answer for a `ts`
   * before the store started (400), a merchant over its share (429) or a full store (503).
   */
  record(merchantId: string, salt: string, expiresAt: number, now: number, ts?: number): boolean {
    if (this.#table === undefined) this.#start(now);
    const table = this.#table!;
    const clock = Math.floor(now) - this.#epoch;
    if (clock > this.#now) this.#advance(clock);
    now = this.#now;
    // A safety net: by the sweep's bound the table never gets this full.
    if (this.#occupied >= this.#capacity - (this.#capacity >> 3)) this.#sweep(this.#capacity);

    fingerprint(this.#key[0]!, this.#key[1]!, merchantId, salt);
    const hi = fpHigh;
    const lo = fpLow;
    const capacity = this.#capacity;
    let slot = (hi >>> 0) % capacity;
    let free = -1;
    for (;;) {
      const at = slot * WORDS;
      const h = table[at]!;
      const l = table[at + 1]!;
      if (h === 0 && l === 0) break;
      if (h === hi && l === lo) {
        if (table[at + 2]! >= now) return false;
        // Its own expired record: take its place.
        free = slot;
        break;
      }
      if (free < 0 && table[at + 2]! < now) free = slot;
      if (++slot === capacity) slot = 0;
    }

    const expiry = Math.max(-0x80000000, Math.min(0x7fffffff, Math.floor(expiresAt) - this.#epoch));
    // Already expired: there is nothing to remember.
    if (expiry < now) return true;
    if (ts !== undefined && ts < this.#startedAt!) throw new MerchantApiError('invalid_parameter', BEFORE_START_MESSAGE);
    const counts = this.#merchants.get(merchantId);
    if (counts !== undefined && counts.total >= this.merchantShare) {
      const retryAfter = Math.max(1, counts.oldest() + 1 - now);
      throw new MerchantApiError(
        'too_many_requests',
        `This merchant holds ${counts.total} unexpired salts, the most one merchant may (half of the replay store's ${this.maxSalts}); new signatures are refused until its oldest salt expires in ${retryAfter} seconds.`,
        { retryAfter, policy: { name: 'salts', quota: this.merchantShare } },
      );
    }
    if (this.#all.total >= this.maxSalts) {
      const retryAfter = Math.max(1, this.#all.oldest() + 1 - now);
      throw new StorageUnavailableError(`The replay store is full: ${this.maxSalts} unexpired salts (MAX_SALTS); the oldest expires in ${retryAfter} seconds.`, { retryAfter });
    }

    if (free < 0) {
      free = slot;
      this.#occupied++;
    }
    const at = free * WORDS;
    table[at] = hi;
    table[at + 1] = lo;
    table[at + 2] = expiry;
    this.#all.add(expiry);
    if (counts !== undefined) counts.add(expiry);
    else this.#merchants.set(merchantId, new ExpiryCounts().add(expiry));
    this.#sweep(SWEEP_STEP);
    return true;
  }

  /**
   * For tests: what is wrong with the table, or undefined. Every fingerprint must be reachable
   * from its home slot without crossing an empty slot, the occupied slots must be counted right,
   * and the live ones must be exactly the counted salts.
   */
  integrity(): string | undefined {
    const table = this.#table;
    if (table === undefined) return this.#occupied === 0 && this.size === 0 ? undefined : 'counts without a table';
    const capacity = this.#capacity;
    let occupied = 0;
    let live = 0;
    for (let slot = 0; slot < capacity; slot++) {
      const at = slot * WORDS;
      if (table[at] === 0 && table[at + 1] === 0) continue;
      occupied++;
      if (table[at + 2]! >= this.#now) live++;
      for (let probe = (table[at]! >>> 0) % capacity; probe !== slot; probe = (probe + 1) % capacity) {
        if (table[probe * WORDS] === 0 && table[probe * WORDS + 1] === 0) return `slot ${slot} cannot be reached from its home`;
      }
    }
    if (occupied !== this.#occupied) return `${occupied} slots occupied, ${this.#occupied} counted`;
    if (live !== this.size) return `${live} live slots, ${this.size} salts counted`;
    return undefined;
  }

  /** Forgets every salt and releases the table. */
  clear(): void {
    this.#table = undefined;
    this.#occupied = 0;
    this.#hand = 0;
    this.#all.clear();
    this.#merchants.clear();
  }

  #start(now: number): void {
    this.#table = new Int32Array(this.#capacity * WORDS);
    this.#epoch = Math.floor(now);
    this.#now = Number.NEGATIVE_INFINITY;
    this.#startedAt ??= createdOnHandlerClock(this.#createdAt, now);
  }

  /** A new clock second: salts that expired before it no longer count. */
  #advance(now: number): void {
    this.#now = now;
    this.#all.expire(now);
    for (const [merchantId, counts] of this.#merchants) {
      if (counts.expire(now) === 0) this.#merchants.delete(merchantId);
    }
  }

  /** Moves the hand `steps` slots on, emptying every expired slot it passes. */
  #sweep(steps: number): void {
    const table = this.#table!;
    const capacity = this.#capacity;
    const now = this.#now;
    let hand = this.#hand;
    for (let step = 0; step < steps; ) {
      const at = hand * WORDS;
      if ((table[at] !== 0 || table[at + 1] !== 0) && table[at + 2]! < now) {
        // The slot now holds what followed it, if anything: look at it again.
        this.#remove(hand);
        continue;
      }
      if (++hand === capacity) hand = 0;
      step++;
    }
    this.#hand = hand;
  }

  /** Empties `slot`, moving back the entries after it that may live closer to their home slot. */
  #remove(slot: number): void {
    const table = this.#table!;
    const capacity = this.#capacity;
    let hole = slot;
    let next = slot;
    for (;;) {
      if (++next === capacity) next = 0;
      const at = next * WORDS;
      const hi = table[at]!;
      if (hi === 0 && table[at + 1] === 0) break;
      const home = (hi >>> 0) % capacity;
      // It stays when its home lies cyclically in (hole, next]: moving it would put it before its home.
      if (hole <= next ? hole < home && home <= next : hole < home || home <= next) continue;
      const to = hole * WORDS;
      table[to] = hi;
      table[to + 1] = table[at + 1]!;
      table[to + 2] = table[at + 2]!;
      hole = next;
    }
    const to = hole * WORDS;
    table[to] = 0;
    table[to + 1] = 0;
    table[to + 2] = 0;
    this.#occupied--;
  }
}

/**
 * When the store was created (`createdAtMs`, the system's clock), in Unix seconds to the millisecond
 * on the handler's clock, given its `now` (whole seconds). Rounding the start down to its second
 * let a URL accepted in that second by the process before be accepted again (`ts` not before it).
 * The handler's clock is the system's, read a moment before and floored, unless a test set it apart:
 * then the creation is measured back from `now`, on that clock.
 */
function createdOnHandlerClock(createdAtMs: number, now: number): number {
  const apartMs = Math.floor(now) * 1000 - Date.now();
  // The same clock: floored, and read up to a second before (a slow event loop), hence up to 2 s behind.
  const sameClock = apartMs > -2000 && apartMs <= 0;
  return (createdAtMs + (sameClock ? 0 : apartMs)) / 1000;
}
