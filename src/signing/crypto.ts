/**
 * The hashes and comparisons of signing and Basic auth, from `node:crypto`:
 * Web Crypto has no SHA-224 (and is asynchronous), and Node, Bun and Deno all
 * implement `node:crypto`. The request pipeline reaches `node:crypto` only
 * through this module; the storages (key sealing, stored salts) and the CLI
 * import it for their own purposes.
 */
import { Buffer } from 'node:buffer';
import * as nodeCrypto from 'node:crypto';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/** Lower-case hex HMAC-SHA224 of `message` keyed with `key`, both UTF-8. */
export function hmacSha224Hex(key: string, message: string): string {
  return createHmac('sha224', key).update(message, 'utf8').digest('hex');
}

/** SHA-256 of `text` (UTF-8). */
export function sha256(text: string): Uint8Array {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** Compares two digests in constant time; different lengths are simply unequal. */
export function constantTimeDigestEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The length of a SHA-224 hex digest, the one every signature compares. */
const SHA224_HEX_LENGTH = 56;
/** Written over for each comparison of that length (synchronous, so never shared by two): no two Buffers per request. */
const left = Buffer.alloc(SHA224_HEX_LENGTH);
const right = Buffer.alloc(SHA224_HEX_LENGTH);

/** Compares two lower-case hex digests of equal length in constant time. */
export function constantTimeHexEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  if (a.length === SHA224_HEX_LENGTH) {
    left.write(a, 0, 'latin1');
    right.write(b, 0, 'latin1');
    return timingSafeEqual(left, right);
  }
  return timingSafeEqual(Buffer.from(a, 'latin1'), Buffer.from(b, 'latin1'));
}

/**
 * `crypto.hash`, the one-shot digest of Node 20.12+, Bun and Deno: a quarter
 * fewer instructions than `createHash` for one user's record, which builds a
 * stream object per call; older runtimes fall back to `createHash`.
 */
const oneShotHash = (nodeCrypto as { hash?: (algorithm: string, data: string | Uint8Array, encoding: 'base64url') => string }).hash;

/**
 * A strong entity tag of a body (RFC 9110 §8.8.3): its SHA-256 over the UTF-8
 * bytes of the text (or of the texts, in order), base64url, quoted. SHA-256 is the fastest of node:crypto's hashes on
 * CPUs with SHA extensions (about 3 µs for one user's record, 1 µs per KB
 * beyond); the tag is public (it is sent), so it is compared as any string.
 */
export function entityTag(body: string | readonly string[]): string {
  if (typeof body !== 'string') {
    // Parts hashed one after another: the same digest as of their concatenation, without making it.
    const hash = createHash('sha256');
    for (const part of body) hash.update(part, 'utf8');
    return `"${hash.digest('base64url')}"`;
  }
  const digest =
    oneShotHash === undefined ? createHash('sha256').update(body, 'utf8').digest('base64url') : oneShotHash('sha256', body, 'base64url');
  return `"${digest}"`;
}
