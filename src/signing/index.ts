/**
 * Request signing, docs/protocol.md#signing: the canonical message, HMAC-SHA224 over
 * it, and verification. Exported for merchants too: this is the same
 * algorithm as the public LaterPay PHP and Python clients.
 */
import { constantTimeHexEqual, hmacSha224Hex } from './crypto.js';
import { toPairs, type SigningParams } from './params.js';

export type { SigningParams } from './params.js';

/** What a signature covers. `url` is scheme, host, port and path, no query. */
export interface SignedRequest {
  method: string;
  url: string;
  params: SigningParams;
}

/** Parameters never covered by the signature. */
const UNSIGNED = new Set(['hmac', 'gettoken']);
const NOT_UNRESERVED = /[!'()*]/g;
const UNRESERVED = /^[A-Za-z0-9\-._~]*$/;
const HEX_SHA224 = /^[0-9a-fA-F]{56}$/;

/**
 * Percent-encodes every UTF-8 byte except `A-Z a-z 0-9 - . _ ~`, like
 * Python's `quote(s, safe='')`. `encodeURIComponent` also spares `!'()*`,
 * so those are escaped afterwards.
 *
 * @example
 * pct("a b!") // 'a%20b%21'
 */
export function pct(value: string): string {
  // Ids, salts, timestamps and hex are usually all unreserved already: no copy needed.
  if (typeof value === 'string' && UNRESERVED.test(value)) return value;
  const encoded = encodeURIComponent(value);
  return NOT_UNRESERVED.test(encoded) ? encoded.replace(NOT_UNRESERVED, escapeReserved) : encoded;
}

function escapeReserved(char: string): string {
  return `%${char.charCodeAt(0).toString(16).toUpperCase()}`;
}

/**
 * The message a merchant signs:
 * `METHOD & pct(url) & pct(join("&", sorted(pct(k) "=" pct(v))))`,
 * leaving out `hmac` and `gettoken`, pairs sorted by encoded key, then value.
 *
 * @example
 * canonicalMessage({ method: 'GET', url: 'https://api.example.com/validatesignature',
 *   params: { cp: 'demo-merchant', ts: '1700000000', salt: '3f2a9c' } })
 * // 'GET&https%3A%2F%2Fapi.example.com%2Fvalidatesignature&cp%3Ddemo-merchant%26salt%3D3f2a9c%26ts%3D1700000000'
 */
export function canonicalMessage({ method, url, params }: SignedRequest): string {
  const encoded: [string, string][] = [];
  if (Array.isArray(params)) {
    // The handler passes its parsed pairs: an indexed loop skips the generator
    // of toPairs, which cost more than the encoding on the hot path.
    for (let i = 0; i < params.length; i++) {
      const [key, value] = params[i] as readonly [string, string];
      if (!UNSIGNED.has(key)) encoded.push([pct(key), pct(value)]);
    }
  } else {
    for (const [key, value] of toPairs(params)) {
      if (!UNSIGNED.has(key)) encoded.push([pct(key), pct(value)]);
    }
  }
  // Sorted as (key, value) pairs, not as "k=v" strings: "=" sorts above "-", "." and digits.
  encoded.sort(comparePairs);
  // pct() of the joined "k=v&k=v" string, built directly: its characters are
  // unreserved, "%", "=" and "&", which encode as themselves, %25, %3D and %26.
  let joined = '';
  for (let i = 0; i < encoded.length; i++) {
    joined += `${i ? '%26' : ''}${escapePercent(encoded[i]![0])}%3D${escapePercent(encoded[i]![1])}`;
  }
  return `${method.toUpperCase()}&${pctUrl(url)}&${joined}`;
}

function escapePercent(encoded: string): string {
  return encoded.includes('%') ? encoded.replaceAll('%', '%25') : encoded;
}

// A server sees a handful of distinct base URLs; encoding each once saves the
// longest encodeURIComponent of every request. Bounded: cleared when full.
const encodedUrls = new Map<string, string>();

function pctUrl(url: string): string {
  let encoded = encodedUrls.get(url);
  if (encoded === undefined) {
    if (encodedUrls.size >= 256) encodedUrls.clear();
    encoded = pct(url);
    encodedUrls.set(url, encoded);
  }
  return encoded;
}

/** Lower-case hex HMAC-SHA224 of the canonical message, keyed with `secret`. */
export function sign(secret: string, request: SignedRequest): string {
  return hmacSha224Hex(secret, canonicalMessage(request));
}

/**
 * True when `signature` (any case) is the HMAC of `message` under one of
 * `secrets`. Every secret is tried, so the time taken does not tell which
 * matched; comparisons are constant time.
 */
export function verify(signature: string, secrets: readonly string[], message: string | SignedRequest): boolean {
  // Only a hex digest of the right length can match; anything else is
  // rejected before comparing bytes (a latin1 view of "š" would read as "a").
  if (!HEX_SHA224.test(signature)) return false;
  const received = signature.toLowerCase();
  const text = typeof message === 'string' ? message : canonicalMessage(message);
  let matched = false;
  for (const secret of secrets) {
    if (constantTimeHexEqual(hmacSha224Hex(secret, text), received)) matched = true;
  }
  return matched;
}

/** Options of `signUrl`. */
export interface SignUrlOptions {
  /** The method the URL will be called with (default GET). */
  method?: string;
  /** Clock in milliseconds, for tests (default `Date.now`). */
  now?: () => number;
  /** The salt (default 16 random bytes as hex); must differ on every request. */
  salt?: string;
}

/**
 * A ready signed URL: `params` plus a fresh `ts` and `salt` (unless `params`
 * already has them), and `hmac`.
 *
 * @example
 * const url = signUrl('demo-secret', 'http://127.0.0.1:8787/validatesignature', { cp: 'demo-merchant' });
 * const answer = await (await fetch(url)).json(); // { status: 'ok', is_valid: true }
 */
export function signUrl(secret: string, url: string | URL, params: SigningParams = {}, options: SignUrlOptions = {}): string {
  const base = new URL(url);
  const pairs: (readonly [string, string])[] = [...base.searchParams];
  base.search = '';
  base.hash = '';
  pairs.push(...toPairs(params));
  if (pairs.some(([key]) => key === 'hmac')) throw new TypeError('signUrl: params must not hold hmac; signUrl adds it.');
  if (!pairs.some(([key]) => key === 'ts')) pairs.push(['ts', String(Math.floor((options.now ?? Date.now)() / 1000))]);
  if (!pairs.some(([key]) => key === 'salt')) pairs.push(['salt', options.salt ?? randomSalt()]);
  const hmac = sign(secret, { method: options.method ?? 'GET', url: base.href, params: pairs });
  pairs.push(['hmac', hmac]);
  return `${base.href}?${pairs.map(([k, v]) => `${pct(k)}=${pct(v)}`).join('&')}`;
}

function randomSalt(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}


// Encoded strings are ASCII, so `<` is code-point order here.
function comparePairs(a: [string, string], b: [string, string]): number {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1;
  return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
}
