/**
 * What names an API key without revealing it: a random public id, and a fingerprint the
 * merchant can compute from the key it holds (`printf %s "$KEY" | sha256sum | cut -c1-16`).
 */
import { createHash, randomBytes } from 'node:crypto';

/** Crockford's base32 alphabet, lower case: no i, l, o, u to misread. */
const BASE32 = '0123456789abcdefghjkmnpqrstvwxyz';
/** 12 characters of 5 bits: 60 random bits, a collision is not to be expected in any real number of keys. */
const KEY_ID_CHARS = 12;

/** A new public key id: `key_` and 12 base32 characters. */
export function newKeyId(): string {
  const bytes = randomBytes(KEY_ID_CHARS);
  let id = 'key_';
  for (const byte of bytes) id += BASE32[byte & 31];
  return id;
}

/** What a key id looks like (for a clear error before any query). */
export const KEY_ID_PATTERN = /^key_[0-9a-hjkmnp-tv-z]{12}$/;

/** The first 8 bytes of the key's SHA-256 (UTF-8), hex: 16 characters. */
export function keyFingerprint(apiKey: string): string {
  return createHash('sha256').update(apiKey, 'utf8').digest('hex').slice(0, 16);
}
