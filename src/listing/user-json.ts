/**
 * Serialises user records with all 14 keys in the documented order,
 * whatever order a storage built its objects in (docs/protocol.md#users). Listings in
 * `order=updated_at` add `updated_at` as a 15th key; no other answer ever has it.
 */
import type { ChangedUserRecord, UserRecord } from '../storage/contract.js';

/** One record as JSON text. */
export function userJson(u: UserRecord): string {
  return (
    `{"shared_user_id":${str(u.shared_user_id)},"first_name":${str(u.first_name)},"last_name":${str(u.last_name)}` +
    `,"email_address":${str(u.email_address)},"street":${str(u.street)},"zip_code":${str(u.zip_code)}` +
    `,"city":${str(u.city)},"state":${str(u.state)},"country":${str(u.country)}` +
    `,"preferred_language":${str(u.preferred_language)},"date_joined":${str(u.date_joined)}` +
    `,"deactivated_at":${str(u.deactivated_at)},"agreed_to_terms_and_conditions":${str(u.agreed_to_terms_and_conditions)}` +
    `,"agreed_to_marketing":${str(u.agreed_to_marketing)}}`
  );
}

/** One record with `updated_at` after the 14 keys. */
export function changedUserJson(u: ChangedUserRecord): string {
  return `${userJson(u).slice(0, -1)},"updated_at":${str(u.updated_at)}}`;
}

/** Records joined with commas, ready to sit inside a JSON array; `withUpdatedAt` in `order=updated_at` only. */
export function usersJson(users: readonly UserRecord[], withUpdatedAt = false): string {
  const one = withUpdatedAt ? (u: UserRecord) => changedUserJson(u as ChangedUserRecord) : userJson;
  let out = '';
  for (let i = 0; i < users.length; i++) out += i ? `,${one(users[i]!)}` : one(users[i]!);
  return out;
}

/**
 * Characters JSON.stringify would escape: quote, backslash, controls, and
 * surrogates (a lone one is escaped; pairs are left to JSON.stringify too).
 */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

function str(value: string | null | undefined): string {
  if (value === null || value === undefined) return 'null';
  // Most fields need no escaping, and quoting them directly skips
  // JSON.stringify's scan on every field of every page
  // (docs/benchmarks.md#figures-behind-choices-in-the-code). Output is identical to JSON.stringify.
  // A storage bug handing over a non-string keeps JSON.stringify's answer (or its throw: a 500).
  return typeof value === 'string' && !NEEDS_ESCAPE.test(value) ? `"${value}"` : JSON.stringify(value);
}
