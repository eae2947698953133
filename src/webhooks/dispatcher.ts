/**
 * The dispatcher (docs/webhooks.md#delivery): every `serve` instance runs one over the storage's
 * outbox. It claims due deliveries, sends each outside any transaction (the address checked again
 * and connected to as checked, the body signed with every valid secret), and records the attempt:
 * delivered on a 2xx; else retried on the schedule (a `Retry-After` of a 429 or 503 honoured up to
 * a cap), failed for good when the schedule is used up; a `410 Gone` disables the endpoint, and so
 * does failing every attempt for `disableAfterFailingMs`. Sends run side by side up to
 * `maxInFlight`, so a slow receiver holds only its own deliveries (at most
 * `maxInFlightPerEndpoint` of them, across instances), and one merchant at most
 * `maxInFlightPerMerchant` of this instance's (a quarter): the claim leaves a merchant's deliveries
 * pending once it holds its share, so two merchants' dead receivers still leave half the room to
 * the others. An attempt, name resolution included (`./name-resolver.ts`: no thread of the pool,
 * its own bound), ends within `timeoutMs` and before its claim's lease, and its result is recorded
 * (tried again while the outbox fails), so a live instance never sends a delivery twice. Old
 * deliveries are pruned as it goes. Each attempt is reported to `onAttempt` (for the log and the
 * metrics): ids, status, duration from its start (resolution included) and attempt number, never
 * the secret nor the body.
 */
import { DEFAULTS } from '../defaults.js';
import type { AttemptRecord, DueDelivery, OutboxStats, WebhookOutbox } from '../storage/webhook-outbox.js';
import { checkWebhookUrl, resolveWebhookAddress, systemResolve, WebhookAddressError, type AddressPolicy, type Resolve } from './address-guard.js';
import { NameResolutionError } from './name-resolver.js';
import { eventBody, type WebhookEventType } from './events.js';
import { DEFAULT_RETRY_SCHEDULE, nextRetryDelay, retryAfterMs } from './retry-schedule.js';
import { isDelivered, sendAttempt, type AttemptResult } from './send-attempt.js';
import { webhookHeaders } from './signature.js';

/** One attempt as the log and the metrics see it: no secret, no body. */
export interface AttemptEvent {
  endpointId: string;
  eventId: string;
  merchantId: string;
  type: string;
  /** 1 for the first attempt. */
  attempt: number;
  outcome: AttemptRecord['outcome'];
  status?: number;
  error?: string;
  durationMs: number;
  disabledEndpoint?: 'gone' | 'failing';
}

export interface DispatcherOptions {
  outbox: WebhookOutbox;
  /** `WEBHOOK_ALLOW_PRIVATE`, `WEBHOOK_ALLOW_HTTP`: development and tests only. */
  policy?: AddressPolicy;
  /** Delays before each retry, ms (`WEBHOOK_RETRY_SCHEDULE`). */
  retrySchedule?: readonly number[];
  /** `WEBHOOK_TIMEOUT`, ms: one attempt, name resolution included. */
  timeoutMs?: number;
  /** Longest the name of an endpoint may take to resolve, ms, within `timeoutMs` (default 5 s, at most `timeoutMs`). */
  resolveTimeoutMs?: number;
  disableAfterFailingMs?: number;
  retentionMs?: number;
  maxInFlightPerEndpoint?: number;
  /** Attempts this instance runs at once (default 64). */
  maxInFlight?: number;
  /** Attempts of one merchant this instance runs at once: default a quarter of `maxInFlight`; less than half of it (or 1). */
  maxInFlightPerMerchant?: number;
  claimBatch?: number;
  /** How long a claim holds, ms: at least `timeoutMs` + 1 s, so an attempt is recorded before another instance may take it. */
  leaseMs?: number;
  pollIntervalMs?: number;
  maxRetryAfterMs?: number;
  /** Every address of a name (default: the system's DNS servers, without the thread pool: `./name-resolver.ts`). */
  resolve?: Resolve;
  onAttempt?: (event: AttemptEvent) => void;
  /** A round that failed (the database away): the dispatcher waits a poll interval and goes on. */
  onError?: (error: unknown) => void;
  random?: () => number;
}

