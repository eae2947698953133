/**
 * The dispatcher (docs/webhooks.md#delivery): every `serve` instance runs one over the storage's
 * outbox. It claims due deliveries, sends each outside any transaction (the address checked again
 * and connected to as checked, the body signed with every valid secret), and records the attempt:
 * delivered on a 2xx; else retried on the schedule (a `Retry-After` of a 429 or 503 honoured up to
 * a cap), failed for good when the schedule is used up; a `410 Gone` disables the endpoint, and so
 * does failing every attempt for `disableAfterFailingMs`. Sends run side by side up to
 * `maxInFlight`, so a slow receiver holds only its own deliveries (at most
 * `maxInFlightPerEndpoint` of them, across instances). Old deliveries are pruned as it goes.
 * Each attempt is reported to `onAttempt` (for the log and the metrics): ids, status, duration and
 * attempt number, never the secret nor the body.
 */
import { DEFAULTS } from '../defaults.js';
import type { AttemptRecord, DueDelivery, OutboxStats, WebhookOutbox } from '../storage/webhook-outbox.js';
import { checkWebhookUrl, resolveWebhookAddress, systemResolve, WebhookAddressError, type AddressPolicy, type Resolve } from './address-guard.js';
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
  /** `WEBHOOK_TIMEOUT`, ms. */
  timeoutMs?: number;
  disableAfterFailingMs?: number;
  retentionMs?: number;
  maxInFlightPerEndpoint?: number;
  /** Attempts this instance runs at once. */
  maxInFlight?: number;
  claimBatch?: number;
  leaseMs?: number;
  pollIntervalMs?: number;
  maxRetryAfterMs?: number;
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

export class WebhookDispatcher {
  readonly #o: Required<Omit<DispatcherOptions, 'onAttempt' | 'onError' | 'policy'>> & Pick<DispatcherOptions, 'onAttempt' | 'onError'> & { policy: AddressPolicy };
  readonly #inFlight = new Set<Promise<void>>();
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
      claimBatch: options.claimBatch ?? d.claimBatch,
      leaseMs: options.leaseMs ?? d.leaseMs,
      pollIntervalMs: options.pollIntervalMs ?? d.pollIntervalMs,
      maxRetryAfterMs: options.maxRetryAfterMs ?? d.maxRetryAfterMs,
      resolve: options.resolve ?? systemResolve,
      onAttempt: options.onAttempt,
      onError: options.onError,
      random: options.random ?? Math.random,
    };
    // A lease shorter than an attempt would let a second instance send what the first is still sending.
    if (this.#o.leaseMs <= this.#o.timeoutMs) throw new Error('The webhook lease must be longer than the attempt timeout.');
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
    const claimed = await this.#o.outbox.claimDue({ limit: Math.min(room, this.#o.claimBatch), leaseMs: this.#o.leaseMs, maxInFlightPerEndpoint: this.#o.maxInFlightPerEndpoint });
    for (const delivery of claimed) {
      const sending: Promise<void> = this.#deliver(delivery).finally(() => {
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

  async #deliver(delivery: DueDelivery): Promise<void> {
    const result = await this.#send(delivery);
    const record = this.#decide(delivery, result);
    try {
      await this.#o.outbox.recordAttempt(record);
    } catch (error) {
      // Not recorded: the lease runs out and the delivery is sent again (at least once).
      this.#o.onError?.(error);
    }
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

  async #send(delivery: DueDelivery): Promise<AttemptResult> {
    const body = eventBody(delivery.type as WebhookEventType, delivery.eventTimestamp, delivery.data);
    try {
      const url = checkWebhookUrl(delivery.url, this.#o.policy);
      const address = await resolveWebhookAddress(url, this.#o.policy, this.#o.resolve);
      const headers = webhookHeaders(delivery.secrets, delivery.eventId, Math.floor(Date.now() / 1000), body);
      return await sendAttempt({ url, address, headers, body, timeoutMs: this.#o.timeoutMs });
    } catch (error) {
      return { error: error instanceof WebhookAddressError ? 'address_refused' : 'internal', durationMs: 0 };
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
