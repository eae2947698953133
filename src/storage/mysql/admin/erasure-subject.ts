/**
 * Who an erasure erased, without keeping who it was: the audit trail records a keyed hash of the
 * shared user id (`subject`), HMAC-SHA256 under a key derived from the master key. Whoever holds
 * the id and the master key can ask "was u-3 erased, and when?" (`audit list --user u-3`); the
 * trail alone (a backup, a read-only account) cannot be turned back into ids, even sequential
 * ones, as a plain hash could by trying them all.
 */
import { createHmac, hkdfSync } from 'node:crypto';
import type { MasterKey } from '../../sql/key-sealing.js';

/** A master key's subkey for subjects, derived once per key (HKDF-SHA256, its own label). */
const subkeys = new WeakMap<MasterKey, Buffer>();

/** The `subject` of `sharedUserId`: 32 hex digits (128 bits) of its HMAC. */
export function erasureSubject(masterKey: MasterKey, sharedUserId: string): string {
  let subkey = subkeys.get(masterKey);
  if (!subkey) subkeys.set(masterKey, (subkey = Buffer.from(hkdfSync('sha256', masterKey.bytes, new Uint8Array(0), 'merchant-api audit erasure subject', 32))));
  return createHmac('sha256', subkey).update(sharedUserId, 'utf8').digest('hex').slice(0, 32);
}

/** The most characters of an erasure's `--reason`: a ticket number or a short note, never personal data. */
export const ERASURE_REASON_MAX = 200;

/** Why `reason` cannot be recorded, or undefined. */
export function erasureReasonProblem(reason: string): string | undefined {
  if (reason.length === 0 || reason.length > ERASURE_REASON_MAX) return `--reason must be 1 to ${ERASURE_REASON_MAX} characters`;
  if (/[\u0000-\u001f\u007f-\u009f]/.test(reason)) return '--reason must not hold control characters';
  return undefined;
}
