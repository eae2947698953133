/**
 * Late answers for connections that come back too early
 * (docs/security.md#clients-that-ignore-retry-after).
 *
 * A 429 costs the core the HTTP work of a request, so a client that ignores
 * `Retry-After` and resends at once keeps a core busy with refusals, and
 * every other merchant waits behind them (docs/benchmarks.md). A connection (client address, an IPv6
 * one by its prefix as src/limits/address-key.ts keys it, and port) that was refused with
 * `Retry-After` and sends again before that time has passed gets its next
 * refusal only when the time is up, at most `maxDelayMs` later: it then
 * costs a timer, not a core, and each of its connections gets about one
 * answer per `Retry-After`. A client that waits as told is never delayed.
 */
import type { RequestContext } from '../http/context.js';
import { MerchantApiError } from '../errors.js';
import { DEFAULTS } from '../defaults.js';
import { addressKey } from './address-key.js';
import type { Limit } from './limit.js';

export interface TarpitOptions {
  /** The longest a refusal is held back, ms. Default 5000 (well inside the servers' request timeouts and the 8 s shutdown). */
  maxDelayMs?: number;
  /** Connections remembered at most; the oldest is forgotten first. Default 100,000. */
  maxEntries?: number;
}

/** A client that waited as told may still arrive this much early, by our clock: the refusal was timed before it was written. */
const GRACE_MS = 100;

export class Tarpit implements Limit {
  readonly #maxDelayMs: number;
  readonly #maxEntries: number;
  readonly #ipv6Prefix: number;
  /** When each connection refused lately may come back (performance.now() ms), oldest first. */
  readonly #dueAt = new Map<string, number>();

  /** `ipv6Prefix`: IPv6 clients are keyed per network of this prefix length (src/limits/address-key.ts). */
  constructor(options: TarpitOptions = {}, ipv6Prefix: number = DEFAULTS.ipv6Prefix) {
    this.#ipv6Prefix = ipv6Prefix;
    this.#maxDelayMs = options.maxDelayMs ?? DEFAULTS.tarpit.maxDelayMs;
    this.#maxEntries = options.maxEntries ?? DEFAULTS.tarpit.maxEntries;
    if (!(this.#maxDelayMs >= 0 && this.#maxDelayMs <= 60_000)) throw new TypeError('tarpit.maxDelayMs must be a number from 0 to 60000.');
    if (!Number.isInteger(this.#maxEntries) || this.#maxEntries < 1) throw new TypeError('tarpit.maxEntries must be a whole number, at least 1.');
  }

  /**
   * Records a refusal with `retryAfterSeconds` on `connection`, and answers
   * how long to hold it back: the time left of the previous one, if the
   * connection did not wait it out.
   */
  delay(connection: string, retryAfterSeconds: number, now = performance.now()): number {
    const due = this.#dueAt.get(connection);
    const wait = due !== undefined && due - now > GRACE_MS ? Math.min(due - now, this.#maxDelayMs) : 0;
    // Delete first, so that the Map's order stays the order of last refusal.
    if (due !== undefined) this.#dueAt.delete(connection);
    else if (this.#dueAt.size >= this.#maxEntries) this.#dueAt.delete(this.#dueAt.keys().next().value!);
    this.#dueAt.set(connection, now + wait + retryAfterSeconds * 1000);
    return wait;
  }

  /**
   * How long to hold back the answer to `error`: only a 429 with Retry-After,
   * to a connection the adapter told us (address and port), is ever held.
   */
  onConnection(ctx: RequestContext, error: unknown): number {
    if (!(error instanceof MerchantApiError) || error.status !== 429 || ctx.clientPort === undefined) return 0;
    const retryAfter = error.retryAfter;
    if (retryAfter === undefined || !(retryAfter > 0)) return 0;
    return this.delay(`${addressKey(ctx.clientAddress ?? '', this.#ipv6Prefix)} ${ctx.clientPort}`, retryAfter);
  }

  /** Connections remembered now. */
  get size(): number {
    return this.#dueAt.size;
  }
}

/** Resolves after `ms`: a timer, which Node, Bun and Deno all have. */
export function heldBack(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
