/**
 * Throttling of failed authentication (docs/security.md#throttling): wrong
 * Basic credentials, a signature that does not verify, an unknown merchant.
 * Counted per client address, and per (existing merchant, address); a
 * blocked request is refused before any key is compared or any storage read.
 * Memory is bounded whatever an attacker sends: ids of merchants that do not
 * exist never get an entry of their own, and every map has a size cap that
 * forgets plain counters before blocks (src/limits/bounded-states.ts). The
 * address given is already a key (src/limits/address-key.ts: an IPv6 client
 * is counted per prefix).
 * Shared between instances, it also learns what a store tells it
 * (`learn`, used by src/limits/throttle-sharing.ts); it still decides alone.
 */
import type { ThrottleRecord, ThrottleRules } from '../storage/throttle-store.js';
import { DEFAULTS } from '../defaults.js';
import { RESERVATION_SECONDS } from '../storage/throttle-store.js';
import { BoundedStates } from './bounded-states.js';

export interface ThrottleOptions {
  /** Consecutive failures for one merchant from one address before that pair is blocked. Default 10. */
  pairFailures?: number;
  /** First block of a pair, in seconds; each further block doubles it. Default 300. */
  pairBlockSeconds?: number;
  /** Longest block of a pair, in seconds. Default 3600. */
  pairMaxBlockSeconds?: number;
  /** Failures from one address within `addressWindowSeconds` before the address is blocked for every merchant. Default 100. */
  addressFailures?: number;
  /** The window of `addressFailures`, in seconds. Default 3600. */
  addressWindowSeconds?: number;
  /** How long a blocked address stays blocked, in seconds. Default 3600. */
  addressBlockSeconds?: number;
  /** Most addresses and most pairs tracked (each); plain counters are forgotten first (the oldest first), blocks in force last. Default 100,000. */
  maxEntries?: number;
}

export interface Block {
  /** `pair`: this merchant from this address; `address`: this address for every merchant. */
  scope: 'pair' | 'address';
  /** Seconds until the block ends (at least 1). */
  retryAfter: number;
  /** The limit that was passed and its window, for the RateLimit-Policy field. */
  limit: number;
  window: number;
}

/** Failures left before a block: of the address in its window, and of the pair. */
export interface Room {
  address: number;
  pair: number;
}

interface AddressState {
  failures: number;
  windowStart: number;
  blockedUntil: number;
  /** The version of the shared record last learned ('' when none): an older copy never overwrites a newer one. */
  version: string;
  /** Failures counted here whose report the store has not answered yet (src/limits/throttle-sharing.ts). */
  pending: number;
}

interface PairState {
  consecutive: number;
  /** Blocks so far: the next one lasts pairBlockSeconds * 2^blocks. */
  blocks: number;
  blockedUntil: number;
  version: string;
  pending: number;
}

export class FailureThrottle {
  readonly #o: Required<ThrottleOptions>;
  readonly #addresses: BoundedStates<AddressState>;
  readonly #pairs: BoundedStates<PairState>;
  /** Blocked pairs by address, so the common check (nothing blocked here) parses no credentials. */
  readonly #blockedPairs: BoundedStates<Map<string, number>>;
  /** Addresses another instance reserved checks of lately, until when (seconds): see `busyElsewhere`. */
  readonly #busy: BoundedStates<number>;
  /** The latest time a request told (seconds): what `learn`, which has no clock, decides a block's end against. */
  #lastNow = 0;

  /** The limits in force, every option set. */
  get rules(): ThrottleRules {
    return this.#o;
  }

