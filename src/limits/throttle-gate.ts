/**
 * The failed-authentication throttle as a limit (docs/security.md#throttling):
 * before authentication, a blocked address, or (merchant, address), is
 * refused before any key is compared or any storage read; after the answer,
 * the outcome of the authentication is counted.
 */
import { parseBasicAuth } from '../auth/basic-auth.js';
import type { AuthScheme } from '../auth/scheme.js';
import type { RequestContext } from '../http/context.js';
import { parseQuery } from '../http/query.js';
import type { Logger } from '../observe/logger.js';
import { addressKey } from './address-key.js';
import type { Limit } from './limit.js';
import { Refusal } from './refusal.js';
import type { Block } from './throttle.js';
import type { AuthThrottle } from './throttle-sharing.js';

export class ThrottleGate implements Limit {
  readonly #throttle: AuthThrottle;
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

  /** Throws the 429 when the client is blocked. Needs the client address, which the adapters give. */
  beforeAuthentication(ctx: RequestContext, auth: AuthScheme, search: string): void {
    if (auth === 'none') return;
    if (ctx.clientAddress === undefined) return warnNoAddress(this.#logger, ctx);
    const block = this.#throttle.blocked(addressKey(ctx.clientAddress, this.#ipv6Prefix), () => claimedMerchant(ctx, auth, search), Math.floor(this.#now() / 1000));
    if (block) throw tooManyFailures(block);
  }

  /**
   * Counts the outcome of the request's authentication, if it had one. A
   * failure may answer a promise: the answer waits for a shared store to
   * have it, so that the client's next request finds it on any instance.
   */
  afterAnswer(ctx: RequestContext): void | Promise<void> {
    if (ctx.clientAddress === undefined) return;
    if (ctx.authFailure !== undefined) return this.#throttle.failed(addressKey(ctx.clientAddress, this.#ipv6Prefix), ctx.claimedMerchantId, Math.floor(this.#now() / 1000));
    else if (ctx.merchantId !== undefined) this.#throttle.succeeded(addressKey(ctx.clientAddress, this.#ipv6Prefix), ctx.merchantId);
  }
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

function tooManyFailures(block: Block): Refusal {
  const address = block.scope === 'address';
  const who = address ? 'this address' : 'this merchant from this address';
  return new Refusal(address ? 'auth_address' : 'auth_pair', `Too many failed authentications from ${who}; try again in ${block.retryAfter} seconds.`, {
    retryAfter: block.retryAfter,
    policy: { name: address ? 'auth-address' : 'auth-merchant', quota: block.limit, window: block.window },
  });
}
