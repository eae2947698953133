/**
 * The memory storage's webhooks (docs/webhooks.md#on-the-memory-storage): endpoints, and an
 * in-process queue of deliveries that the same dispatcher as on MySQL sends (`WebhookOutbox`), with
 * the same signing, retries and disabling. Nothing of it survives the process: the queue is lost
 * on exit, as the users' changes are. Events come from the storage's changes (`putUser`, to live
 * endpoints only), from `webhook.test`, and from the test simulator (`testEvents`, to test
 * endpoints only: docs/test-mode.md#webhooks).
 *
 * Everything is bounded: endpoints per merchant (the caller's limit, as on MySQL) and in all
 * (`maxEndpoints`); pending deliveries in all (`maxPendingDeliveries`), one merchant holding at most
 * half of them, so one merchant's dead receiver cannot take every other merchant's place; a delivery
 * that finds no room is dropped and counted (`stats().dropped`, `onDropped`), the change itself
 * stands (the listing's `updated_since` reconciles). Finished deliveries are kept for the retention
 * (`prune`) and at most `maxFinishedDeliveries` of them, for `listDeliveries`.
 *
 * A disabled merchant (`holdMerchant`) gets no new event and none of its deliveries is claimed:
 * they wait for it to be enabled again, as long as the retention, after which the prune cancels
 * them (`merchant_disabled`), as on MySQL (docs/webhooks.md#a-disabled-merchant).
 *
 * Secrets are held as they are, in process memory (there is no `MASTER_KEY` to seal them with and
 * nothing is written anywhere); they are never listed.
 */
import { randomBytes } from 'node:crypto';
import { MerchantApiError, StorageUnavailableError } from '../../errors.js';
import type { ChangedUserRecord, TestWebhookEvent, UserRecord } from '../contract.js';
import { newWebhookEndpointId, newWebhookSecret, rotationOverlapMessage, takeWebhookTest, webhookTestRefused, type NewWebhookEndpoint, type RotatedWebhookSecret, type WebhookEndpointMode, type WebhookEndpointSummary } from '../webhook-endpoints.js';
import { newerFirst, REDELIVER_DISABLED, type RedeliveryResult, type WebhookDelivery, type WebhookDeliveryPage, type WebhookDeliveryQuery, type WebhookRedelivery, DELIVERY_SCAN } from '../webhook-deliveries.js';
import { newEventId, userEventData, type AttemptRecord, type ClaimOptions, type DueDelivery, type OutboxStats, type WebhookOutbox } from '../webhook-outbox.js';

export interface MemoryWebhookOptions {
  /** Most endpoints over all merchants (default 10,000); one more is 409 `conflict`. */
  maxEndpoints?: number;
  /** Most deliveries waiting to be sent (default 100,000); one merchant holds at most half. */
  maxPendingDeliveries?: number;
  /** Most finished deliveries remembered for `listDeliveries` (default 10,000), the oldest forgotten first. */
  maxFinishedDeliveries?: number;
  /** Called once per delivery dropped for want of room: the merchant and the endpoint (for the log and a metric). */
  onDropped?: (merchantId: string, endpointId: string) => void;
}

/** When a refused test event may be asked for again: deliveries take seconds to go. */
const RETRY_AFTER_FULL_S = 60;

export const MEMORY_WEBHOOK_DEFAULTS = { maxEndpoints: 10_000, maxPendingDeliveries: 100_000, maxFinishedDeliveries: 10_000 } as const;

interface Endpoint {
  id: string;
  merchantId: string;
  /** `test`: added with a test key, receives the simulator's events only; `live`: the changes of live data only. */
  mode: WebhookEndpointMode;
  url: string;
  events: readonly string[];
  status: 'enabled' | 'disabled';
  disabledReason: string | null;
  createdAt: string;
  secret: string;
  previousSecret: string | null;
  previousExpiresAt: number;
  /** When the endpoint's test budget is whole again (ms; `takeWebhookTest`). */
  testBudgetUntil: number;
  /** When every attempt since began to fail (ms), or undefined. */
  failingSince: number | undefined;
  /** Deliveries waiting, in the order they were made. */
  pending: Set<Delivery>;
  /** Of `pending`, those claimed and not yet recorded. */
  leased: number;
}

