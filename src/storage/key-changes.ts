/**
 * A merchant's changes to its own keys as the storage contract names them (`Storage.createKey` and
 * the rest, docs/protocol.md#managing-keys): what is asked, what is answered, the bounds every
 * storage keeps and the refusals every storage answers alike. The handler (src/routes/key-changes.ts)
 * checks the request (names, scopes, networks, times, what the calling key may give); the storage
 * keeps the rules that need the merchant's other keys (the most keys, the last key that manages
 * keys), atomically, so that two requests at once cannot both pass them.
 */
import { randomBytes } from 'node:crypto';
import { MerchantApiError } from '../errors.js';
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

/** Crockford's base32 alphabet, lower case: no i, l, o, u to misread. */
const BASE32 = '0123456789abcdefghjkmnpqrstvwxyz';

/**
 * A new public key id, on every storage: `key_` and 12 base32 characters, 60 random bits (a
 * collision is not to be expected in any real number of keys).
 */
export function newKeyId(): string {
  const bytes = randomBytes(12);
  let id = 'key_';
  for (const byte of bytes) id += BASE32[byte & 31];
  return id;
}

/** Epoch milliseconds as a canonical timestamp (`YYYY-MM-DDTHH:MM:SS.ffffff+00:00`). */
export function canonicalAtMs(ms: number): string {
  const whole = Math.floor(ms);
  return formatEpochSeconds(Math.floor(whole / 1000), String((whole % 1000) * 1000).padStart(6, '0'));
}
