/**
 * A merchant's changes to its own keys as the storage contract names them (`Storage.createKey` and
 * the rest, docs/protocol.md#managing-keys): what is asked, what is answered, the bounds every
 * storage keeps and the refusals every storage answers alike. The handler (src/routes/key-changes.ts)
 * checks the request (names, scopes, networks, times, what the calling key may give); the storage
 * keeps the rules that need the merchant's other keys (the most keys, the last key that manages
 * keys), atomically, so that two requests at once cannot both pass them.
 */
import { MerchantApiError } from '../errors.js';
import type { KeyInfo } from './contract.js';
import type { KeyScope } from './key-limits.js';
import { formatEpochSeconds } from './timestamps.js';

/** The most keys a merchant may have working at once (not revoked, not past their end); one more is 409 `conflict`. */
export const MAX_ACTIVE_KEYS = 20;

/**
 * The longest a rotated key keeps working beside its successor (`expire_old_in`): 7 days. A
 * merchant rotates because a key may have leaked; a week is time enough to deploy the new one
 * everywhere, and no longer leaves a leaked key usable for months. (The operator's
 * `merchant rotate-key --expire-old-in` allows up to 366 days.)
 */
export const MAX_KEY_OVERLAP_MS = 7 * 86_400_000;

/** Who a change is recorded as (a storage with an audit trail): `merchant:ID key:KEY_ID`, and that key's id for the row's `key_id`. */
export interface KeyChangeOptions {
  actor?: string;
  /** The id of the key that authenticated the request which makes the change. */
  keyId?: string;
}

/** A key a merchant adds (`Storage.createKey`), already checked by the handler. */
export interface NewMerchantKey extends KeyChangeOptions {
  merchantId: string;
  name: string | null;
  /** At least one; every scope is stored as a key without limits. */
  scopes: readonly KeyScope[];
  /** Canonical networks (`parseAllowFrom`); empty: anywhere. */
  allowFrom: readonly string[];
  /** When it stops working, canonical UTC; null: never. */
  expiresAt: string | null;
}

/** A key added or rotated in: what `GET /merchant/keys` lists of it, and its secret, shown only in this answer. */
export interface CreatedMerchantKey extends KeyInfo {
  secret: string;
}

/** A rotation (`Storage.rotateKey`): the new key, with the old one's end. */
export interface RotatedMerchantKey extends CreatedMerchantKey {
  /** The key rotated out. */
  old_key_id: string;
  /** When the old key stops working, canonical UTC (now, for a rotation without overlap). */
  old_key_expires_at: string;
}

/** What `Storage.rotateKey` is asked. */
export interface KeyRotation extends KeyChangeOptions {
  merchantId: string;
  /** The key to rotate out. */
  rotatedKeyId: string;
  /** When the old key stops working, canonical UTC: now (at once) or up to `MAX_KEY_OVERLAP_MS` later. */
  oldExpiresAt: string;
  /** The new key's end, canonical UTC; null: never. */
  expiresAt: string | null;
  /** Now, canonical: the old key is revoked at once when `oldExpiresAt` is not later. */
  now: string;
  /** The scopes the calling key has: a key with another is not rotated (403 `insufficient_scope`, `cannotGive`). */
  mayGive: readonly KeyScope[];
}

/** What `PATCH /merchant/keys/{key_id}` may change: the name (null: none) and the networks (empty: anywhere). */
export interface KeyPatch {
  name?: string | null;
  allowFrom?: readonly string[];
}

/** A merchant at `MAX_ACTIVE_KEYS`, on every storage. */
export const TOO_MANY_KEYS = new MerchantApiError(
  'conflict',
  `This merchant has ${MAX_ACTIVE_KEYS} working keys, the most it may have: revoke one it no longer uses (DELETE /merchant/keys/{key_id}) first.`,
);

/** The refusal to revoke the last working key with `keys:manage`, on every storage. */
export const LAST_KEY_MANAGER = new MerchantApiError(
  'conflict',
  'This is the last working key with the scope keys:manage: revoking it would leave the merchant no key that can manage keys. Create another key with keys:manage first (or ask the operator).',
);

/** The 403 of a key asked to give a scope it lacks itself (a new key's, or a rotated key's), naming it. */
export function cannotGive(scope: KeyScope): MerchantApiError {
  return new MerchantApiError('insufficient_scope', `This API key lacks the scope ${scope}, so it cannot give it to another key: a key gives only scopes it has.`);
}

/** What a storage without the key operations (one of an embedder's own) answers them with: 501 `not_implemented`. */
export const KEYS_NOT_CHANGED = new MerchantApiError('not_implemented', 'The storage behind this server cannot change keys through the API (ask the operator).');

/** Epoch milliseconds as a canonical timestamp (`YYYY-MM-DDTHH:MM:SS.ffffff+00:00`). */
export function canonicalAtMs(ms: number): string {
  const whole = Math.floor(ms);
  return formatEpochSeconds(Math.floor(whole / 1000), String((whole % 1000) * 1000).padStart(6, '0'));
}
