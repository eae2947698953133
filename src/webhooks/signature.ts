/**
 * Standard Webhooks v1 signing (https://www.standardwebhooks.com, docs/webhooks.md#verifying):
 * `webhook-signature: v1,<base64 of HMAC-SHA256(secret bytes, "<id>.<timestamp>.<body>")>`, one
 * signature per valid secret separated by a space, so a receiver keeps verifying through a rotation.
 * A secret is `whsec_` + base64 of 32 random bytes; only its bytes after the prefix are the key.
 */
import { createHmac, randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';
const SECRET_BYTES = 32;

/** A new random endpoint secret, `whsec_` + base64 of 32 random bytes: shown once, then kept sealed. */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

/** The key bytes of a `whsec_` secret (the prefix is optional, as the spec allows). Throws on a malformed one. */
export function webhookSecretBytes(secret: string): Buffer {
  const text = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text) || text.length % 4 !== 0) throw new Error('A webhook secret is whsec_ followed by base64.');
  const bytes = Buffer.from(text, 'base64');
  if (bytes.length < 24 || bytes.length > 64) throw new Error('A webhook secret holds 24 to 64 bytes.');
  return bytes;
}

/** One `v1,<base64>` signature of `body` sent as event `id` at Unix second `timestamp`. */
export function signWebhook(secret: string, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', webhookSecretBytes(secret)).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** The three Standard Webhooks headers: every secret in `secrets` signs (newest first), joined by a space. */
export function webhookHeaders(secrets: readonly string[], id: string, timestamp: number, body: string): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string> {
  if (secrets.length === 0) throw new Error('A webhook is signed with at least one secret.');
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((secret) => signWebhook(secret, id, timestamp, body)).join(' '),
  };
}
