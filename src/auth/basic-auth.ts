/**
 * HTTP Basic authentication of merchants (docs/protocol.md#users). Every failure,
 * whether missing, malformed, unknown merchant or wrong key, is the same 401,
 * so a caller learns nothing about which merchant ids exist.
 */
import { constantTimeDigestEqual, sha256 } from '../signing/crypto.js';
import { MerchantApiError } from '../errors.js';

import type { Merchant } from '../storage/contract.js';

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const ASCII = /^[\x00-\x7f]*$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Why an authentication failed, as logged and counted. */
export type AuthFailureReason = 'missing_credentials' | 'malformed_credentials' | 'unknown_merchant' | 'wrong_key' | 'bad_signature';

/** What authentication reads of a request and notes on it (the pipeline's `RequestContext` is one). */
export interface AuthState {
  header(name: string): string | null;
  claimedMerchantId: string | undefined;
  merchantId: string | undefined;
  authFailure: AuthFailureReason | undefined;
}

/** The one 401 every authentication failure answers. */
export const UNAUTHORIZED = new MerchantApiError('unauthorized', 'Valid merchant credentials are required (HTTP Basic: merchant id and API key).');

/** The credentials of an `Authorization: Basic` header, or undefined if malformed. */
export function parseBasicAuth(header: string | null): { id: string; key: string } | undefined {
  if (header === null || header.length > 4096) return undefined;
  const space = header.indexOf(' ');
  if (space === -1 || header.slice(0, space).toLowerCase() !== 'basic') return undefined;
  const encoded = header.slice(space + 1).trim();
  if (!BASE64.test(encoded) || encoded.length % 4 === 1) return undefined;
  let decoded: string;
  try {
    decoded = atob(encoded);
    // atob yields one character per byte. Pure ASCII, the common case, is
    // already its own UTF-8 decoding, so it skips the byte copy and the
    // strict decode (docs/benchmarks.md#figures-behind-choices-in-the-code);
    // anything else is decoded strictly.
    if (!ASCII.test(decoded)) decoded = utf8.decode(Uint8Array.from(decoded, (c) => c.charCodeAt(0)));
  } catch {
    return undefined;
  }
  const colon = decoded.indexOf(':');
  if (colon <= 0 || decoded.includes('\u0000')) return undefined;
  return { id: decoded.slice(0, colon), key: decoded.slice(colon + 1) };
}

/**
 * The merchant the request authenticates as. Throws the 401 for any
 * credential problem (noting the reason on the context, for logs and
 * metrics only), and 403 for a disabled merchant with a valid key.
 * `getMerchant` is the (guarded) storage lookup; only it waits on the
 * storage, so parsing and comparing stay outside the storage deadline.
 */
export async function authenticate(ctx: AuthState, getMerchant: (id: string, refresh: boolean) => Promise<Merchant | undefined>): Promise<Merchant> {
  const header = ctx.header('authorization');
  const credentials = parseBasicAuth(header);
  if (!credentials || credentials.key === '') throw fail(ctx, header === null ? 'missing_credentials' : 'malformed_credentials');
  let merchant = await getMerchant(credentials.id, false);
  if (!merchant) throw fail(ctx, 'unknown_merchant');
  ctx.claimedMerchantId = merchant.id;
  const given = keyDigest(credentials.key);
  if (!holdsKey(merchant, given)) {
    // The keys may be a cached copy from before a rotation on another instance: read them
    // again once (the storage bounds how often) before calling the key wrong.
    merchant = await getMerchant(credentials.id, true);
    if (!merchant || !holdsKey(merchant, given)) throw fail(ctx, 'wrong_key');
  }
  ctx.merchantId = merchant.id;
  if (merchant.status !== 'active') throw DISABLED;
  return merchant;
}

const DISABLED = new MerchantApiError('merchant_disabled', 'This account is disabled.');

/** Every key is compared, in constant time, so timing does not tell which matched. */
function holdsKey(merchant: Merchant, given: Uint8Array): boolean {
  let matched = false;
  for (const key of merchant.keys) if (constantTimeDigestEqual(keyDigest(key), given)) matched = true;
  return matched;
}

function fail(ctx: AuthState, reason: AuthFailureReason): MerchantApiError {
  ctx.authFailure = reason;
  return UNAUTHORIZED;
}

/**
 * SHA-256 of a key, the stored ones and the one presented, memoised: a
 * merchant sends the same key on every request, and hashing was the largest
 * cost of Basic auth (docs/benchmarks.md#figures-behind-choices-in-the-code).
 * A digest is a pure function of its key; nothing about the check is cached.
 * Bounded: cleared when full, so neither rotated keys nor random guesses pile up.
 */
const keyDigests = new Map<string, Uint8Array>();
// Keys are at most ~3 kB (the header is capped at 4096), so at most a few MB.
const MAX_CACHED_DIGESTS = 2048;

function keyDigest(key: string): Uint8Array {
  let digest = keyDigests.get(key);
  if (digest === undefined) {
    if (keyDigests.size >= MAX_CACHED_DIGESTS) keyDigests.clear();
    digest = sha256(key);
    keyDigests.set(key, digest);
  }
  return digest;
}
