/**
 * Verifying a webhook on the merchant's side (docs/webhooks.md#verifying): Standard Webhooks v1.
 * The timestamp must be within `tolerance` seconds of `now`, then any `v1` signature of
 * `webhook-signature` must match HMAC-SHA256 of `"<id>.<timestamp>.<body>"` under any of `secrets`
 * (several during a rotation), compared in constant time; only then is the body parsed.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { ChangedUserRecord } from './types.js';

/** `user.shared`, `user.updated`, `user.deactivated`: the merchant's record with its `updated_at`. */
export interface UserWebhookEvent {
  type: 'user.shared' | 'user.updated' | 'user.deactivated';
  timestamp: string;
  data: ChangedUserRecord;
}

/** `user.unshared`: the merchant's id of the user and when the share went. */
export interface UnsharedWebhookEvent {
  type: 'user.unshared';
  timestamp: string;
  data: { shared_user_id: string; unshared_at: string };
}

/** `webhook.test`: sent on request to one endpoint. */
export interface TestWebhookEvent {
  type: 'webhook.test';
  timestamp: string;
  data: { endpoint_id: string };
}

export type WebhookEvent = UserWebhookEvent | UnsharedWebhookEvent | TestWebhookEvent;

/** A delivery that does not verify: which check failed, never a secret. */
export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
  constructor(readonly reason: 'missing_headers' | 'timestamp_out_of_tolerance' | 'no_matching_signature' | 'invalid_body') {
    super(`The webhook does not verify: ${reason.replace(/_/g, ' ')}.`);
  }
}

export interface VerifyWebhookOptions {
  /** Seconds the timestamp may be away from `now`, either way (default 300). */
  tolerance?: number;
  /** The current time in ms (default `Date.now()`). */
  now?: number;
}

type HeaderSource = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderSource, name: string): string {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? '';
  const record = headers as Record<string, string | string[] | undefined>;
  const value = record[name] ?? Object.entries(record).find(([key]) => key.toLowerCase() === name)?.[1];
  return Array.isArray(value) ? (value[0] ?? '') : (value ?? '');
}

/**
 * The event, once verified; throws `WebhookVerificationError` otherwise. `headers`: a `Headers`
 * or a plain object (node:http's `req.headers`); `body`: the raw text as received.
 *
 * @example
 * const event = verifyWebhook([process.env.WEBHOOK_SECRET!], request.headers, await request.text());
 */
export function verifyWebhook(secrets: readonly string[], headers: HeaderSource, body: string, options: VerifyWebhookOptions = {}): WebhookEvent {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (id === '' || signatures === '' || !/^\d{1,12}$/.test(timestamp)) throw new WebhookVerificationError('missing_headers');
  const now = (options.now ?? Date.now()) / 1000;
  if (Math.abs(now - Number(timestamp)) > (options.tolerance ?? 300)) throw new WebhookVerificationError('timestamp_out_of_tolerance');
  const given = signatures
    .split(' ')
    .map((part) => part.split(','))
    .filter(([version]) => version === 'v1')
    .map(([, value]) => Buffer.from(value ?? '', 'base64'));
  const message = `${id}.${timestamp}.${body}`;
  let matched = false;
  for (const secret of secrets) {
    const expected = createHmac('sha256', Buffer.from(secret.replace(/^whsec_/, ''), 'base64')).update(message).digest();
    // Every pair compared: the time taken does not tell which secret or signature matched.
    for (const signature of given) if (signature.length === expected.length && timingSafeEqual(signature, expected)) matched = true;
  }
  if (!matched) throw new WebhookVerificationError('no_matching_signature');
  try {
    return JSON.parse(body) as WebhookEvent;
  } catch {
    throw new WebhookVerificationError('invalid_body');
  }
}
