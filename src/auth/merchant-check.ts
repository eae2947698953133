/**
 * The one check of credentials against a merchant, for HTTP Basic and for
 * signatures alike: look the merchant up, compare, and on a miss read it
 * again once past the storage's cache before comparing again, so that a key
 * rotated on another instance is not refused (the storage bounds how often
 * it re-reads). What is compared is the scheme's: a key
 * (src/auth/basic-auth.ts) or a signature (src/routes/validate-signature.ts).
 *
 * It notes on the context the merchant the credentials name and why they
 * failed, never that they passed: each caller marks the merchant
 * authenticated in one place (`ctx.merchantId`, `deps.authenticated`), so
 * which checks "authenticated" covers is decided there, on one line.
 */
import type { Merchant, MerchantLookup } from '../storage/contract.js';

/**
 * Why an authentication failed, as logged and counted. `bad_timestamp` and
 * `replayed_salt`: a signature that verifies on a URL whose `ts` is outside
 * the window (or not whole seconds),
 * or whose salt was already used; a captured URL, failed like a wrong key. `address_not_allowed`:
 * a key that matched, presented from outside its allowlist (src/auth/key-gate.ts).
 */
export type AuthFailureReason = 'missing_credentials' | 'malformed_credentials' | 'unknown_merchant' | 'wrong_key' | 'bad_signature' | 'bad_timestamp' | 'replayed_salt' | 'address_not_allowed';

/** What authentication reads of a request and notes on it (the pipeline's `RequestContext` is one). */
export interface AuthState {
  header(name: string): string | null;
  claimedMerchantId: string | undefined;
  merchantId: string | undefined;
  authFailure: AuthFailureReason | undefined;
}


/** The storage calls the check makes (the request's guarded storage view is one). */
export interface MerchantReader {
  getMerchant(id: string, options?: MerchantLookup): Promise<Merchant | undefined>;
  /** The merchant when held in memory, synchronously (`Storage.cachedMerchant`); else undefined. */
  cachedMerchant?(id: string): Merchant | undefined;
}

/** How one scheme compares what a request presents (`given`) with a merchant. */
export interface CredentialScheme<G> {
  /** True when one of the merchant's keys verifies `given`; every key is compared, so timing does not tell which. */
  verifies(merchant: Merchant, given: G): boolean;
  /** The failure noted when no key verifies, after the second read too. */
  mismatch: AuthFailureReason;
  /** A disabled merchant is answered before its keys are compared (signatures); otherwise after (Basic), by the caller. */
  disabledFirst: boolean;
}

/** Why the check answered no merchant: the failure noted on the context, or `disabled` (`disabledFirst` schemes only, noted nowhere). */
export type Unverified = AuthFailureReason | 'disabled';

/** The lookup after the credentials matched none of the merchant's (cached) keys. */
const REFRESH: MerchantLookup = Object.freeze({ refresh: true });

/**
 * The merchant `id` names, if its keys verify `given`; else why not.
 * `ctx.claimedMerchantId` is set once the merchant is known to exist, and
 * `ctx.authFailure` on a failure.
 *
 * A merchant the storage holds in memory (`cachedMerchant`) is checked
 * without a promise: the answer is then a value, not a `Promise`, and the
 * request costs no async step for it (docs/benchmarks.md#the-node-direct-path-28-november-2026).
 * Otherwise, and when its keys verify nothing (the second read, past the
 * cache), the same steps as before, awaited.
 */
export function verifyMerchant<G>(ctx: AuthState, reader: MerchantReader, id: string, scheme: CredentialScheme<G>, given: G): Merchant | Unverified | Promise<Merchant | Unverified> {
  const held = reader.cachedMerchant?.(id);
  if (held === undefined) return readAndVerify(ctx, reader, id, scheme, given);
  ctx.claimedMerchantId = held.id;
  if (scheme.disabledFirst && held.status !== 'active') return 'disabled';
  return scheme.verifies(held, given) ? held : readAgain(ctx, reader, id, scheme, given);
}

async function readAndVerify<G>(ctx: AuthState, reader: MerchantReader, id: string, scheme: CredentialScheme<G>, given: G): Promise<Merchant | Unverified> {
  const merchant = await reader.getMerchant(id);
  if (merchant === undefined) return (ctx.authFailure = 'unknown_merchant');
  ctx.claimedMerchantId = merchant.id;
  if (scheme.disabledFirst && merchant.status !== 'active') return 'disabled';
  return scheme.verifies(merchant, given) ? merchant : readAgain(ctx, reader, id, scheme, given);
}

/** No key verified: the merchant read again past the storage's cache, then compared once more. */
async function readAgain<G>(ctx: AuthState, reader: MerchantReader, id: string, scheme: CredentialScheme<G>, given: G): Promise<Merchant | Unverified> {
  const merchant = await reader.getMerchant(id, REFRESH);
  if (merchant === undefined || !scheme.verifies(merchant, given)) return (ctx.authFailure = scheme.mismatch);
  return merchant;
}
