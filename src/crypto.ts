/**
 * The one module that touches `node:crypto` (STYLE.md, point 1): Web Crypto
 * has no SHA-224, and Node, Bun and Deno all implement `node:crypto`.
 */
import { Buffer } from 'node:buffer';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/** Lower-case hex HMAC-SHA224 of `message` keyed with `key`, both UTF-8. */
export function hmacSha224Hex(key: string, message: string): string {
  return createHmac('sha224', key).update(message, 'utf8').digest('hex');
}

/**
 * Compares two strings in time that depends only on their lengths' digest,
 * not on where they differ: both are hashed first, so the comparison always
 * runs over 32 bytes.
 */
export function constantTimeEqual(a: string, b: string): boolean {
  const x = createHash('sha256').update(a, 'utf8').digest();
  const y = createHash('sha256').update(b, 'utf8').digest();
  return timingSafeEqual(x, y);
}

/** Compares two lower-case hex digests of equal length in constant time. */
export function constantTimeHexEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  return timingSafeEqual(Buffer.from(a, 'latin1'), Buffer.from(b, 'latin1'));
}
