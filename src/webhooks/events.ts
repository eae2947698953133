/**
 * Webhook events and their bodies (docs/webhooks.md#events): `{"type", "timestamp", "data"}`, where
 * `data` is the record `GET /merchant/users/{id}` answers (14 keys in that order) plus `updated_at`,
 * in the merchant's own view (its `shared_user_id`); `user.unshared` carries only the id and the time.
 * Each event has one id (`evt_`, time-ordered, then random; made where the event is stored), sent as
 * `webhook-id` on every attempt: receivers deduplicate on it.
 */
import { changedUserJson } from '../listing/user-json.js';
import type { ChangedUserRecord } from '../storage/contract.js';

/** Every event type, in the order docs/webhooks.md lists them. */
export const WEBHOOK_EVENT_TYPES = ['user.shared', 'user.updated', 'user.deactivated', 'user.unshared', 'webhook.test'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** The events an endpoint receives when it names none: all but `webhook.test`, which is sent on request to one endpoint whatever it names. */
export const DEFAULT_SUBSCRIBED_EVENTS: readonly WebhookEventType[] = ['user.shared', 'user.updated', 'user.deactivated', 'user.unshared'];

export function isWebhookEventType(value: unknown): value is WebhookEventType {
  return typeof value === 'string' && (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value);
}

/** `2026-11-28T04:00:00.123456+00:00` from a `Date` (microseconds zero): the timestamps of docs/protocol.md. */
export function eventTimestamp(date: Date): string {
  return `${date.toISOString().slice(0, 23)}000+00:00`;
}

/** The body of an event whose `data` is already JSON text. */
export function eventBody(type: WebhookEventType, timestamp: string, dataJson: string): string {
  return `{"type":${JSON.stringify(type)},"timestamp":${JSON.stringify(timestamp)},"data":${dataJson}}`;
}

/** `user.shared`, `user.updated`, `user.deactivated`: the merchant's record with its `updated_at`. */
export function userEventBody(type: 'user.shared' | 'user.updated' | 'user.deactivated', timestamp: string, record: ChangedUserRecord): string {
  return eventBody(type, timestamp, changedUserJson(record));
}

/** `user.unshared`: the merchant's id of the user and when the share was removed; nothing else of the person. */
export function unsharedEventBody(timestamp: string, sharedUserId: string, unsharedAt: string): string {
  return eventBody('user.unshared', timestamp, `{"shared_user_id":${JSON.stringify(sharedUserId)},"unshared_at":${JSON.stringify(unsharedAt)}}`);
}

/** `webhook.test`: sent on request, names the endpoint it was sent to. */
export function testEventBody(timestamp: string, endpointId: string): string {
  return eventBody('webhook.test', timestamp, `{"endpoint_id":${JSON.stringify(endpointId)}}`);
}
