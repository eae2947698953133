/**
 * A merchant's webhook endpoints as the storage contract names them (`Storage.listWebhookEndpoints`
 * and the rest, docs/webhooks.md#endpoints): what is listed, what is added, what a rotation answers,
 * and the refusal of a storage that keeps no webhooks.
 */
import { randomBytes } from 'node:crypto';
import { MerchantApiError } from '../errors.js';

/**
 * Whose events an endpoint receives (docs/test-mode.md#webhooks): one added with a live key is
 * `live` and receives the changes of live data only; one added with a test key is `test` and
 * receives the simulator's events only. Every operation acts on one mode's endpoints: the other
 * mode's are not found, as another merchant's are not.
 */
export type WebhookEndpointMode = 'live' | 'test';

/** An endpoint as listed: never its secret. */
export interface WebhookEndpointSummary {
  id: string;
  merchantId: string;
  url: string;
  /** The event types it receives. */
  events: string[];
  status: 'enabled' | 'disabled';
  /** Why it is disabled: `gone` (410), `failing` (every attempt failed too long), `operator`. */
  disabledReason: string | null;
  createdAt: string;
}

/** An endpoint a merchant adds (`Storage.addWebhookEndpoint`): the URL already checked against the address rules. */
export interface NewWebhookEndpoint {
  merchantId: string;
  url: string;
  events: readonly string[];
  /** The most endpoints the merchant may have in this mode; one more is 409 `conflict`. */
  maxPerMerchant: number;
  /** `test` when added with a test key (the test view of the storage sets it); default `live`. */
  mode?: WebhookEndpointMode;
  /** Who the audit trail records the change as (a storage that keeps one): `merchant:ID key:KEY_ID` from the API. */
  actor?: string;
  /** The id of the API key that made the change (from the API), for the audit row's `key_id`. */
  keyId?: string;
}

/** The options of an endpoint change (`removeWebhookEndpoint`, `rotateWebhookSecret`). */
export interface WebhookChangeOptions {
  /** The mode of the endpoints acted on (the test view sets `test`); default `live`: an endpoint of the other mode is not found. */
  mode?: WebhookEndpointMode;
  /** Who the audit trail records the change as (a storage that keeps one): `merchant:ID key:KEY_ID` from the API. */
  actor?: string;
  /** The id of the API key that made the change (from the API), for the audit row's `key_id`. */
  keyId?: string;
}

/** A secret rotated (`Storage.rotateWebhookSecret`): the new one, shown once, and when the old one stops signing. */
export interface RotatedWebhookSecret {
  secret: string;
  /** When the old secret stops signing, RFC 3339; null when it stopped at once. */
  oldExpiresAt: string | null;
}

/** What a storage without webhooks (one of an embedder's own, without the optional operations) answers them with: 501 `not_implemented`. */
export const WEBHOOKS_NOT_KEPT = new MerchantApiError('not_implemented', 'The storage behind this server keeps no webhooks.');

/** A new endpoint id, on every storage: `we_` + 16 random bytes, base64url. */
export function newWebhookEndpointId(): string {
  return `we_${randomBytes(16).toString('base64url')}`;
}

/** A new secret, on every storage: `whsec_` + base64 of 32 random bytes (Standard Webhooks). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * How many `webhook.test` events one endpoint may be sent at once, on every storage: a burst of
 * `WEBHOOK_TEST_BURST`, given back one every `WEBHOOK_TEST_INTERVAL_MS` (10 a minute). Each test is
 * an outbox row and a request to the merchant's receiver; the bound is the endpoint's, kept where
 * the endpoint is (on MySQL its row, shared by every instance).
 */
export const WEBHOOK_TEST_BURST = 10;
export const WEBHOOK_TEST_INTERVAL_MS = 6000;

/**
 * The test budget as a generic cell rate: `until` is when the endpoint's budget is whole again (ms;
 * at or before `now`, it is). A test moves it one interval later, allowed while it stays within a
 * burst of `now`; refused, it names the seconds until the next test fits.
 */
export function takeWebhookTest(until: number, now: number): { until: number } | { retryAfter: number } {
  const next = Math.max(until, now) + WEBHOOK_TEST_INTERVAL_MS;
  const over = next - now - WEBHOOK_TEST_BURST * WEBHOOK_TEST_INTERVAL_MS;
  return over <= 0 ? { until: next } : { retryAfter: Math.max(1, Math.ceil(over / 1000)) };
}

/** The answer of a test asked for past the budget, on every storage: 429 naming the bound, `Retry-After` set. */
export function webhookTestRefused(retryAfter: number): MerchantApiError {
  return new MerchantApiError(
    'too_many_requests',
    `This endpoint was sent ${WEBHOOK_TEST_BURST} test events within ${(WEBHOOK_TEST_BURST * WEBHOOK_TEST_INTERVAL_MS) / 1000} s, the most it may be: one more fits in ${retryAfter} s.`,
    { retryAfter, policy: { name: 'webhook_tests', quota: WEBHOOK_TEST_BURST, window: (WEBHOOK_TEST_BURST * WEBHOOK_TEST_INTERVAL_MS) / 1000 } },
  );
}

/**
 * Why a rotation with an overlap is refused while an earlier one's runs, on every storage (409
 * `conflict` from the API, an error of the CLI): an endpoint signs with at most two secrets, and
 * ending the earlier overlap before the time its rotation answered would break a receiver that
 * relies on it. `endsAt`: when the earlier old secret stops signing.
 */
export function rotationOverlapMessage(endsAt: string): string {
  return `An earlier rotation's overlap is still running: its old secret signs until ${endsAt}, and an endpoint signs with at most two secrets. Rotate with an overlap after then, or now without one (the current secret stops at once; the earlier one still signs until ${endsAt}).`;
}
