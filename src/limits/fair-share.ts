/**
 * Fair sharing of a busy instance between merchants (docs/security.md#fair-sharing).
 *
 * Every authenticated request is charged to its merchant: the time it held
 * the pipeline plus a fixed amount for the HTTP work no handler can time.
 * Charges decay with a time constant of 250 ms, so they say what each
 * merchant used lately. While the instance is busy (its process used at
 * least `busyPercent` of a core over the last 100 ms sample), a merchant
 * that sends requests on several connections at once, and whose recent use
 * is above both the average of the merchants active now and an equal part
 * of what the instance serves when full, three samples in a row, gets 429
 * with Retry-After; one at or below either is always served. A merchant refused
 * is held for 10 s after its last refusal, busy or not, to the average alone,
 * so that it does not fill the instance again as its clients come back. An idle
 * instance refuses nobody else, and a merchant alone on it may use all of it.
 *
 * Why several connections: the runtimes serve connections in turn, so
 * another merchant's request waits for at most one request of a merchant
 * that sends one at a time (its latency at most doubles, the goal), however
 * fast that merchant sends and however busy the process is for other
 * reasons (an embedding application, a test runner). A merchant keeping
 * several connections busy makes the others wait for several. It counts the
 * connections that carried a request of the merchant in a sample and an
 * earlier one (kept alive), and it takes three: Node's fetch sends requests
 * made one after another on two connections in turn. Three samples in a
 * row, so that a short burst of parallel requests is not a flood. A client
 * that opens a connection per request cannot be told from a sequential one
 * by the server, and is left to a proxy's per-client limits.
 *
 * Why CPU and not event-loop delay: a flood of cheap requests keeps every
 * loop turn short (timer drift stays as low as on an idle server, see
 * docs/benchmarks.md) while each other request waits behind the flood's. The process's CPU time says the core is full; Node, Bun
 * and Deno all answer `process.cpuUsage()`. Without it nothing is refused.
 */
import type { RequestContext } from '../http/context.js';
import type { MerchantApiHooks } from '../http/hooks.js';
import type { Logger } from '../observe/logger.js';
import { DEFAULTS } from '../defaults.js';
import type { Limit } from './limit.js';
import { Refusal } from './refusal.js';

export interface FairShareOptions {
  /**
   * Process CPU use, in percent of one core over 100 ms, at which the instance counts as busy.
   * Default 50: from there on a request waits, on average, about as long as it takes to serve
   * (a single-server queue), so others' latency has doubled.
   */
  busyPercent?: number;
  /** CPU time the process used so far, in microseconds. Default: `process.cpuUsage()` where the runtime has it. */
  cpuTime?: () => number;
}

/** How often the CPU is sampled. */
const SAMPLE_MS = 100;
/** How long a refused merchant stays held to its share after its last refusal, and how long the capacity seen while busy is remembered. */
const HOLD_MS = 10_000;
/** Time constant with which the capacity seen at the busiest sample sinks back. */
const CAPACITY_DECAY_MS = 2000;
/** Time constant of the decaying charges. */
const DECAY_MS = 250;
/** The HTTP parsing and writing around a request that the pipeline cannot time (its order of magnitude on Node: docs/benchmarks.md). */
const REQUEST_OVERHEAD_MS = 0.05;
/** Below this a merchant's decayed charge no longer counts it as active (about one request a second ago). */
const ACTIVE_MS = REQUEST_OVERHEAD_MS / 4;
/** The sampler stops after this long without a request, so an idle handler costs nothing. */
const IDLE_STOP_MS = 2000;
/** Merchants tracked at most; the table is swept every sample, so only a flood of distinct authenticated merchants reaches it. */
const MAX_MERCHANTS = 100_000;
/** A connection not seen for this many samples is forgotten (a new request on it counts as a new connection). */
const CONNECTION_MEMORY_SAMPLES = 10;
/** Connections remembered per merchant; past this, further ones are not counted. */
const MAX_CONNECTIONS = 64;
/** Kept-alive connections in one sample from which a merchant counts as sending several requests at once (Node's fetch alternates two for sequential requests). */
const CONCURRENT_CONNECTIONS = 3;
/** Samples in a row a merchant must be over its share before it is refused: a burst is not a flood. */
const SUSTAINED_SAMPLES = 3;

interface Use {
  charge: number;
  at: number;
  /** When this merchant was last refused (0: not in this episode), so a refusal is logged once per episode. */
  refusedAt: number;
  /** The samples in which each of its connections (by the client's port) first and last carried a request. */
  connections: Map<number, { first: number; last: number }>;
  /** Its kept-alive connections that carried a request in the current sample, and in the last one. */
  concurrentNow: number;
  concurrent: number;
  /** Samples in a row that ended with this merchant over its share of a busy instance. */
  overSamples: number;
}

