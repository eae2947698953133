/**
 * A merchant's webhook deliveries as every storage answers them (docs/webhooks.md#deliveries): the
 * page of one endpoint's deliveries (`Storage.listEndpointDeliveries`) and a redelivery
 * (`Storage.redeliverEndpointDeliveries`), for `/merchant/webhooks/{id}/deliveries|redeliver`, and
 * the JSON the API and the CLI's `webhook deliveries --json` both print (`deliveryJson`).
 *
 * Bounded on every storage: a page holds at most `MAX_DELIVERY_PAGE`, and looks at most
 * `DELIVERY_SCAN` deliveries (with a `state` filter a page may come back short, or empty, with a
 * `next_cursor` to go on from); a redelivery requeues at most `MAX_REDELIVERIES` deliveries, the
 * oldest first, and says where to go on from (`next`: a position, not a time, as many deliveries
 * may share one creation time).
 */
import { MerchantApiError } from '../errors.js';
import type { WebhookEndpointMode } from './webhook-endpoints.js';

/** What a delivery may be: waiting (or being sent), sent, given up on, stopped with its endpoint. */
export const DELIVERY_STATES = ['pending', 'delivered', 'failed', 'cancelled'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

/** Most deliveries on one page (`limit`); the default is `DEFAULT_DELIVERY_PAGE`. */
export const MAX_DELIVERY_PAGE = 100;
export const DEFAULT_DELIVERY_PAGE = 20;
/** Most deliveries one page looks at, whatever the `state` filter: the storage work of a request. */
export const DELIVERY_SCAN = 1000;
/** Most deliveries one redelivery requeues. */
export const MAX_REDELIVERIES = 1000;

/** A delivery: ids, state and its last attempt; never the body or the answer. Times canonical UTC. */
export interface WebhookDelivery {
  id: string;
  eventId: string;
  endpointId: string;
  merchantId: string;
  type: string;
  state: DeliveryState;
  attempts: number;
  /** When it is next tried, while pending; null otherwise. */
  nextAttemptAt: string | null;
  lastAttemptAt: string | null;
  /** The HTTP status of the last attempt, when it got one. */
  lastStatus: number | null;
  /** Why the last attempt got no answer (`timeout`, `connection`, `connection_refused`, `tls`, `address_refused`, `dns_failed`, ...). */
  lastError: string | null;
  createdAt: string;
}

/** Where a page goes on from: the last delivery it gave (newest first: `createdAt`, then `id`). */
export interface DeliveryCursor {
  createdAt: string;
  id: string;
}

/** One page of an endpoint's deliveries, newest first. */
export interface WebhookDeliveryQuery {
  merchantId: string;
  endpointId: string;
  /** The endpoint's mode (the test view sets `test`); default `live`: one of the other mode is not found. */
  mode?: WebhookEndpointMode;
  state?: DeliveryState;
  /** 1 to `MAX_DELIVERY_PAGE`. */
  limit: number;
  after?: DeliveryCursor;
}

export interface WebhookDeliveryPage {
  items: WebhookDelivery[];
  /** Where the next page begins; null at the end. */
  next: DeliveryCursor | null;
}

/** A redelivery of one endpoint's deliveries: of one event, or created since a time (canonical). */
export interface WebhookRedelivery {
  merchantId: string;
  endpointId: string;
  /** The endpoint's mode (the test view sets `test`); default `live`: one of the other mode is not found. */
  mode?: WebhookEndpointMode;
  /** `after`: the `next` of the previous call with this `since`, to go on from. */
  target: { eventId: string } | { since: string; after?: DeliveryCursor };
  /** Most deliveries requeued (`MAX_REDELIVERIES` from the API). */
  max: number;
  /** Who the audit trail records it as (a storage that keeps one): `merchant:ID key:KEY_ID` from the API. */
  actor?: string;
  /** The id of the API key that asked (from the API), for the audit row's `key_id`. */
  keyId?: string;
}

export interface RedeliveryResult {
  /** Deliveries found (of the event, or since the time; at most `max`), those being sent right now included. */
  matched: number;
  /** Deliveries made due now (one being sent right now is left to its attempt). */
  queued: number;
  /** When more than `max` matched: the last one taken, to go on from (`after`, with the same `since`); else null. */
  next: DeliveryCursor | null;
}

/** A delivery as the API and `webhook deliveries --json` print it: snake_case, times canonical UTC. */
export function deliveryJson(d: WebhookDelivery): Record<string, unknown> {
  return {
    id: d.id,
    event_id: d.eventId,
    endpoint_id: d.endpointId,
    merchant_id: d.merchantId,
    type: d.type,
    state: d.state,
    attempts: d.attempts,
    next_attempt_at: d.nextAttemptAt,
    last_attempt_at: d.lastAttemptAt,
    last_status: d.lastStatus,
    last_error: d.lastError,
    created_at: d.createdAt,
  };
}

/** `2026-11-28T04:00:00.123456+00:00`: the form every stored time is answered in. */
const CANONICAL = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}\+00:00$/;

/** A cursor as the API and the CLI hand it out: opaque, base64url. */
export function encodeDeliveryCursor(cursor: DeliveryCursor): string {
  return Buffer.from(`${cursor.createdAt}|${cursor.id}`, 'utf8').toString('base64url');
}

/** A cursor given back, or undefined when it is not one of ours. */
export function decodeDeliveryCursor(text: string): DeliveryCursor | undefined {
  if (text.length === 0 || text.length > 80 || !/^[A-Za-z0-9_-]+$/.test(text)) return undefined;
  const [createdAt, id, ...rest] = Buffer.from(text, 'base64url').toString('utf8').split('|');
  if (rest.length > 0 || createdAt === undefined || id === undefined || !CANONICAL.test(createdAt) || !/^[1-9]\d{0,19}$/.test(id)) return undefined;
  return { createdAt, id };
}

/** Newest first: later `createdAt`, then the larger id (ids are decimal and grow). */
export function newerFirst(a: DeliveryCursor, b: DeliveryCursor): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? 1 : -1;
  return a.id.length !== b.id.length ? b.id.length - a.id.length : a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/** What a redelivery on a disabled endpoint answers, on every storage: 409. */
export const REDELIVER_DISABLED = new MerchantApiError('conflict', 'The webhook endpoint is disabled: nothing is sent to it until an operator enables it again (`merchant-api webhook enable`).');