interface WebhookEvent {
  id: string;
  merchantId: string;
  type: string;
  /** The body's `timestamp`, canonical. */
  timestamp: string;
  data: string;
}

interface Delivery {
  id: string;
  event: WebhookEvent;
  endpoint: Endpoint;
  state: 'pending' | 'delivered' | 'failed' | 'cancelled';
  attempts: number;
  nextAttemptAt: number;
  claimToken: string | null;
  leasedUntil: number;
  lastStatus: number | null;
  lastError: string | null;
  lastResponse: string | null;
  lastAttemptAt: number | null;
  createdAt: number;
}

/** A delivery as `listDeliveries` shows it: ids, state and the last attempt; never the body. */
export interface MemoryDeliverySummary {
  id: string;
  eventId: string;
  endpointId: string;
  merchantId: string;
  type: string;
  state: Delivery['state'];
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: string;
}

/** `2026-11-28T04:00:00.123000+00:00`: the API's canonical timestamp of a time in ms. */
function canonical(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 23)}000+00:00`;
}

export class MemoryWebhooks implements WebhookOutbox {
  readonly #endpoints = new Map<string, Endpoint>();
  /** Each merchant's endpoints, oldest first. */
  readonly #byMerchant = new Map<string, Endpoint[]>();
  /** Pending deliveries by id, for `recordAttempt`. */
  readonly #pendingById = new Map<string, Delivery>();
  /** Pending deliveries per merchant, for its half of the room. */
  readonly #pendingOf = new Map<string, number>();
  /** Finished deliveries, oldest first (insertion order). */
  readonly #finished = new Map<string, Delivery>();
  /** Merchants that are disabled: no event is made for them, none of their deliveries is claimed. */
  readonly #held = new Set<string>();
  readonly #o: Required<Omit<MemoryWebhookOptions, 'onDropped'>> & Pick<MemoryWebhookOptions, 'onDropped'>;
  #pending = 0;
  #dropped = 0;

  /** Deliveries dropped for want of room since the start (`merchant_api_webhook_dropped_total`). */
  get dropped(): number {
    return this.#dropped;
  }
  #nextDelivery = 0;

  constructor(options: MemoryWebhookOptions = {}) {
    this.#o = { ...MEMORY_WEBHOOK_DEFAULTS, ...options };
  }

  // The endpoint operations of the storage contract (`Storage.listWebhookEndpoints` and the rest).

  list(merchantId: string, mode: WebhookEndpointMode = 'live'): WebhookEndpointSummary[] {
    return (this.#byMerchant.get(merchantId) ?? []).filter((endpoint) => endpoint.mode === mode).map(summary);
  }

  add({ merchantId, url, events, maxPerMerchant, mode = 'live' }: NewWebhookEndpoint): WebhookEndpointSummary & { secret: string } {
    const own = this.#byMerchant.get(merchantId) ?? [];
    if (own.filter((endpoint) => endpoint.mode === mode).length >= maxPerMerchant) throw new MerchantApiError('conflict', `A merchant has at most ${maxPerMerchant} webhook endpoints.`);
    if (this.#endpoints.size >= this.#o.maxEndpoints) throw new MerchantApiError('conflict', `This server holds at most ${this.#o.maxEndpoints} webhook endpoints in all.`);
    const endpoint: Endpoint = {
      id: newWebhookEndpointId(),
      merchantId,
      mode,
      url,
      events: Object.freeze([...events]),
      status: 'enabled',
      disabledReason: null,
      createdAt: canonical(Date.now()),
      secret: newWebhookSecret(),
      previousSecret: null,
      previousExpiresAt: 0,
      testBudgetUntil: 0,
      failingSince: undefined,
      pending: new Set(),
      leased: 0,
    };
    this.#endpoints.set(endpoint.id, endpoint);
    own.push(endpoint);
    this.#byMerchant.set(merchantId, own);
    return { ...summary(endpoint), secret: endpoint.secret };
  }

  /** Removes the endpoint with its deliveries, pending or finished. */
  remove(merchantId: string, endpointId: string, mode?: WebhookEndpointMode): boolean {
    const endpoint = this.#own(merchantId, endpointId, mode);
    if (endpoint === undefined) return false;
    this.#endpoints.delete(endpoint.id);
    const rest = this.#byMerchant.get(merchantId)!.filter((e) => e !== endpoint);
    if (rest.length === 0) this.#byMerchant.delete(merchantId);
    else this.#byMerchant.set(merchantId, rest);
    for (const delivery of endpoint.pending) this.#unpend(delivery);
    for (const [id, delivery] of this.#finished) if (delivery.endpoint === endpoint) this.#finished.delete(id);
    return true;
  }

  /**
   * A new secret. With `expireOldInMs` the current one signs beside it until then, unless an earlier
   * rotation's overlap still runs: that is a 409 (at most two secrets sign, and the earlier one's end
   * was promised). Without, the current one stops at once and a running overlap goes on to its end.
   */
  rotate(merchantId: string, endpointId: string, expireOldInMs: number, mode?: WebhookEndpointMode): RotatedWebhookSecret | undefined {
    const endpoint = this.#own(merchantId, endpointId, mode);
    if (endpoint === undefined) return undefined;
    const now = Date.now();
    const overlapRunning = endpoint.previousSecret !== null && endpoint.previousExpiresAt > now;
    const keep = expireOldInMs > 0;
    if (keep && overlapRunning) throw new MerchantApiError('conflict', rotationOverlapMessage(canonical(endpoint.previousExpiresAt)));
    if (keep) {
      endpoint.previousSecret = endpoint.secret;
      endpoint.previousExpiresAt = now + expireOldInMs;
    } else if (!overlapRunning) {
      endpoint.previousSecret = null;
      endpoint.previousExpiresAt = 0;
    }
    endpoint.secret = newWebhookSecret();
    return { secret: endpoint.secret, oldExpiresAt: keep ? canonical(endpoint.previousExpiresAt) : null };
  }

  /**
   * Queues a `webhook.test` for one endpoint; a disabled one is 409; past the endpoint's test budget
   * 429 (as on MySQL: `takeWebhookTest`); a merchant holding its half of the queue 429, a full queue 503.
   */
  test(merchantId: string, endpointId: string, mode?: WebhookEndpointMode): string | undefined {
    const endpoint = this.#own(merchantId, endpointId, mode);
    if (endpoint === undefined) return undefined;
    if (endpoint.status !== 'enabled') throw new MerchantApiError('conflict', 'The webhook endpoint is disabled; enable it first.');
    const now = Date.now();
    const taken = takeWebhookTest(endpoint.testBudgetUntil, now);
    if ('retryAfter' in taken) throw webhookTestRefused(taken.retryAfter);
    this.#refuseWithoutRoom(merchantId);
    endpoint.testBudgetUntil = taken.until;
    const event: WebhookEvent = { id: newEventId(), merchantId, type: 'webhook.test', timestamp: canonical(now), data: JSON.stringify({ endpoint_id: endpoint.id }) };
    this.#queue(event, endpoint, now);
    return event.id;
  }

  /** Enables an endpoint again (after a 410 or days of failures); what was cancelled stays cancelled. */
  enable(merchantId: string, endpointId: string): boolean {
    // The operator's command: an endpoint of either mode.
    const endpoint = this.#own(merchantId, endpointId, 'any');
    if (endpoint === undefined) return false;
    endpoint.status = 'enabled';
    endpoint.disabledReason = null;
    endpoint.failingSince = undefined;
    return true;
  }

  /**
   * Holds a disabled merchant's webhooks (`held`), or lets them go again: while held, its changes
   * make no event and its pending deliveries wait (the storage calls it as a merchant is put).
   */
  holdMerchant(merchantId: string, held: boolean): void {
    if (held) this.#held.add(merchantId);
    else this.#held.delete(merchantId);
  }

  /** Whether any enabled endpoint of `merchantId`, an active merchant, receives events (a change costs nothing more when none does). */
  hasSubscribers(merchantId: string): boolean {
    return !this.#held.has(merchantId) && this.#byMerchant.get(merchantId)?.some((endpoint) => endpoint.mode === 'live' && endpoint.status === 'enabled') === true;
  }

  /**
   * The events of one change of a user shared with `merchantId` (`before`: the record held until
   * now, undefined for a new share): `user.shared`, `user.deactivated` (`deactivated_at` set), else
   * `user.updated`, as the MySQL import decides; one delivery per enabled live endpoint that receives
   * it (a test endpoint never receives a change of live data).
   */
  userChanged(merchantId: string, before: UserRecord | undefined, after: ChangedUserRecord): void {
    const endpoints = this.#byMerchant.get(merchantId);
    if (endpoints === undefined || this.#held.has(merchantId)) return;
    const type = before === undefined ? 'user.shared' : before.deactivated_at === null && after.deactivated_at !== null ? 'user.deactivated' : 'user.updated';
    const receivers = endpoints.filter((endpoint) => endpoint.mode === 'live' && endpoint.status === 'enabled' && endpoint.events.includes(type));
    if (receivers.length === 0) return;
    const now = Date.now();
    // The event's time is the change's: `timestamp` equals the record's `updated_at`.
    const event: WebhookEvent = { id: newEventId(), merchantId, type, timestamp: after.updated_at, data: userEventData(after) };
    for (const endpoint of receivers) {
      if (this.#hasRoom(merchantId)) this.#queue(event, endpoint, now);
      else this.#drop(merchantId, endpoint.id);
    }
  }

  /**
   * The simulator's events of `merchantId` (docs/test-mode.md#webhooks), in order: one delivery per
   * enabled test endpoint that receives the type, and none to a live endpoint. Bounded as a change's
   * events are: a delivery that finds no room is dropped and counted.
   */
  testEvents(merchantId: string, events: readonly TestWebhookEvent[]): void {
    const endpoints = this.#byMerchant.get(merchantId);
    if (endpoints === undefined || this.#held.has(merchantId)) return;
    const now = Date.now();
    for (const { type, timestamp, data } of events) {
      const event: WebhookEvent = { id: newEventId(), merchantId, type, timestamp, data };
      for (const endpoint of endpoints) {
        if (endpoint.mode !== 'test' || endpoint.status !== 'enabled' || !endpoint.events.includes(type)) continue;
        if (this.#hasRoom(merchantId)) this.#queue(event, endpoint, now);
        else this.#drop(merchantId, endpoint.id);
      }
    }
  }

  /** The newest finished and pending deliveries first, of one endpoint and/or in one state; at most `limit`. */
  listDeliveries(options: { merchantId?: string; endpointId?: string; state?: Delivery['state']; limit?: number } = {}): MemoryDeliverySummary[] {
    const all = [...this.#finished.values()];
    for (const endpoint of this.#endpoints.values()) all.push(...endpoint.pending);
    return all
      .filter((d) => (options.merchantId === undefined || d.event.merchantId === options.merchantId) && (options.endpointId === undefined || d.endpoint.id === options.endpointId) && (options.state === undefined || d.state === options.state))
      .sort((a, b) => Number(b.id) - Number(a.id))
      .slice(0, options.limit ?? 100)
      .map((d) => ({ id: d.id, eventId: d.event.id, endpointId: d.endpoint.id, merchantId: d.event.merchantId, type: d.event.type, state: d.state, attempts: d.attempts, lastStatus: d.lastStatus, lastError: d.lastError, createdAt: canonical(d.createdAt) }));
  }

  /**
   * One page of an endpoint's deliveries, newest first (`Storage.listEndpointDeliveries`): at most
   * `limit`, looking at most `DELIVERY_SCAN` of them; undefined when the merchant has no such endpoint.
   */
  deliveryPage(query: WebhookDeliveryQuery): WebhookDeliveryPage | undefined {
    const endpoint = this.#own(query.merchantId, query.endpointId, query.mode);
    if (endpoint === undefined) return undefined;
    const after = query.after;
    const scanned = this.#deliveriesOf(endpoint)
      .map((d) => ({ d, key: { createdAt: canonical(d.createdAt), id: d.id } }))
      .filter(({ key }) => after === undefined || newerFirst(after, key) < 0)
      .sort((a, b) => newerFirst(a.key, b.key))
      .slice(0, query.state === undefined ? query.limit + 1 : DELIVERY_SCAN);
    const matching = scanned.filter(({ d }) => query.state === undefined || d.state === query.state);
    const items = matching.slice(0, query.limit);
    const next = matching.length > query.limit ? items[items.length - 1]!.key : scanned.length === DELIVERY_SCAN && query.state !== undefined ? scanned[scanned.length - 1]!.key : null;
    return { items: items.map(({ d }) => deliverySummary(d)), next };
  }

  /**
   * Sends an endpoint's deliveries again, due now, with the same event id (`Storage.redeliverEndpointDeliveries`):
   * those of one event, or the oldest `max` created since a time. One being sent right now is left
   * to its attempt. A disabled endpoint is 409; the queue's bounds hold (a merchant at its half: 429).
   */
  redeliver(request: WebhookRedelivery): RedeliveryResult | undefined {
    const endpoint = this.#own(request.merchantId, request.endpointId, request.mode);
    if (endpoint === undefined) return undefined;
    if (endpoint.status !== 'enabled') throw REDELIVER_DISABLED;
    const { target } = request;
    const keyOf = (d: Delivery) => ({ createdAt: canonical(d.createdAt), id: d.id });
    // Oldest first; with `after`, those past it only.
    const found = this.#deliveriesOf(endpoint)
      .filter((d) => ('eventId' in target ? d.event.id === target.eventId : canonical(d.createdAt) >= target.since && (target.after === undefined || newerFirst(keyOf(d), target.after) < 0)))
      .sort((a, b) => newerFirst(keyOf(b), keyOf(a)));
    const taken = found.slice(0, request.max);
    const now = Date.now();
    let queued = 0;
    for (const delivery of taken) {
      if (delivery.state === 'pending') {
        if (delivery.claimToken !== null) continue;
        delivery.nextAttemptAt = now;
        queued++;
        continue;
      }
      if (!this.#hasRoom(request.merchantId)) {
        if (queued === 0) this.#refuseWithoutRoom(request.merchantId);
        break;
      }
      this.#finished.delete(delivery.id);
      delivery.state = 'pending';
      delivery.nextAttemptAt = now;
      delivery.claimToken = null;
      endpoint.pending.add(delivery);
      this.#pendingById.set(delivery.id, delivery);
      this.#pending++;
      this.#pendingOf.set(request.merchantId, (this.#pendingOf.get(request.merchantId) ?? 0) + 1);
      queued++;
    }
    return { matched: taken.length, queued, next: found.length > request.max ? keyOf(taken[taken.length - 1]!) : null };
  }

  /** Every delivery of one endpoint kept: pending, and finished within the retention. */
  #deliveriesOf(endpoint: Endpoint): Delivery[] {
    const all = [...endpoint.pending];
    for (const delivery of this.#finished.values()) if (delivery.endpoint === endpoint) all.push(delivery);
    return all;
  }

  // The outbox the dispatcher runs on (`WebhookOutbox`).

  async claimDue(options: ClaimOptions): Promise<DueDelivery[]> {
    const now = Date.now();
    const token = randomBytes(16).toString('base64url');
    // A merchant at its share of the dispatcher's slots is skipped: its deliveries stay pending.
    const taken = new Map<string, number>();
    const merchantRoom = (merchantId: string) => (options.merchantRoom === undefined ? Number.POSITIVE_INFINITY : options.merchantRoom(merchantId) - (taken.get(merchantId) ?? 0));
    // Endpoints take turns, starting at a random one: each gets a share of the round.
    // A disabled merchant's endpoints wait: left out before the round is shared.
    const candidates = [...this.#endpoints.values()].filter((endpoint) => endpoint.status === 'enabled' && endpoint.pending.size > 0 && !this.#held.has(endpoint.merchantId) && merchantRoom(endpoint.merchantId) > 0);
    if (candidates.length === 0) return [];
    const start = Math.floor(Math.random() * candidates.length);
    const share = Math.max(1, Math.ceil(options.limit / Math.min(candidates.length, options.limit)));
    const claimed: DueDelivery[] = [];
    for (let i = 0; i < candidates.length && claimed.length < options.limit; i++) {
      const endpoint = candidates[(start + i) % candidates.length]!;
      this.#expireLeases(endpoint, now);
      let room = Math.min(share, options.maxInFlightPerEndpoint - endpoint.leased, options.limit - claimed.length, merchantRoom(endpoint.merchantId));
      if (room <= 0) continue;
      const secrets = [endpoint.secret, ...(endpoint.previousSecret !== null && endpoint.previousExpiresAt > now ? [endpoint.previousSecret] : [])];
      for (const delivery of endpoint.pending) {
        if (room === 0) break;
        if (delivery.claimToken !== null || delivery.nextAttemptAt > now) continue;
        delivery.claimToken = token;
        delivery.leasedUntil = now + options.leaseMs;
        endpoint.leased++;
        room--;
        taken.set(endpoint.merchantId, (taken.get(endpoint.merchantId) ?? 0) + 1);
        claimed.push({
          id: delivery.id,
          eventId: delivery.event.id,
          endpointId: endpoint.id,
          merchantId: endpoint.merchantId,
          url: endpoint.url,
          type: delivery.event.type,
          eventTimestamp: delivery.event.timestamp,
          data: delivery.event.data,
          attempts: delivery.attempts,
          secrets,
          ...(endpoint.failingSince !== undefined ? { failingForMs: now - endpoint.failingSince } : {}),
          claimToken: token,
        });
      }
    }
    return claimed;
  }

  async recordAttempt(record: AttemptRecord): Promise<void> {
    const delivery = this.#pendingById.get(record.delivery.id);
    // The endpoint was removed or disabled meanwhile, or the lease ran out and the delivery was claimed again: not this record's.
    if (delivery === undefined || delivery.claimToken !== record.delivery.claimToken) return;
    const { endpoint } = delivery;
    const now = Date.now();
    delivery.claimToken = null;
    endpoint.leased--;
    delivery.attempts++;
    delivery.lastAttemptAt = now;
    delivery.lastStatus = record.status ?? null;
    delivery.lastError = record.error ?? null;
    delivery.lastResponse = record.responseBody === undefined ? null : Buffer.from(record.responseBody, 'utf8').subarray(0, 256).toString('utf8');
    if (record.outcome === 'delivered') endpoint.failingSince = undefined;
    else endpoint.failingSince ??= now;
    if (record.outcome === 'retry') delivery.nextAttemptAt = record.nextAttemptAt?.getTime() ?? now;
    else this.#finish(delivery, record.outcome);
    if (record.disableEndpoint !== undefined) {
      endpoint.status = 'disabled';
      endpoint.disabledReason = record.disableEndpoint;
      // Every pending one, those in flight too: their records then find nothing to record (as on MySQL).
      for (const other of [...endpoint.pending]) this.#finish(other, 'cancelled');
    }
  }

  async prune(before: Date): Promise<number> {
    const cutoff = before.getTime();
    let deleted = 0;
    // A disabled merchant's deliveries wait as long as the retention; older ones are cancelled.
    for (const merchantId of this.#held) {
      for (const endpoint of this.#byMerchant.get(merchantId) ?? []) {
        for (const delivery of [...endpoint.pending]) {
          if (delivery.createdAt >= cutoff) continue;
          delivery.lastError = 'merchant_disabled';
          this.#finish(delivery, 'cancelled');
        }
      }
    }
    for (const [id, delivery] of this.#finished) {
      // Not in creation order (a redelivered one is finished again later): every one is looked at, at most `maxFinishedDeliveries`.
      if (delivery.createdAt >= cutoff) continue;
      this.#finished.delete(id);
      deleted++;
    }
    return deleted;
  }

  async stats(): Promise<OutboxStats & { dropped: number }> {
    const now = Date.now();
    let firstDue = Number.POSITIVE_INFINITY;
    for (const endpoint of this.#endpoints.values()) {
      // A disabled merchant's deliveries are held, not late: they do not age the queue.
      if (this.#held.has(endpoint.merchantId)) continue;
      for (const delivery of endpoint.pending) if (delivery.claimToken === null && delivery.nextAttemptAt < firstDue) firstDue = delivery.nextAttemptAt;
    }
    return { pending: this.#pending, oldestDueAgeMs: firstDue <= now ? now - firstDue : 0, dropped: this.#dropped };
  }

  /** Forgets everything (the storage is closed). */
  clear(): void {
    this.#endpoints.clear();
    this.#byMerchant.clear();
    this.#pendingOf.clear();
    this.#pendingById.clear();
    this.#finished.clear();
    this.#held.clear();
    this.#pending = 0;
  }

  /** `mode`: the API's operations act on one mode's endpoints (default `live`); `any` for the operator's. */
  #own(merchantId: string, endpointId: string, mode: WebhookEndpointMode | 'any' = 'live'): Endpoint | undefined {
    const endpoint = this.#endpoints.get(endpointId);
    // Another merchant's endpoint, or one of the other mode, is not found, as one that does not exist.
    return endpoint?.merchantId === merchantId && (mode === 'any' || endpoint.mode === mode) ? endpoint : undefined;
  }

  #hasRoom(merchantId: string): boolean {
    return this.#pending < this.#o.maxPendingDeliveries && (this.#pendingOf.get(merchantId) ?? 0) < this.#merchantShare();
  }

  /** As the replay store answers (./salts.ts): a merchant holding its half, 429; a full queue, 503. */
  #refuseWithoutRoom(merchantId: string): void {
    const share = this.#merchantShare();
    const own = this.#pendingOf.get(merchantId) ?? 0;
    if (own >= share) {
      throw new MerchantApiError('too_many_requests', `This merchant has ${own} webhook deliveries waiting, the most one merchant may (half of the queue's ${this.#o.maxPendingDeliveries}); try again once some are sent.`, {
        retryAfter: RETRY_AFTER_FULL_S,
        policy: { name: 'webhook_queue', quota: share },
      });
    }
    if (this.#pending >= this.#o.maxPendingDeliveries) throw new StorageUnavailableError(`The webhook queue is full: ${this.#o.maxPendingDeliveries} deliveries waiting.`, { retryAfter: RETRY_AFTER_FULL_S });
  }

  #merchantShare(): number {
    return Math.max(1, Math.floor(this.#o.maxPendingDeliveries / 2));
  }

  #queue(event: WebhookEvent, endpoint: Endpoint, now: number): void {
    const delivery: Delivery = { id: String(++this.#nextDelivery), event, endpoint, state: 'pending', attempts: 0, nextAttemptAt: now, claimToken: null, leasedUntil: 0, lastStatus: null, lastError: null, lastResponse: null, lastAttemptAt: null, createdAt: now };
    endpoint.pending.add(delivery);
    this.#pendingById.set(delivery.id, delivery);
    this.#pending++;
    this.#pendingOf.set(event.merchantId, (this.#pendingOf.get(event.merchantId) ?? 0) + 1);
  }

  #drop(merchantId: string, endpointId: string): void {
    this.#dropped++;
    this.#o.onDropped?.(merchantId, endpointId);
  }

  /** Takes a delivery out of the pending ones (and out of the merchant's count). */
  #unpend(delivery: Delivery): void {
    if (!delivery.endpoint.pending.delete(delivery)) return;
    this.#pendingById.delete(delivery.id);
    if (delivery.claimToken !== null) delivery.endpoint.leased--;
    this.#pending--;
    const left = (this.#pendingOf.get(delivery.event.merchantId) ?? 1) - 1;
    if (left === 0) this.#pendingOf.delete(delivery.event.merchantId);
    else this.#pendingOf.set(delivery.event.merchantId, left);
  }

  #finish(delivery: Delivery, state: 'delivered' | 'failed' | 'cancelled'): void {
    this.#unpend(delivery);
    delivery.state = state;
    delivery.claimToken = null;
    if (!this.#endpoints.has(delivery.endpoint.id)) return;
    this.#finished.set(delivery.id, delivery);
    if (this.#finished.size > this.#o.maxFinishedDeliveries) this.#finished.delete(this.#finished.keys().next().value!);
  }

  /** A claim whose lease ran out (its attempt never recorded) is due again. */
  #expireLeases(endpoint: Endpoint, now: number): void {
    if (endpoint.leased === 0) return;
    for (const delivery of endpoint.pending) {
      if (delivery.claimToken !== null && delivery.leasedUntil <= now) {
        delivery.claimToken = null;
        endpoint.leased--;
      }
    }
  }
}

function deliverySummary(d: Delivery): WebhookDelivery {
  return {
    id: d.id,
    eventId: d.event.id,
    endpointId: d.endpoint.id,
    merchantId: d.event.merchantId,
    type: d.event.type,
    state: d.state,
    attempts: d.attempts,
    nextAttemptAt: d.state === 'pending' ? canonical(d.nextAttemptAt) : null,
    lastAttemptAt: d.lastAttemptAt === null ? null : canonical(d.lastAttemptAt),
    lastStatus: d.lastStatus,
    lastError: d.lastError,
    createdAt: canonical(d.createdAt),
  };
}

function summary(endpoint: Endpoint): WebhookEndpointSummary {
  return { id: endpoint.id, merchantId: endpoint.merchantId, url: endpoint.url, events: [...endpoint.events], status: endpoint.status, disabledReason: endpoint.disabledReason, createdAt: endpoint.createdAt };
}