  constructor(options: ThrottleOptions = {}) {
    this.#o = { ...DEFAULTS.throttle, ...definedOnly(options) };
    for (const [name, value] of Object.entries(this.#o)) {
      if (!Number.isInteger(value) || value < 1) throw new TypeError(`throttle.${name} must be a whole number, at least 1.`);
    }
    this.#addresses = new BoundedStates(this.#o.maxEntries, (state) => state.blockedUntil);
    this.#pairs = new BoundedStates(this.#o.maxEntries, (pair) => pair.blockedUntil);
    this.#blockedPairs = new BoundedStates(this.#o.maxEntries, (pairs) => Math.max(0, ...pairs.values()));
    this.#busy = new BoundedStates(this.#o.maxEntries, (until) => until);
  }

  /**
   * Another instance started reserving checks of the address (a burst there): for a while
   * (`RESERVATION_SECONDS`), a check of it here is reserved too, never taken as quiet.
   */
  busyElsewhere(address: string): void {
    this.#busy.set(address, this.#lastNow + RESERVATION_SECONDS, this.#lastNow);
  }

  /** The block that applies to a request, if any. `claimedMerchant` is asked only when a pair of this address is blocked. */
  blocked(address: string, claimedMerchant: () => string | undefined, nowSeconds: number): Block | undefined {
    this.#lastNow = Math.max(this.#lastNow, nowSeconds);
    const state = this.#addresses.get(address);
    if (state !== undefined && state.blockedUntil > nowSeconds) {
      return { scope: 'address', retryAfter: state.blockedUntil - nowSeconds, limit: this.#o.addressFailures, window: this.#o.addressWindowSeconds };
    }
    const pairs = this.#blockedPairs.get(address);
    if (pairs === undefined) return undefined;
    const merchant = claimedMerchant();
    if (merchant === undefined) return undefined;
    const until = pairs.get(merchant);
    if (until === undefined) return undefined;
    if (until <= nowSeconds) {
      this.#liftPairBlock(address, merchant);
      return undefined;
    }
    return { scope: 'pair', retryAfter: until - nowSeconds, limit: this.#o.pairFailures, window: this.#o.pairBlockSeconds };
  }

  /**
   * Whether anything is known of the address: failures, a block of it or of one of its pairs.
   * Without, a check needs neither the claimed merchant nor the shared store (an address's
   * failures are counted with every pair's, so a pair has no count its address lacks).
   */
  hasHistory(address: string, nowSeconds = this.#lastNow): boolean {
    if (this.#addresses.get(address) !== undefined || this.#blockedPairs.get(address) !== undefined) return true;
    const busy = this.#busy.get(address);
    return busy !== undefined && busy >= nowSeconds;
  }

  /** Failures left before a block of the address, and of (`merchantId`, address); a merchant never counted has them all. */
  room(address: string, merchantId: string | undefined, nowSeconds: number): Room {
    const state = this.#addresses.get(address);
    const addressFailures = state === undefined || nowSeconds - state.windowStart >= this.#o.addressWindowSeconds ? 0 : state.failures;
    const pair = merchantId === undefined ? undefined : this.#pairs.get(pairKey(merchantId, address));
    return { address: this.#o.addressFailures - addressFailures, pair: this.#o.pairFailures - (pair?.consecutive ?? 0) };
  }

  /** Counts a failure; `merchantId` only when that merchant exists. */
  failed(address: string, merchantId: string | undefined, nowSeconds: number): void {
    this.#lastNow = Math.max(this.#lastNow, nowSeconds);
    let state = this.#addresses.get(address);
    if (state === undefined || nowSeconds - state.windowStart >= this.#o.addressWindowSeconds) {
      state = { failures: 0, windowStart: nowSeconds, blockedUntil: state?.blockedUntil ?? 0, version: state?.version ?? '', pending: state?.pending ?? 0 };
    }
    state.pending++;
    state.failures++;
    if (state.failures >= this.#o.addressFailures) {
      state.blockedUntil = nowSeconds + this.#o.addressBlockSeconds;
      state.failures = 0;
      state.windowStart = nowSeconds;
    }
    this.#addresses.set(address, state, nowSeconds);
    if (merchantId === undefined) return;

    const key = pairKey(merchantId, address);
    const pair = this.#pairs.get(key) ?? { consecutive: 0, blocks: 0, blockedUntil: 0, version: '', pending: 0 };
    pair.pending++;
    pair.consecutive++;
    if (pair.consecutive >= this.#o.pairFailures) {
      const seconds = Math.min(this.#o.pairMaxBlockSeconds, this.#o.pairBlockSeconds * 2 ** pair.blocks);
      pair.blocks++;
      pair.consecutive = 0;
      pair.blockedUntil = nowSeconds + seconds;
      this.#setPairBlock(address, merchantId, pair.blockedUntil);
    }
    this.#pairs.set(key, pair, nowSeconds);
  }

  /** The store answered (or gave up on) the report of a failure counted here. */
  answered(address: string, merchantId: string | undefined): void {
    const state = this.#addresses.get(address);
    if (state !== undefined) state.pending = Math.max(0, state.pending - 1);
    const pair = merchantId === undefined ? undefined : this.#pairs.get(pairKey(merchantId, address));
    if (pair !== undefined) pair.pending = Math.max(0, pair.pending - 1);
  }

  /**
   * A verified merchant: its count from this address starts again (the
   * doubling too; a block in force stays). True when there was a count to
   * forget, so a shared store is told only then.
   */
  succeeded(address: string, merchantId: string): boolean {
    const pair = this.#pairs.get(pairKey(merchantId, address));
    this.#pairs.delete(pairKey(merchantId, address));
    return pair !== undefined && (pair.consecutive > 0 || pair.blocks > 0);
  }

  /**
   * Takes a shared record as this instance's state, unless what it holds is
   * newer. `own`: the answer to this instance's own report. When no other
   * report of the counter is still unanswered, such an answer counts every
   * failure this instance made of it, so it is taken as it is and also lifts
   * a block counted here alone (after a reset this instance had not learned
   * yet). While others are unanswered (a burst, the store far away, answers
   * out of order) it may be older than a failure counted here, and is as
   * another instance's change: a block only ever grows here, unless an
   * operator lifted it (`record.lifted`).
   */
  learn(record: ThrottleRecord, own = false): void {
    if (record.scope === 'address') {
      const state = this.#addresses.get(record.address);
      const authoritative = own && (state?.pending ?? 0) === 0;
      if (state !== undefined && !isNewer(record.version, state.version, authoritative)) return;
      const blockedUntil = authoritative || record.lifted || state === undefined ? record.blockedUntil : Math.max(state.blockedUntil, record.blockedUntil);
      this.#addresses.set(record.address, { failures: record.failures, windowStart: record.windowStart, blockedUntil, version: record.version, pending: state?.pending ?? 0 }, this.#lastNow);
      return;
    }
    const merchantId = record.merchantId;
    if (merchantId === undefined) return;
    const key = pairKey(merchantId, record.address);
    const pair = this.#pairs.get(key);
    const authoritative = own && (pair?.pending ?? 0) === 0;
    if (pair !== undefined && !isNewer(record.version, pair.version, authoritative)) return;
    const current = this.#blockedPairs.get(record.address)?.get(merchantId) ?? 0;
    const blockedUntil = authoritative || record.lifted ? record.blockedUntil : Math.max(current, record.blockedUntil);
    this.#pairs.set(key, { consecutive: record.failures, blocks: record.blocks, blockedUntil, version: record.version, pending: pair?.pending ?? 0 }, this.#lastNow);
    if (blockedUntil > 0) this.#setPairBlock(record.address, merchantId, blockedUntil);
    else if (current > 0) this.#liftPairBlock(record.address, merchantId);
  }

  #setPairBlock(address: string, merchantId: string, until: number): void {
    const blocked = this.#blockedPairs.get(address) ?? new Map<string, number>();
    blocked.set(merchantId, until);
    this.#blockedPairs.set(address, blocked, this.#lastNow);
  }

  #liftPairBlock(address: string, merchantId: string): void {
    const pairs = this.#blockedPairs.get(address);
    pairs?.delete(merchantId);
    if (pairs?.size === 0) this.#blockedPairs.delete(address);
  }

  /** Entries held now, for tests and monitoring. */
  get size(): { addresses: number; pairs: number } {
    return { addresses: this.#addresses.size, pairs: this.#pairs.size };
  }
}

/**
 * Whether a shared copy replaces what is held. An answer to this instance's own write
 * replaces a copy of the same version too: a poll may have read that very row first, and
 * as another instance's change it kept the block counted here, which the answer lifts.
 */
function isNewer(version: string, held: string, authoritative: boolean): boolean {
  return authoritative ? version >= held : version > held;
}

function pairKey(merchantId: string, address: string): string {
  return `${address}\u0000${merchantId}`;
}

/** The options actually given: an option set to undefined keeps its default. */
function definedOnly(options: ThrottleOptions): ThrottleOptions {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
}