/** What `/healthz` shows of the dispatcher. */
export interface DispatcherHealth {
  running: boolean;
  inFlight: number;
  /** When the last round finished (ISO), or null before the first. */
  lastRoundAt: string | null;
  /** The last round's failure, or null. */
  lastError: string | null;
}

const PRUNE_INTERVAL_MS = 10 * 60_000;
/** Time an attempt leaves itself before its lease ends, to record its result. */
export const LEASE_MARGIN_MS = 1000;
/** Pause between tries to record an attempt while the outbox fails, at most. */
const RECORD_RETRY_MAX_MS = 2000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** `promise`, or a rejection with `NameResolutionError('timeout')` after `ms`. */
function resolvedWithin<T>(promise: Promise<T>, ms: number, hostname: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new NameResolutionError('timeout', `${hostname} did not resolve within ${Math.round(ms)} ms.`)), Math.max(0, ms));
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

export class WebhookDispatcher {
  readonly #o: Required<Omit<DispatcherOptions, 'onAttempt' | 'onError' | 'policy'>> & Pick<DispatcherOptions, 'onAttempt' | 'onError'> & { policy: AddressPolicy };
  readonly #inFlight = new Set<Promise<void>>();
  /** Attempts in flight per merchant, for its share. */
  readonly #merchantInFlight = new Map<string, number>();
  #running = false;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #lastRoundAt: string | null = null;
  #lastError: string | null = null;
  #lastPrune = 0;