export class FairShare implements Limit {
  readonly #busyPercent: number;
  readonly #cpuTime: (() => number) | undefined;
  readonly #logger: Logger;
  readonly #uses = new Map<string, Use>();
  #total = 0;
  #totalAt = 0;
  /** Merchants active at the last sample. */
  #active = 0;
  /** The last sample found the instance busy. */
  #busyNow = false;
  #lastBusy = 0;
  /**
   * What the instance served (as a decayed total) at its busiest samples of
   * this busy spell: what a full instance serves. A sample above it raises it;
   * it sinks back with a time constant of CAPACITY_DECAY_MS, so that one
   * outlier (a pause that inflated every request's time) does not raise
   * every merchant's equal part for the rest of the spell.
   */
  #capacity = 0;
  /** Charges since the last sample, undecayed. */
  #charged = 0;
  #lastRequest = 0;
  #timer: ReturnType<typeof setInterval> | undefined;
  #ticks = 0;
  #sample: { cpu: number; at: number } | undefined;

  /** Charges each finished request to its merchant. */
  readonly hooks: MerchantApiHooks = {
    onFinish: (ctx, summary) => {
      if (ctx.merchantId !== undefined) this.#charge(ctx.merchantId, requestCost(summary.status, summary.durationMs));
    },
  };

