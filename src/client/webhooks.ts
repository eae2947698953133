/**
 * `client.webhooks`: the merchant's own webhook endpoints (docs/webhooks.md#endpoints). Reads are
 * retried as every read is; a POST carries an `Idempotency-Key` (the caller's `idempotencyKey`, or a
 * random UUID per call, the same on every retry: ./idempotency-key.ts), so it is retried too and the
 * server runs it once (docs/protocol.md#safe-retries). A DELETE is sent once and never retried (a
 * lost answer could have been a change made: `list()` tells).
 */
import { pct } from '../signing/index.js';
import { MerchantResponseError } from './errors.js';
import type { Transport } from './transport.js';
import { idempotencyKeyOf } from './idempotency-key.js';
import type { ChangeOptions, RequestOptions } from './types.js';

/** The event types an endpoint can receive. */
export type WebhookEventType = 'user.shared' | 'user.updated' | 'user.deactivated' | 'user.unshared';

/** An endpoint as `list()` answers it: never its secret. */
export interface WebhookEndpoint {
  id: string;
  url: string;
  events: WebhookEventType[];
  status: 'enabled' | 'disabled';
  /** `gone` (it answered 410), `failing` (every attempt failed for days), `operator`; null while enabled. */
  disabled_reason: string | null;
  created_at: string;
}

/** An endpoint just added: with its signing secret, shown only this once. */
export interface CreatedWebhookEndpoint extends WebhookEndpoint {
  secret: string;
}

export interface CreateWebhookOptions extends ChangeOptions {
  /** Default: every user event. */
  events?: readonly WebhookEventType[];
}

export interface RotateWebhookSecretOptions extends ChangeOptions {
  /** How long the old secret keeps signing beside the new one: `24h`, `7d`; default: it stops at once. */
  expireOldIn?: string;
}

export interface RotatedWebhookSecret {
  id: string;
  secret: string;
  old_secret_expires_at: string | null;
}

export interface QueuedWebhookTest {
  event_id: string;
  endpoint_id: string;
}

/** A delivery of an event to an endpoint, as `deliveries()` answers it: never the body or the receiver's answer. */
export interface WebhookDelivery {
  id: string;
  /** The `webhook-id` the receiver got: the same on every attempt and redelivery. */
  event_id: string;
  endpoint_id: string;
  merchant_id: string;
  type: WebhookEventType | 'webhook.test';
  state: 'pending' | 'delivered' | 'failed' | 'cancelled';
  attempts: number;
  /** While pending: when it is tried next. */
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  /** The HTTP status the receiver answered the last attempt with. */
  last_status: number | null;
  /** Why the last attempt got no answer (`timeout`, `connection`, ...). */
  last_error: string | null;
  created_at: string;
}

export interface WebhookDeliveriesOptions extends RequestOptions {
  /** Page size, 1 to 100 (default 20). */
  limit?: number;
  /** The `next_cursor` of the previous page. */
  cursor?: string;
  state?: WebhookDelivery['state'];
}

/** One page of deliveries, newest first; `next_cursor` null on the last. */
export interface WebhookDeliveryPage {
  data: WebhookDelivery[];
  next_cursor: string | null;
}

/** What to send again: one event's delivery, or every delivery created since a time (RFC 3339, within the retention). */
export type RedeliverTarget = { eventId: string; since?: never; cursor?: never } | { since: string | Date; eventId?: never; /** The `next_cursor` of the previous answer with this `since`. */ cursor?: string };

export interface Redelivered {
  endpoint_id: string;
  event_id?: string;
  since?: string;
  matched: number;
  queued: number;
  /** The most one call requeues (1000). */
  max: number;
  /** When more matched than `max`: pass it as `cursor`, with the same `since`, for the rest. */
  next_cursor: string | null;
}

/** `client.webhooks`. */
export interface WebhooksClient {
  /** The merchant's endpoints, oldest first. */
  list(options?: RequestOptions): Promise<WebhookEndpoint[]>;
  /** Adds an endpoint (https, a public address); the answer holds its secret, shown only now. */
  create(url: string, options?: CreateWebhookOptions): Promise<CreatedWebhookEndpoint>;
  /** Removes an endpoint and its deliveries; `MerchantResponseError` 404 when the merchant has none with this id. */
  remove(id: string, options?: RequestOptions): Promise<void>;
  /** A new secret, shown only now; with `expireOldIn` the old one keeps signing until then. */
  rotateSecret(id: string, options?: RotateWebhookSecretOptions): Promise<RotatedWebhookSecret>;
  /** Queues a `webhook.test` event for the endpoint. */
  test(id: string, options?: ChangeOptions): Promise<QueuedWebhookTest>;
  /** One page of the endpoint's deliveries, newest first; pass `next_cursor` back as `cursor` for the next. */
  deliveries(id: string, options?: WebhookDeliveriesOptions): Promise<WebhookDeliveryPage>;
  /** Sends deliveries again (same event id): one event's, or those since a time, at most 1000 per call. */
  redeliver(id: string, target: RedeliverTarget, options?: ChangeOptions): Promise<Redelivered>;
}

