/**
 * HTTP Basic authentication of merchants (docs/protocol.md#users). Every failure,
 * whether missing, malformed, unknown merchant or wrong key, is the same 401,
 * so a caller learns nothing about which merchant ids exist.
 */
import { constantTimeDigestEqual, sha256 } from '../signing/crypto.js';
import { MerchantApiError } from '../errors.js';
import type { Merchant } from '../storage/contract.js';
import { KEY_SCOPES, type KeyScope } from '../storage/key-limits.js';
import type { KeyRefusal } from './key-gate.js';
import { verifyMerchant, type AuthFailureReason, type AuthState, type CredentialScheme, type MerchantReader, type Unverified } from './merchant-check.js';

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const ASCII = /^[\x00-\x7f]*$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

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
 * Starts the check of a request's Basic credentials (src/auth/merchant-check.ts):
 * missing or malformed ones throw the 401 at once; otherwise it answers what
 * the check found, which `basicOutcome` turns into the merchant or the error.
 * Two steps rather than one async function: the pipeline already waits on
 * the check once, and one promise fewer per request is measurable. The
 * answer is a value, not a promise, when the storage holds the merchant in
 * memory (`verifyMerchant`).
 */
export function checkBasicAuth(ctx: KeyAuthState, reader: MerchantReader): Merchant | Unverified | Promise<Merchant | Unverified> {
  const header = ctx.header('authorization');
  const credentials = parseBasicAuth(header);
  if (!credentials || credentials.key === '') throw fail(ctx, header === null ? 'missing_credentials' : 'malformed_credentials');
  return verifyMerchant(ctx, reader, credentials.id, BASIC, { digest: keyDigest(credentials.key), state: ctx });
}

/** What Basic authentication notes besides `AuthState`: which of the merchant's keys matched (its index in `keys`). */
export interface KeyAuthState extends AuthState {
  keyIndex: number;
}

/** What a request presents to the comparison: its key's digest, and where to note the key that matched. */
interface PresentedKey {
  digest: Uint8Array;
  state: KeyAuthState;
}

const ADDRESS_NOT_ALLOWED = new MerchantApiError('address_not_allowed', 'This API key may not be used from this address.');
/** The 403 of a key without the scope, one per scope, naming it. */
const INSUFFICIENT_SCOPE = new Map<KeyScope, MerchantApiError>(KEY_SCOPES.map((scope) => [scope, new MerchantApiError('insufficient_scope', `This API key lacks the scope ${scope}, which this endpoint needs.`)]));

/**
 * The answer to a matched key that may not be used here (src/auth/key-gate.ts): an expired key is
 * a wrong key (the 401, as a revoked one); outside the allowlist, the 403 `address_not_allowed`,
 * a failure for the throttle; without the route's `scope`, the 403 `insufficient_scope` naming it.
 */
export function basicKeyRefused(ctx: AuthState, refusal: KeyRefusal, scope: KeyScope = 'users:read'): MerchantApiError {
  if (refusal === 'expired') return fail(ctx, 'wrong_key');
  if (refusal === 'address_not_allowed') return fail(ctx, 'address_not_allowed'), ADDRESS_NOT_ALLOWED;
  return INSUFFICIENT_SCOPE.get(scope)!;
}

/**
 * The merchant Basic authentication verified, marked authenticated; or the
 * 401 for any credential problem (its reason noted on the context, for logs
 * and metrics only), or the 403 of a disabled merchant whose key is right.
 */
export function basicOutcome(ctx: AuthState, checked: Merchant | Unverified): Merchant {
  if (typeof checked === 'string') throw UNAUTHORIZED;
  ctx.merchantId = checked.id;
  if (checked.status !== 'active') throw DISABLED;
  return checked;
}

const DISABLED = new MerchantApiError('merchant_disabled', 'This account is disabled.');

/** A key compared with every key of the merchant's, as SHA-256 digests in constant time. */
const BASIC: CredentialScheme<PresentedKey> = { verifies: holdsKey, mismatch: 'wrong_key', disabledFirst: false };

/** Every key is compared, in constant time, so timing does not tell which matched; the match is noted for the key's limits. */
function holdsKey(merchant: Merchant, given: PresentedKey): boolean {
  let matched = false;
  const keys = merchant.keys;
  for (let i = 0; i < keys.length; i++) if (constantTimeDigestEqual(keyDigest(keys[i]!), given.digest)) (matched = true), (given.state.keyIndex = i);
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
