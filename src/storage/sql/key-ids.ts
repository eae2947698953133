/**
 * What names an API key without revealing it: a random public id, and a fingerprint the
 * merchant can compute from the key it holds (`printf %s "$KEY" | sha256sum | cut -c1-16`).
 */
import { createHash } from 'node:crypto';

/** A new public key id: `key_` and 12 base32 characters (made where every storage makes them). */
export { newKeyId } from '../key-changes.js';

/** What a key id looks like (for a clear error before any query). */
export const KEY_ID_PATTERN = /^key_[0-9a-hjkmnp-tv-z]{12}$/;

/** The first 8 bytes of the key's SHA-256 (UTF-8), hex: 16 characters. */
export function keyFingerprint(apiKey: string): string {
  return createHash('sha256').update(apiKey, 'utf8').digest('hex').slice(0, 16);
}
