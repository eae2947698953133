/**
 * The failed-authentication throttle as a limit (docs/security.md#throttling):
 * before authentication, a blocked address, or (merchant, address), is
 * refused before any key is compared or any storage read, and the check is
 * held as under way (src/limits/checks-in-flight.ts) so that a burst gets no
 * more comparisons than the failures left; after authentication a success
 * ends its check, and after the answer the outcome is counted.
 */
import { parseBasicAuth } from '../auth/basic-auth.js';
import type { AuthScheme } from '../auth/scheme.js';
import type { RequestContext } from '../http/context.js';
import { parseQuery } from '../http/query.js';
import type { Logger } from '../observe/logger.js';
import { addressKey } from './address-key.js';
import { ChecksInFlight, MAX_WAITING } from './checks-in-flight.js';
import { IdleKeepingMap } from './idle-keeping-map.js';
import type { Limit } from './limit.js';
import { Refusal } from './refusal.js';
import type { Block } from './throttle.js';
import type { AuthThrottle } from './throttle-sharing.js';

/** The longest a check waits for another of its address or pair to end, ms: then 429. */
export const CHECK_WAIT_MS = 5000;

/**
 * The check a request holds (docs/security.md#ten-checks-even-all-at-once): the keys it counts
 * under here, and what it holds in a shared store. A `quiet` check started on an address nothing
 * was known of, with no other check of it under way: it parsed no merchant and reserved nothing,
 * until a second check of its address comes and reserves for both (`cover`).
 */
interface Held {
  address: string;
  /** The claimed merchant; parsed for a quiet check only when another check of its address comes. */
  merchant: () => string | undefined;
  keys: string[];
  quiet: boolean;
  /** Checks of the address, and of the pair, this one holds reserved in the shared store. */
  reserved: { address: number; pair: number };
  /** Ended in a failure, counted without a reservation to give back. */
  failed: boolean;
  /** A reservation asked for, not answered yet, that counts this quiet check too (false: none). */
  covering: false | Promise<void>;
  ended: boolean;
}

/** Between two tries of a reservation the store refused, ms: checks of other instances end meanwhile. */
const RESERVE_RETRY_MS = 100;
/** How long a (merchant, address) that succeeded here, with no failure since, reserves nothing, ms. */
const TRUSTED_MS = 60_000;
/** Most such pairs remembered; the oldest are forgotten first (they then reserve again: safe). */
const MAX_TRUSTED = 100_000;

export class ThrottleGate implements Limit {
  readonly #throttle: AuthThrottle;
  readonly #checks = new ChecksInFlight();
  readonly #held = new WeakMap<RequestContext, Held>();
  /** The quiet check under way of each address (at most one: it started with nothing else under way). */
  readonly #quiet = new IdleKeepingMap<Held | undefined>(undefined);
  /**
   * Pairs that succeeded here lately and failed not since, until when (performance.now()): their
   * checks reserve nothing, so a merchant's own parallel calls from one address cost no store call.
   * It gives nothing away: a success resets the pair's count anyway (an attacker behind the same
   * address as the merchant gets 10 more guesses after each of its successes, in one process too),
   * and a failure ends it here at once.
   */
  readonly #trusted = new Map<string, number>();
  /** The pair `#trust` set last: where it is, in `#trusted` or deleted since, setting it again puts it last. */
  #newestTrusted: string | undefined;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #ipv6Prefix: number;

  /** `ipv6Prefix`: IPv6 clients are counted per network of this prefix length (src/limits/address-key.ts). */
  constructor(throttle: AuthThrottle, logger: Logger, now: () => number, ipv6Prefix: number) {
    this.#throttle = throttle;
    this.#logger = logger;
    this.#now = now;
    this.#ipv6Prefix = ipv6Prefix;
  }

