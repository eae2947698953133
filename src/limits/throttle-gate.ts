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
import type { Limit } from './limit.js';
import { Refusal } from './refusal.js';
import type { Block } from './throttle.js';
import type { AuthThrottle } from './throttle-sharing.js';

/** The longest a check waits for another of its address or pair to end, ms: then 429. */
export const CHECK_WAIT_MS = 5000;

/** The check a request holds: the keys it counts under. */
type Held = readonly string[];

export class ThrottleGate implements Limit {
  readonly #throttle: AuthThrottle;
  readonly #checks = new ChecksInFlight();
  readonly #held = new WeakMap<RequestContext, Held>();
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
   */
  beforeAuthentication(ctx: RequestContext, auth: AuthScheme, search: string): void | Promise<void> {
    if (auth === 'none') return;
    if (ctx.clientAddress === undefined) return warnNoAddress(this.#logger, ctx);
    const address = addressKey(ctx.clientAddress, this.#ipv6Prefix);
    const merchant = claimedMerchant(ctx, auth, search);
    const keys = merchant === undefined ? [address] : [address, pairKey(address, merchant)];
    if (this.#started(ctx, address, merchant, keys)) return;
    return this.#waitToStart(ctx, address, merchant, keys);
  }

  /** A success ends its check at once: the next of a merchant's own burst need not wait for this answer. */
  afterAuthentication(ctx: RequestContext): void {
    this.#end(ctx);
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
      if (ctx.authFailure !== undefined) return this.#throttle.failed(addressKey(ctx.clientAddress, this.#ipv6Prefix), ctx.claimedMerchantId, Math.floor(this.#now() / 1000));
      else if (ctx.merchantId !== undefined) this.#throttle.succeeded(addressKey(ctx.clientAddress, this.#ipv6Prefix), ctx.merchantId);
    } finally {
      // After the count: a check waiting for this one finds the failure counted.
      this.#end(ctx);
    }
  }

  /** Whether the check started: throws the 429 of a block; false when the checks under way already fill the failures left. */
  #started(ctx: RequestContext, address: string, merchant: string | undefined, keys: Held): boolean {
    const now = Math.floor(this.#now() / 1000);
    const block = this.#throttle.blocked(address, () => merchant, now);
    if (block) throw tooManyFailures(block);
    const room = this.#throttle.room(address, merchant, now);
    if (this.#checks.running(keys[0]!) >= room.address) return false;
    if (keys.length > 1 && this.#checks.running(keys[1]!) >= room.pair) return false;
    this.#checks.start(keys);
    this.#held.set(ctx, keys);
    return true;
  }

  async #waitToStart(ctx: RequestContext, address: string, merchant: string | undefined, keys: Held): Promise<void> {
    const deadline = performance.now() + CHECK_WAIT_MS;
    while (this.#checks.waiters < MAX_WAITING) {
      const left = deadline - performance.now();
      if (left <= 0 || !(await this.#checks.nextEnd(keys, left))) break;
      if (this.#started(ctx, address, merchant, keys)) return;
    }
    throw tooManyAtOnce(this.#throttle.rules.pairFailures);
  }

  #end(ctx: RequestContext): void {
    const keys = this.#held.get(ctx);
    if (keys === undefined) return;
    this.#held.delete(ctx);
    this.#checks.end(keys);
  }
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