  constructor(options: FairShareOptions = {}, logger: Logger) {
    this.#busyPercent = options.busyPercent ?? DEFAULTS.fairShareBusyPercent;
    if (!(this.#busyPercent > 0 && this.#busyPercent <= 1000)) throw new TypeError('fairShare.busyPercent must be a number above 0, at most 1000.');
    this.#cpuTime = options.cpuTime ?? processCpuTime();
    this.#logger = logger;
  }

  /**
   * Lets an authenticated request through, or throws the 429 when the
   * instance is busy and this merchant used more than the average lately.
   */
  afterAuthentication(ctx: RequestContext, merchantId: string): void {
    const now = performance.now();
    this.#lastRequest = now;
    if (this.#timer === undefined) this.#start(now);
    const use = this.#use(merchantId, now);
    if (use === undefined) return;
    if (ctx.clientPort !== undefined) this.#countConnection(use, ctx.clientPort);
    if (this.#active < 2) return;
    // Requests sent one at a time delay the others' by at most one each: never refused for it.
    if (Math.max(use.concurrent, use.concurrentNow) < CONCURRENT_CONNECTIONS) return;
    const held = use.refusedAt !== 0 && now - use.refusedAt <= HOLD_MS;
    if (!held && !(this.#busyNow && use.overSamples >= SUSTAINED_SAMPLES)) return;
    const charge = decayed(use.charge, use.at, now);
    const total = decayed(this.#total, this.#totalAt, now);
    if (charge * this.#active <= total) return;
    // A merchant not refused lately may also use its equal part of the full instance; one held
    // gets no more than the average, so its clients coming back do not fill the core again.
    if (!held && charge * this.#active <= this.#capacity) return;
    const used = Math.round((100 * charge) / total);
    if (!held) this.#logger.warn({ event: 'fair_share_refusing', merchant_id: merchantId, share: used, active_merchants: this.#active, request_id: ctx.requestId });
    use.refusedAt = now;
    // Spread over 1-3 s, so that a merchant's clients refused together do not come back together.
    const retryAfter = 1 + Math.floor(Math.random() * 3);
    const share = Math.max(1, Math.floor(100 / this.#active));
    throw new Refusal(
      'fair_share',
      `This merchant used more than its share of this busy instance lately (${used}% of it, with ${this.#active} merchants active); retry in ${retryAfter} seconds.`,
      { retryAfter, policy: { name: 'fair-share', quota: share, window: 1 } },
    );
  }

  #charge(merchantId: string, cost: number): void {
    const now = performance.now();
    this.#total = decayed(this.#total, this.#totalAt, now) + cost;
    this.#totalAt = now;
    this.#charged += cost;
    const use = this.#use(merchantId, now);
    if (use === undefined) return;
    use.charge = decayed(use.charge, use.at, now) + cost;
    use.at = now;
  }

  /** Counts a request on one of the merchant's connections: a kept-alive one (seen in an earlier sample) once per sample. */
  #countConnection(use: Use, port: number): void {
    const sample = this.#ticks;
    const connection = use.connections.get(port);
    if (connection === undefined) {
      if (use.connections.size < MAX_CONNECTIONS) use.connections.set(port, { first: sample, last: sample });
      return;
    }
    if (connection.last === sample) return;
    connection.last = sample;
    if (connection.first < sample) use.concurrentNow++;
  }

  /** The merchant's entry, made on its first request (unless the table is full). */
  #use(merchantId: string, now: number): Use | undefined {
    let use = this.#uses.get(merchantId);
    if (use === undefined && this.#uses.size < MAX_MERCHANTS) {
      use = { charge: 0, at: now, refusedAt: 0, connections: new Map(), concurrentNow: 0, concurrent: 0, overSamples: 0 };
      this.#uses.set(merchantId, use);
    }
    return use;
  }

  #start(now: number): void {
    this.#sample = this.#cpuTime && { cpu: this.#cpuTime(), at: now };
    this.#timer = setInterval(() => this.#tick(), SAMPLE_MS);
    unref(this.#timer);
  }

  /** Samples the CPU, counts the active merchants and forgets the idle ones. */
  #tick(): void {
    const now = performance.now();
    if (now - this.#lastRequest > IDLE_STOP_MS) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      this.#active = 0;
      return;
    }
    if (this.#cpuTime && this.#sample) {
      const cpu = this.#cpuTime();
      const percent = (cpu - this.#sample.cpu) / 10 / (now - this.#sample.at);
      const served = (this.#charged / (now - this.#sample.at)) * DECAY_MS;
      this.#sample = { cpu, at: now };
      this.#busyNow = percent >= this.#busyPercent;
      if (this.#busyNow) {
        this.#capacity = Math.max(this.#capacity * Math.exp(-(now - this.#lastBusy) / CAPACITY_DECAY_MS), served);
        this.#lastBusy = now;
      } else if (now - this.#lastBusy > HOLD_MS) {
        this.#capacity = 0;
      }
    }
    this.#charged = 0;
    const total = decayed(this.#total, this.#totalAt, now);
    const forgetBefore = this.#ticks - CONNECTION_MEMORY_SAMPLES;
    let active = 0;
    for (const [id, use] of this.#uses) {
      use.concurrent = use.concurrentNow;
      use.concurrentNow = 0;
      if (this.#ticks % CONNECTION_MEMORY_SAMPLES === 0) {
        for (const [port, connection] of use.connections) if (connection.last < forgetBefore) use.connections.delete(port);
      }
      const charge = decayed(use.charge, use.at, now);
      const over = this.#busyNow && use.concurrent >= CONCURRENT_CONNECTIONS && charge * this.#active > total && charge * this.#active > this.#capacity;
      use.overSamples = over ? use.overSamples + 1 : 0;
      if (charge >= ACTIVE_MS) active++;
      // A request in progress has not been charged yet: its entry is kept while its connections are remembered.
      else if (now - use.refusedAt > HOLD_MS && use.connections.size === 0) this.#uses.delete(id);
    }
    this.#active = active;
    this.#ticks++;
  }
}

/**
 * What a finished request is charged: the time it held the pipeline, plus
 * the HTTP work around it, except for a 304 (docs/protocol.md#conditional-requests),
 * whose answer is a header block with no body to write. A 304 is not free:
 * it was authenticated, read the storage and hashed the body like a 200, and
 * a free answer would let a merchant fill a busy instance with conditional
 * requests that fair sharing could never refuse.
 */
export function requestCost(status: number, durationMs: number): number {
  return status === 304 ? durationMs : durationMs + REQUEST_OVERHEAD_MS;
}

/** What a charge made `at` is worth `now`, decaying with DECAY_MS. */
function decayed(charge: number, at: number, now: number): number {
  return charge * Math.exp((at - now) / DECAY_MS);
}

/** The process's CPU time in µs, where the runtime offers `process.cpuUsage` (Node, Bun, Deno). */
function processCpuTime(): (() => number) | undefined {
  const runtime = (globalThis as { process?: { cpuUsage?(): { user: number; system: number } } }).process;
  if (typeof runtime?.cpuUsage !== 'function') return undefined;
  return () => {
    const { user, system } = runtime.cpuUsage!();
    return user + system;
  };
}

/** The sampler alone must not keep a process alive (Node and Bun: `unref()`, Deno: `Deno.unrefTimer`). */
function unref(timer: ReturnType<typeof setInterval>): void {
  if (typeof timer === 'object' && timer !== null && 'unref' in timer) (timer as { unref(): void }).unref();
  else (globalThis as { Deno?: { unrefTimer?(id: number): void } }).Deno?.unrefTimer?.(timer as unknown as number);
}