  constructor(options: DispatcherOptions) {
    const d = DEFAULTS.webhooks;
    this.#o = {
      outbox: options.outbox,
      policy: options.policy ?? {},
      retrySchedule: options.retrySchedule ?? DEFAULT_RETRY_SCHEDULE,
      timeoutMs: options.timeoutMs ?? d.timeoutMs,
      disableAfterFailingMs: options.disableAfterFailingMs ?? d.disableAfterFailingMs,
      retentionMs: options.retentionMs ?? d.retentionMs,
      maxInFlightPerEndpoint: options.maxInFlightPerEndpoint ?? d.maxInFlightPerEndpoint,
      maxInFlight: options.maxInFlight ?? 64,
      maxInFlightPerMerchant: options.maxInFlightPerMerchant ?? Math.max(1, Math.floor((options.maxInFlight ?? 64) / 4)),
      resolveTimeoutMs: Math.min(options.resolveTimeoutMs ?? 5000, options.timeoutMs ?? d.timeoutMs),
      claimBatch: options.claimBatch ?? d.claimBatch,
      leaseMs: options.leaseMs ?? d.leaseMs,
      pollIntervalMs: options.pollIntervalMs ?? d.pollIntervalMs,
      maxRetryAfterMs: options.maxRetryAfterMs ?? d.maxRetryAfterMs,
      resolve: options.resolve ?? systemResolve,
      onAttempt: options.onAttempt,
      onError: options.onError,
      random: options.random ?? Math.random,
    };
    // A lease shorter than an attempt and its record would let a second instance send what the first is still sending.
    const { leaseMs, timeoutMs, maxInFlight, maxInFlightPerMerchant } = this.#o;
    if (!(leaseMs >= timeoutMs + LEASE_MARGIN_MS)) {
      throw new Error(`The webhook lease (${leaseMs} ms) must be at least ${LEASE_MARGIN_MS} ms longer than the attempt timeout (${timeoutMs} ms, name resolution included): otherwise an attempt could outlive its claim and be sent twice.`);
    }
    // Two merchants must never hold every slot: each less than half of them (1 when there are fewer than 3).
    if (!Number.isInteger(maxInFlightPerMerchant) || maxInFlightPerMerchant < 1 || (maxInFlight >= 3 && maxInFlightPerMerchant * 2 >= maxInFlight)) {
      throw new Error(`maxInFlightPerMerchant (${maxInFlightPerMerchant}) must be a whole number from 1 to less than half of maxInFlight (${maxInFlight}): two merchants must never take every slot.`);
    }
  }

  /** Starts the loop; `stop()` ends it. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /** Stops claiming and waits for the attempts in flight to be recorded. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#wake?.();
    await this.#loop;
    await Promise.allSettled([...this.#inFlight]);
  }

  health(): DispatcherHealth {
    return { running: this.#running, inFlight: this.#inFlight.size, lastRoundAt: this.#lastRoundAt, lastError: this.#lastError };
  }

  stats(): Promise<OutboxStats> {
    return this.#o.outbox.stats();
  }

  /** One round: claims what is due and room allows, and starts sending it. Returns how many were claimed. */
  async runOnce(): Promise<number> {
    if (Date.now() - this.#lastPrune >= PRUNE_INTERVAL_MS) {
      this.#lastPrune = Date.now();
      await this.#o.outbox.prune(new Date(Date.now() - this.#o.retentionMs));
    }
    const room = this.#o.maxInFlight - this.#inFlight.size;
    if (room <= 0) return 0;
    const perMerchant = this.#o.maxInFlightPerMerchant;
    // The lease is counted from before the claim: an attempt ends before it, however long the claim took.
    const leaseEndsAt = Date.now() + this.#o.leaseMs;
    const claimed = await this.#o.outbox.claimDue({
      limit: Math.min(room, this.#o.claimBatch),
      leaseMs: this.#o.leaseMs,
      maxInFlightPerEndpoint: this.#o.maxInFlightPerEndpoint,
      // A merchant at its share: its deliveries stay pending, for this instance later or another now.
      merchantRoom: (merchantId) => perMerchant - (this.#merchantInFlight.get(merchantId) ?? 0),
    });
    for (const delivery of claimed) {
      const { merchantId } = delivery;
      this.#merchantInFlight.set(merchantId, (this.#merchantInFlight.get(merchantId) ?? 0) + 1);
      const sending: Promise<void> = this.#deliver(delivery, leaseEndsAt).finally(() => {
        const left = (this.#merchantInFlight.get(merchantId) ?? 1) - 1;
        if (left <= 0) this.#merchantInFlight.delete(merchantId);
        else this.#merchantInFlight.set(merchantId, left);
        this.#inFlight.delete(sending);
        this.#wake?.();
      });
      this.#inFlight.add(sending);
    }
    return claimed.length;
  }

  /** Waits until nothing is in flight (tests, shutdown). */
  async drain(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
  }

  async #run(): Promise<void> {
    while (this.#running) {
      let claimed = 0;
      try {
        claimed = await this.runOnce();
        this.#lastError = null;
      } catch (error) {
        this.#lastError = error instanceof Error ? error.name : 'error';
        this.#o.onError?.(error);
      }
      this.#lastRoundAt = new Date().toISOString();
      // Claimed some and has room: straight on. Else wait for the poll interval or a finished attempt.
      if (claimed > 0 && this.#inFlight.size < this.#o.maxInFlight) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.#o.pollIntervalMs);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.#wake = done;
      });
      this.#wake = undefined;
    }
  }

  async #deliver(delivery: DueDelivery, leaseEndsAt: number): Promise<void> {
    const started = performance.now();
    // The attempt's end: its timeout, and in any case before the lease ends, with time to record it.
    const deadline = Math.min(Date.now() + this.#o.timeoutMs, leaseEndsAt - LEASE_MARGIN_MS);
    // A claim that took its whole lease to come back (the database crawling): not sent, due again when the lease ends.
    if (deadline - Date.now() < 1) return;
    const sent = await this.#send(delivery, deadline);
    const result = { ...sent, durationMs: performance.now() - started };
    const record = this.#decide(delivery, result);
    await this.#record(record, leaseEndsAt);
    this.#o.onAttempt?.({
      endpointId: delivery.endpointId,
      eventId: delivery.eventId,
      merchantId: delivery.merchantId,
      type: delivery.type,
      attempt: delivery.attempts + 1,
      outcome: record.outcome,
      ...(result.status !== undefined ? { status: result.status } : {}),
      ...(result.error !== undefined ? { error: result.error } : {}),
      durationMs: result.durationMs,
      ...(record.disableEndpoint !== undefined ? { disabledEndpoint: record.disableEndpoint } : {}),
    });
  }

  /**
   * Records the attempt, trying again while the outbox fails (the database away): until the lease
   * has run out twice over while running, three times while stopping. A record that does not land
   * leaves the delivery to be sent again when its lease ends (at least once).
   */
  async #record(record: AttemptRecord, leaseEndsAt: number): Promise<void> {
    for (let tries = 1; ; tries++) {
      try {
        await this.#o.outbox.recordAttempt(record);
        return;
      } catch (error) {
        this.#o.onError?.(error);
        const pause = Math.min(RECORD_RETRY_MAX_MS, 100 * 2 ** tries);
        if (this.#running ? Date.now() + pause > leaseEndsAt + this.#o.leaseMs : tries >= 3) return;
        await sleep(pause);
      }
    }
  }

  /** Resolves, checks and sends, all before `deadline` (ms since the epoch). */
  async #send(delivery: DueDelivery, deadline: number): Promise<Omit<AttemptResult, 'durationMs'>> {
    const body = eventBody(delivery.type as WebhookEventType, delivery.eventTimestamp, delivery.data);
    try {
      const url = checkWebhookUrl(delivery.url, this.#o.policy);
      // The name's own bound, within what is left of the attempt's time.
      const resolve: Resolve = (hostname) => resolvedWithin(this.#o.resolve(hostname), Math.min(this.#o.resolveTimeoutMs, deadline - Date.now()), hostname);
      const address = await resolveWebhookAddress(url, this.#o.policy, resolve);
      const left = deadline - Date.now();
      if (left < 1) return { error: 'timeout' };
      const headers = webhookHeaders(delivery.secrets, delivery.eventId, Math.floor(Date.now() / 1000), body);
      return await sendAttempt({ url, address, headers, body, timeoutMs: left });
    } catch (error) {
      if (!(error instanceof WebhookAddressError)) return { error: 'internal' };
      return { error: error.reason === 'refused' ? 'address_refused' : error.reason };
    }
  }

  #decide(delivery: DueDelivery, result: AttemptResult): AttemptRecord {
    const base = {
      delivery,
      durationMs: result.durationMs,
      ...(result.status !== undefined ? { status: result.status } : {}),
      ...(result.error !== undefined ? { error: result.error } : {}),
      ...(result.responseBody !== undefined ? { responseBody: result.responseBody } : {}),
    };
    if (isDelivered(result)) return { ...base, outcome: 'delivered' };
    if (result.status === 410) return { ...base, outcome: 'failed', disableEndpoint: 'gone' };
    if ((delivery.failingForMs ?? 0) >= this.#o.disableAfterFailingMs) return { ...base, outcome: 'failed', disableEndpoint: 'failing' };
    const honoured = result.status === 429 || result.status === 503 ? retryAfterMs(result.retryAfter, Date.now()) : undefined;
    const delay = nextRetryDelay(this.#o.retrySchedule, delivery.attempts + 1, this.#o.random(), honoured, this.#o.maxRetryAfterMs);
    if (delay === undefined) return { ...base, outcome: 'failed' };
    return { ...base, outcome: 'retry', nextAttemptAt: new Date(Date.now() + delay) };
  }
}
