/**
 * The replay store's keyed hash: HalfSipHash-2-4 with a 64-bit output, and the fingerprint of a
 * (merchant id, salt) pair built on it (docs/protocol.md#a-bounded-replay-store). It lives apart
 * from the store because it is a self-contained primitive, checked on its own against the
 * reference vectors. It runs once per salt, so it allocates nothing: the code units go into a
 * module-level scratch buffer, and the result comes out in two module-level numbers
 * (`fpHigh`, `fpLow`) that the store reads through their live bindings, never in an object.
 */

// The fingerprint of the last call: two numbers rather than an object per salt. Exported as live
// bindings, which only this module assigns, so the store reads them with no call in between.
export let fpHigh = 0;
export let fpLow = 0;
let units = new Uint16Array(512);

/**
 * The 64-bit fingerprint of (merchant id, salt), into `fpHigh`/`fpLow` (never both 0): HalfSipHash-2-4
 * over the UTF-16 code units of the merchant id's length, the merchant id and the salt, so two
 * different pairs never hash the same text.
 */
export function fingerprint(k0: number, k1: number, merchantId: string, salt: string): void {
  const length = 1 + merchantId.length + salt.length;
  if (length > units.length) units = new Uint16Array(length * 2);
  units[0] = merchantId.length;
  let n = 1;
  for (let i = 0; i < merchantId.length; i++) units[n++] = merchantId.charCodeAt(i);
  for (let i = 0; i < salt.length; i++) units[n++] = salt.charCodeAt(i);
  halfSipHash64(k0, k1, units, n);
  if (fpHigh === 0 && fpLow === 0) fpLow = 1;
}

/** The fingerprint `fingerprint` just computed, as [high, low] (for tests). */
export function lastFingerprint(): [number, number] {
  return [fpHigh, fpLow];
}

/**
 * HalfSipHash-2-4 with a 64-bit output (Aumasson and Bernstein's reference, halfsiphash.c) of the
 * `count` UTF-16 code units of `data` taken as little-endian bytes, under the key (k0, k1):
 * the result's first four bytes, little-endian, into `fpLow`, the last four into `fpHigh`.
 */
export function halfSipHash64(k0: number, k1: number, data: Uint16Array, count: number): void {
  let v0 = k0 | 0;
  let v1 = (k1 ^ 0xee) | 0;
  let v2 = (k0 ^ 0x6c796765) | 0;
  let v3 = (k1 ^ 0x74656462) | 0;
  const words = count >>> 1;
  for (let w = 0; w <= words; w++) {
    let m: number;
    if (w < words) m = data[2 * w]! | (data[2 * w + 1]! << 16);
    else m = ((count * 2) << 24) | (count & 1 ? data[count - 1]! : 0);
    v3 ^= m;
    for (let r = 0; r < 2; r++) {
      v0 = (v0 + v1) | 0;
      v1 = (v1 << 5) | (v1 >>> 27);
      v1 ^= v0;
      v0 = (v0 << 16) | (v0 >>> 16);
      v2 = (v2 + v3) | 0;
      v3 = (v3 << 8) | (v3 >>> 24);
      v3 ^= v2;
      v0 = (v0 + v3) | 0;
      v3 = (v3 << 7) | (v3 >>> 25);
      v3 ^= v0;
      v2 = (v2 + v1) | 0;
      v1 = (v1 << 13) | (v1 >>> 19);
      v1 ^= v2;
      v2 = (v2 << 16) | (v2 >>> 16);
    }
    v0 ^= m;
  }
  v2 ^= 0xee;
  for (let half = 0; half < 2; half++) {
    if (half === 1) v1 ^= 0xdd;
    for (let r = 0; r < 4; r++) {
      v0 = (v0 + v1) | 0;
      v1 = (v1 << 5) | (v1 >>> 27);
      v1 ^= v0;
      v0 = (v0 << 16) | (v0 >>> 16);
      v2 = (v2 + v3) | 0;
      v3 = (v3 << 8) | (v3 >>> 24);
      v3 ^= v2;
      v0 = (v0 + v3) | 0;
      v3 = (v3 << 7) | (v3 >>> 25);
      v3 ^= v0;
      v2 = (v2 + v1) | 0;
      v1 = (v1 << 13) | (v1 >>> 19);
      v1 ^= v2;
      v2 = (v2 << 16) | (v2 >>> 16);
    }
    if (half === 0) fpLow = v1 ^ v3;
    else fpHigh = v1 ^ v3;
  }
}