/** The first record of `data` in the success envelope. */
function firstOf<T>(body: unknown): T {
  const answer = body as { status?: unknown; data?: unknown };
  if (typeof answer !== 'object' || answer === null || answer.status !== 'ok' || !Array.isArray(answer.data)) throw new Error('not {"status":"ok","data":[…]}');
  if (answer.data.length === 0) throw new Error('no record in "data"');
  return answer.data[0] as T;
}

function endpointPath(baseUrl: string, id: string): string {
  if (typeof id !== 'string' || id === '' || id === '.' || id === '..') throw new TypeError('webhooks: the endpoint id must be a non-empty string.');
  return `${baseUrl}/merchant/webhooks/${pct(id)}`;
}

export function webhooksClient(baseUrl: string, transport: Transport, auth: () => Record<string, string>): WebhooksClient {
  const json = { 'content-type': 'application/json' };
  // One key per call, made before the first attempt: every retry sends the same.
  const change = <T>(method: 'POST', url: string, body: object | undefined, options: ChangeOptions): Promise<T> => {
    const key = { 'idempotency-key': idempotencyKeyOf(options.idempotencyKey) };
    return transport.call({ method, url, body: body === undefined ? undefined : JSON.stringify(body), idempotent: true }, () => url, { ...auth(), ...(body === undefined ? {} : json), ...key }, options.signal, firstOf<T>);
  };
  return {
    list: (options = {}) => {
      const url = `${baseUrl}/merchant/webhooks`;
      return transport.call({ method: 'GET', url }, () => url, auth(), options.signal, (body) => {
        const answer = body as { status?: unknown; data?: unknown };
        if (typeof answer !== 'object' || answer === null || answer.status !== 'ok' || !Array.isArray(answer.data)) throw new Error('not {"status":"ok","data":[…]}');
        return answer.data as WebhookEndpoint[];
      });
    },
    create: (url, options = {}) => {
      if (typeof url !== 'string' || url === '') throw new TypeError('webhooks.create(): url must be a non-empty string.');
      return change<CreatedWebhookEndpoint>('POST', `${baseUrl}/merchant/webhooks`, options.events === undefined ? { url } : { url, events: options.events }, options);
    },
    remove: async (id, options = {}) => {
      const url = endpointPath(baseUrl, id);
      await transport.send({ method: 'DELETE', url, once: true }, () => url, auth(), options.signal, async (response) => {
        await response.body?.cancel().catch(() => undefined);
        if (response.status !== 204) throw new MerchantResponseError({ status: response.status, code: 'invalid_response', message: `${url} answered ${response.status}, not 204.`, headers: response.headers }, { method: 'DELETE', url });
      });
    },
    rotateSecret: (id, options = {}) => change<RotatedWebhookSecret>('POST', `${endpointPath(baseUrl, id)}/rotate-secret`, options.expireOldIn === undefined ? {} : { expire_old_in: options.expireOldIn }, options),
    test: (id, options = {}) => change<QueuedWebhookTest>('POST', `${endpointPath(baseUrl, id)}/test`, undefined, options),
    deliveries: (id, options = {}) => {
      const query = new URLSearchParams();
      if (options.limit !== undefined) query.set('limit', String(options.limit));
      if (options.state !== undefined) query.set('state', options.state);
      if (options.cursor !== undefined) query.set('cursor', options.cursor);
      const search = query.toString();
      const url = `${endpointPath(baseUrl, id)}/deliveries${search === '' ? '' : `?${search}`}`;
      return transport.call({ method: 'GET', url }, () => url, auth(), options.signal, (body) => {
        const answer = body as { status?: unknown; data?: unknown; next_cursor?: unknown };
        if (typeof answer !== 'object' || answer === null || answer.status !== 'ok' || !Array.isArray(answer.data)) throw new Error('not {"status":"ok","data":[…]}');
        if (answer.next_cursor !== null && typeof answer.next_cursor !== 'string') throw new Error('no "next_cursor"');
        return { data: answer.data as WebhookDelivery[], next_cursor: answer.next_cursor };
      });
    },
    redeliver: (id, target, options = {}) => {
      const given = (target ?? {}) as { eventId?: unknown; since?: unknown; cursor?: unknown };
      if ((given.eventId === undefined) === (given.since === undefined)) throw new TypeError('webhooks.redeliver(): give exactly one of eventId and since.');
      const since = given.since instanceof Date ? given.since.toISOString() : given.since;
      const body = given.eventId !== undefined ? { event_id: given.eventId } : given.cursor === undefined ? { since } : { since, cursor: given.cursor };
      return change<Redelivered>('POST', `${endpointPath(baseUrl, id)}/redeliver`, body, options);
    },
  };
}
