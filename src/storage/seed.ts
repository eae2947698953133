/**
 * The seed format (docs/protocol.md#storage-and-secrets), shared by the memory storage and the CLI
 * import: merchants with their keys, and users with the merchant they are
 * shared with. Validation names the exact place of every problem, so a bad
 * seed file fails at start-up with a message an operator can act on.
 */
import { MAX_ID_LENGTH, USER_RECORD_KEYS, type UserRecord } from '../storage.js';
import { canonicalTimestamp } from '../timestamps.js';

export interface SeedMerchant {
  id: string;
  status: 'active' | 'disabled';
  keys: string[];
}

/** A user record plus the merchant it is shared with. */
export interface SeedUser extends UserRecord {
  merchant_id: string;
}

export interface Seed {
  merchants: SeedMerchant[];
  users: SeedUser[];
}

/** A seed that does not match the format; `problems` lists each with its place. */
export class SeedError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid seed: ${problems.slice(0, 10).join('; ')}${problems.length > 10 ? `; and ${problems.length - 10} more` : ''}`);
    this.name = 'SeedError';
  }
}

const NULLABLE = new Set(['state', 'deactivated_at', 'agreed_to_terms_and_conditions', 'agreed_to_marketing']);
const TIMESTAMPS = new Set(['date_joined', 'deactivated_at', 'agreed_to_terms_and_conditions', 'agreed_to_marketing']);
const LOWER_CASE = new Set(['country', 'preferred_language']);

/** Validates a parsed seed document; throws `SeedError` listing every problem. */
export function parseSeed(document: unknown): Seed {
  const problems: string[] = [];
  if (!isObject(document)) throw new SeedError(['the seed must be a JSON object with "merchants" and "users"']);
  const merchantsIn = document.merchants;
  const usersIn = document.users ?? [];
  if (!Array.isArray(merchantsIn)) problems.push('"merchants" must be an array');
  if (!Array.isArray(usersIn)) problems.push('"users" must be an array');
  if (problems.length) throw new SeedError(problems);

  const merchants: SeedMerchant[] = [];
  const merchantIds = new Set<string>();
  (merchantsIn as unknown[]).forEach((m, i) => {
    const merchant = parseMerchant(m, `merchants[${i}]`, problems);
    if (!merchant) return;
    if (merchantIds.has(merchant.id)) problems.push(`merchants[${i}].id: "${merchant.id}" appears twice`);
    merchantIds.add(merchant.id);
    merchants.push(merchant);
  });

  const users: SeedUser[] = [];
  const seen = new Set<string>();
  (usersIn as unknown[]).forEach((u, i) => {
    const user = parseSeedUser(u, `users[${i}]`, problems);
    if (!user) return;
    if (!merchantIds.has(user.merchant_id)) problems.push(`users[${i}].merchant_id: no merchant "${user.merchant_id}" in the seed`);
    const key = `${user.merchant_id}\u0000${user.shared_user_id}`;
    if (seen.has(key)) problems.push(`users[${i}].shared_user_id: appears twice for merchant "${user.merchant_id}"`);
    seen.add(key);
    users.push(user);
  });

  if (problems.length) throw new SeedError(problems);
  return { merchants, users };
}

function parseMerchant(value: unknown, at: string, problems: string[]): SeedMerchant | undefined {
  if (!isObject(value)) {
    problems.push(`${at}: must be an object`);
    return undefined;
  }
  const before = problems.length;
  const id = identifier(value.id, `${at}.id`, problems);
  const status = value.status ?? 'active';
  if (status !== 'active' && status !== 'disabled') problems.push(`${at}.status: must be "active" or "disabled"`);
  const keys = value.keys;
  if (!Array.isArray(keys) || keys.some((k) => typeof k !== 'string' || k.length === 0)) {
    problems.push(`${at}.keys: must be an array of non-empty strings`);
  }
  if (problems.length > before) return undefined;
  return { id: id!, status: status as SeedMerchant['status'], keys: keys as string[] };
}

/**
 * Validates one user record with its `merchant_id` (also used line by line
 * for NDJSON imports). Timestamps come back in the canonical form.
 */
export function parseSeedUser(value: unknown, at: string, problems: string[]): SeedUser | undefined {
  if (!isObject(value)) {
    problems.push(`${at}: must be an object`);
    return undefined;
  }
  const before = problems.length;
  const user: Record<string, string | null> = {};
  user.merchant_id = identifier(value.merchant_id, `${at}.merchant_id`, problems) ?? null;
  for (const key of USER_RECORD_KEYS) {
    const field = value[key];
    const place = `${at}.${key}`;
    if (field === null && NULLABLE.has(key)) {
      user[key] = null;
    } else if (key === 'shared_user_id') {
      user[key] = sharedUserId(field, place, problems) ?? null;
    } else if (typeof field !== 'string') {
      problems.push(`${place}: ${field === undefined ? 'is missing' : NULLABLE.has(key) ? 'must be a string or null' : 'must be a string'}`);
    } else if (TIMESTAMPS.has(key)) {
      const canonical = canonicalTimestamp(field);
      // The value is not quoted: seed problems reach logs, and user fields never may.
      if (canonical === undefined) problems.push(`${place}: not an ISO 8601 timestamp`);
      user[key] = canonical ?? null;
    } else {
      user[key] = LOWER_CASE.has(key) ? field.toLowerCase() : field;
    }
  }
  for (const key of Object.keys(value)) {
    if (key !== 'merchant_id' && !(USER_RECORD_KEYS as readonly string[]).includes(key)) {
      problems.push(`${at}.${key}: unknown field`);
    }
  }
  if (problems.length > before) return undefined;
  return user as unknown as SeedUser;
}

function identifier(value: unknown, at: string, problems: string[]): string | undefined {
  if (typeof value !== 'string' || value.length === 0) {
    problems.push(`${at}: must be a non-empty string`);
    return undefined;
  }
  if (value.length > MAX_ID_LENGTH || value.includes('\u0000')) {
    problems.push(`${at}: must be at most ${MAX_ID_LENGTH} characters, without NUL`);
    return undefined;
  }
  return value;
}

/**
 * A user id must be addressable as `/merchant/users/{id}`: URL normalisation
 * removes the dot segments `.` and `..` (also when sent as `%2E`), so a user
 * with such an id could be listed but never read alone.
 */
function sharedUserId(value: unknown, at: string, problems: string[]): string | undefined {
  const id = identifier(value, at, problems);
  if (id === '.' || id === '..') {
    problems.push(`${at}: \`.\` and \`..\` cannot be used, because URLs drop such path segments`);
    return undefined;
  }
  return id;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