  /**
   * Throws the 429 when the client is blocked; otherwise starts the check, at
   * once when it fits in the failures left, else once a check of its address
   * or pair ended (a promise). Needs the client address, which the adapters give.
   * An address nothing is known of, with no check under way, costs neither the
   * claimed merchant's parsing nor a store round trip: the common request.
   */
  beforeAuthentication(ctx: RequestContext, auth: AuthScheme, search: string): void | Promise<void> {
    if (auth === 'none') return;
    if (ctx.clientAddress === undefined) return warnNoAddress(this.#logger, ctx);
    const address = addressKey(ctx.clientAddress, this.#ipv6Prefix);
    let parsed: { merchant: string | undefined } | undefined;
    const merchant = () => (parsed ??= { merchant: claimedMerchant(ctx, auth, search) }).merchant;
    if (this.#checks.running(address) === 0 && !this.#throttle.hasHistory(address)) {
      const held: Held = { address, merchant, keys: [address], quiet: true, reserved: { address: 0, pair: 0 }, covering: false, failed: false, ended: false };
      this.#checks.start(held.keys);
      this.#held.set(ctx, held);
      this.#quiet.set(address, held);
      return;
    }
    const held: Held = { address, merchant, keys: keysOf(address, merchant()), quiet: false, reserved: { address: 0, pair: 0 }, covering: false, failed: false, ended: false };
    // Without a store that reserves (one process), or for a pair trusted here, a check that fits starts at once, no promise.
    if (this.#started(ctx, held)) return this.#reserves(held) ? this.#reserve(ctx, held, performance.now() + CHECK_WAIT_MS) : undefined;
    return this.#waitToStart(ctx, held, performance.now() + CHECK_WAIT_MS);
  }

  /** A success ends its check at once: the next of a merchant's own burst need not wait for this answer. */
  afterAuthentication(ctx: RequestContext, merchantId?: string): void {
    const held = this.#held.get(ctx);
    if (held !== undefined && merchantId !== undefined && this.#throttle.reserve !== undefined) this.#trust(pairKey(held.address, merchantId));
    this.#end(ctx);
  }

  #trust(pair: string): void {
    // Moved to the end (the newest), unless it is there already: deleting the only entry of a Map
    // makes V8 allocate its table anew, on every request of a single client.
    if (pair !== this.#newestTrusted) this.#trusted.delete(pair);
    this.#newestTrusted = pair;
    this.#trusted.set(pair, performance.now() + TRUSTED_MS);
    if (this.#trusted.size > MAX_TRUSTED) this.#trusted.delete(this.#trusted.keys().next().value!);
  }

  #isTrusted(pair: string): boolean {
    const until = this.#trusted.get(pair);
    if (until === undefined) return false;
    if (until > performance.now()) return true;
    this.#trusted.delete(pair);
    return false;
  }

  /**
   * Counts the outcome of the request's authentication, if it had one, then
   * ends its check. A failure may answer a promise: the answer waits for a
   * shared store to have it, so that the client's next request finds it on
   * any instance.
   */
  afterAnswer(ctx: RequestContext): void | Promise<void> {
    if (ctx.clientAddress === undefined) return;
    try {
      if (ctx.authFailure !== undefined) return this.#failed(ctx);
      else if (ctx.merchantId !== undefined) this.#throttle.succeeded(addressKey(ctx.clientAddress, this.#ipv6Prefix), ctx.merchantId);
    } finally {
      // After the count: a check waiting for this one finds the failure counted.
      this.#end(ctx);
    }
  }

  /** Counts a failure; the reservation its check holds is given back in the same change. */
  #failed(ctx: RequestContext): void | Promise<void> {
    const address = addressKey(ctx.clientAddress!, this.#ipv6Prefix);
    const held = this.#held.get(ctx);
    const now = Math.floor(this.#now() / 1000);
    const claimed = held?.merchant();
    if (claimed !== undefined) this.#trusted.delete(pairKey(address, claimed));
    if (held === undefined || (held.reserved.address === 0 && held.reserved.pair === 0)) {
      if (held) held.failed = true;
      return this.#throttle.failed(address, ctx.claimedMerchantId, now);
    }
    const reserved = { address: held.reserved.address > 0, pair: held.reserved.pair > 0 && ctx.claimedMerchantId !== undefined };
    // A merchant that does not exist has no pair count to give its reservation back with.
    if (held.reserved.pair > 0 && ctx.claimedMerchantId === undefined) this.#release(held, { address: 0, pair: held.reserved.pair }, now);
    held.reserved = { address: 0, pair: 0 };
    return this.#throttle.failed(address, ctx.claimedMerchantId, now, reserved);
  }

  /** Whether the check started here: throws the 429 of a block; false when the checks under way already fill the failures left. */
  #started(ctx: RequestContext, held: Held): boolean {
    const now = Math.floor(this.#now() / 1000);
    const block = this.#throttle.blocked(held.address, held.merchant, now);
    if (block) throw tooManyFailures(block);
    this.#promoteQuiet(held.address);
    const room = this.#throttle.room(held.address, held.merchant(), now);
    if (this.#checks.running(held.keys[0]!) >= room.address) return false;
    if (held.keys.length > 1 && this.#checks.running(held.keys[1]!) >= room.pair) return false;
    this.#checks.start(held.keys);
    this.#held.set(ctx, held);
    return true;
  }

  /** A second check of an address whose quiet check runs: that one now counts under its pair too. */
  #promoteQuiet(address: string): void {
    const quiet = this.#quiet.get(address);
    if (quiet === undefined || quiet.keys.length > 1) return;
    const merchant = quiet.merchant();
    if (merchant === undefined) return;
    const pair = pairKey(address, merchant);
    quiet.keys.push(pair);
    this.#checks.start([pair]);
  }

  /**
   * Where the store can reserve, the check started here is reserved there before its key is
   * compared, with the quiet check of its address if that one is not yet; refused, it ends here
   * and tries again until `deadline`, or meets the block the store's answer taught.
   */
  #reserves(held: Held): boolean {
    if (this.#throttle.reserve === undefined) return false;
    const claimed = held.merchant();
    return claimed === undefined || !this.#isTrusted(pairKey(held.address, claimed));
  }

  async #reserve(ctx: RequestContext, held: Held, deadline: number): Promise<void> {
    const reserve = this.#throttle.reserve;
    if (reserve === undefined || !this.#reserves(held)) return;
    const quiet = this.#quiet.get(held.address);
    // The quiet check is counted first, alone: a burst's reservations from other instances then
    // find it counted, not the budget already full.
    if (quiet?.covering instanceof Promise) await quiet.covering;
    const cover = quiet !== undefined && !quiet.ended && quiet.covering === false && quiet.reserved.address === 0 ? quiet : undefined;
    const merchant = held.merchant();
    const forced = cover === undefined ? undefined : { address: 1, pair: merchant !== undefined && cover.merchant() === merchant ? 1 : 0 };
    const now = Math.floor(this.#now() / 1000);
    const asked = reserve.call(this.#throttle, { address: held.address, merchantId: merchant, addressCount: 1, pairCount: merchant === undefined ? 0 : 1, ...(forced ? { forced } : {}), now });
    if (cover) cover.covering = asked.then(() => undefined);
    let granted: boolean | undefined;
    try {
      granted = await asked;
    } finally {
      if (cover) cover.covering = false;
    }
    // The quiet check is counted whatever the answer, once the store had it. If it ended meanwhile
    // in a success, that goes back; after a failure it stays until it lapses (RESERVATION_SECONDS):
    // given back before the failure's count arrives, it would open a place for one check too many.
    if (cover && forced && granted !== undefined) {
      if (!cover.ended) cover.reserved = forced;
      else if (!cover.failed) this.#release(cover, forced, now);
    }
    if (granted === undefined) return;
    if (granted) {
      held.reserved = { address: 1, pair: merchant === undefined ? 0 : 1 };
      return;
    }
    this.#end(ctx);
    const block = this.#throttle.blocked(held.address, held.merchant, Math.floor(this.#now() / 1000));
    if (block) throw tooManyFailures(block);
    const left = deadline - performance.now();
    if (left <= 0 || this.#checks.waiters >= MAX_WAITING) throw tooManyAtOnce(this.#throttle.rules.pairFailures);
    await this.#checks.nextEnd(held.keys, Math.min(left, RESERVE_RETRY_MS));
    return this.#waitToStart(ctx, { ...held, ended: false, keys: keysOf(held.address, merchant) }, deadline);
  }

  async #waitToStart(ctx: RequestContext, held: Held, deadline: number): Promise<void> {
    if (this.#started(ctx, held)) return this.#reserve(ctx, held, deadline);
    while (this.#checks.waiters < MAX_WAITING) {
      const left = deadline - performance.now();
      if (left <= 0 || !(await this.#checks.nextEnd(held.keys, left))) break;
      if (this.#started(ctx, held)) return this.#reserve(ctx, held, deadline);
    }
    throw tooManyAtOnce(this.#throttle.rules.pairFailures);
  }

  /** Ends the request's check here, and gives back what it still holds in the store. */
  #end(ctx: RequestContext): void {
    const held = this.#held.get(ctx);
    if (held === undefined) return;
    this.#held.delete(ctx);
    held.ended = true;
    if (this.#quiet.get(held.address) === held) this.#quiet.clear(held.address);
    this.#checks.end(held.keys);
    if (held.reserved.address > 0 || held.reserved.pair > 0) this.#release(held, held.reserved, Math.floor(this.#now() / 1000));
    held.reserved = { address: 0, pair: 0 };
  }

  #release(held: Held, counts: { address: number; pair: number }, now: number): void {
    this.#throttle.release?.({ address: held.address, merchantId: held.merchant(), addressCount: counts.address, pairCount: counts.pair, now });
  }
}

function keysOf(address: string, merchant: string | undefined): string[] {
  return merchant === undefined ? [address] : [address, pairKey(address, merchant)];
}

/** The key of a (claimed merchant, address) among the checks under way; an address key has no NUL. */
function pairKey(address: string, merchant: string): string {
  return `${address}\u0000${merchant}`;
}

/**
 * Once per process, not per request: a host that never passes the address
 * (a fetch host calling `api.fetch(request)` alone) would otherwise turn the
 * throttle off in silence, or fill the log with the same line.
 */
let warnedNoAddress = false;

function warnNoAddress(logger: Logger, ctx: RequestContext): void {
  if (warnedNoAddress) return;
  warnedNoAddress = true;
  logger.warn(
    { event: 'throttle_no_client_address', missing: 'clientAddress', route: ctx.route ?? null, request_id: ctx.requestId },
    'A request reached the failed-authentication throttle without a client address: pass { clientAddress } to fetch(request, info), see docs/embedding.md. Until then failed authentications are not throttled.',
  );
}

/** The merchant a request names, before anything is looked up: the Basic user, or `cp`. */
function claimedMerchant(ctx: RequestContext, auth: AuthScheme, search: string): string | undefined {
  try {
    if (auth === 'basic') return parseBasicAuth(ctx.header('authorization'))?.id;
    return parseQuery(search).find(([key]) => key === 'cp')?.[1];
  } catch {
    return undefined;
  }
}

/** A burst larger than the failures left, still waiting when its time ran out. */
function tooManyAtOnce(quota: number): Refusal {
  return new Refusal('auth_pair', 'Too many authentications at once from this address; try again in 1 seconds.', { retryAfter: 1, policy: { name: 'auth-merchant', quota, window: 1 } });
}

function tooManyFailures(block: Block): Refusal {
  const address = block.scope === 'address';
  const who = address ? 'this address' : 'this merchant from this address';
  return new Refusal(address ? 'auth_address' : 'auth_pair', `Too many failed authentications from ${who}; try again in ${block.retryAfter} seconds.`, {
    retryAfter: block.retryAfter,
    policy: { name: address ? 'auth-address' : 'auth-merchant', quota: block.limit, window: block.window },
  });
}
