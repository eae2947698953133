/**
 * A merchant's webhook endpoints as the storage contract names them (`Storage.listWebhookEndpoints`
 * and the rest, docs/webhooks.md#endpoints): what is listed, what is added, what a rotation answers,
 * and the refusal of a storage that keeps no webhooks.
 */
import { randomBytes } from 'node:crypto';
import { MerchantApiError } from '../errors.js';

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
  /** The most endpoints the merchant may have; one more is 409 `conflict`. */
  maxPerMerchant: number;
  /** Who the audit trail records the change as (a storage that keeps one): `merchant:ID key:KEY_ID` from the API. */
  actor?: string;
  /** The id of the API key that made the change (from the API), for the audit row's `key_id`. */
  keyId?: string;
}

/** The options of an endpoint change (`removeWebhookEndpoint`, `rotateWebhookSecret`). */
export interface WebhookChangeOptions {
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
