/**
 * The seed format (docs/protocol.md#storage-and-secrets), shared by the memory storage and the CLI
 * import: merchants with their keys, and users with the merchant they are
 * shared with. Validation names the exact place of every problem, so a bad
 * seed file fails at start-up with a message an operator can act on.
 */
import { MAX_ID_LENGTH, merchantIdProblem, USER_RECORD_KEYS, type UserRecord } from '../contract.js';
import { canonicalTimestamp } from '../timestamps.js';
import { keyModeProblem, keyNameProblem, limitsNothing, parseAllowFrom, parseScopes, TEST_KEY_PREFIX, type KeyLimits } from '../key-limits.js';

export interface SeedMerchant {
  id: string;
  status: 'active' | 'disabled';
  keys: string[];
  /**
   * What the seed says of each key besides its secret, in the order of `keys`, when it gives a key
   * as an object (`{"key": ..., "name": ..., "scopes": [...], "allow_from": [...], "expires_at": ..., "mode": "test"}`);
   * absent when every key is a plain string (a key with every scope, as before).
   */
  keyDetails?: (SeedKeyDetails | undefined)[];
}

/** A seed key's details (docs/protocol.md#the-seed-document); `limits` is absent when it limits nothing. */
export interface SeedKeyDetails {
  keyId?: string;
  name?: string;
  createdAt?: string;
  limits?: KeyLimits;
}

const SEED_KEY_FIELDS = new Set(['key', 'key_id', 'name', 'scopes', 'allow_from', 'expires_at', 'created_at', 'mode']);
const SEED_KEY_ID = /^key_[0-9a-hjkmnp-tv-z]{12}$/;

/** One key of a seed merchant: a string, or an object with `key` and its details. */
function parseSeedKey(value: unknown, at: string, problems: string[]): { key: string; details?: SeedKeyDetails } | undefined {
  if (typeof value === 'string') return value.length > 0 ? { key: value } : (problems.push(`${at}: must be a non-empty string or a key object`), undefined);
  if (!isObject(value)) return problems.push(`${at}: must be a non-empty string or a key object`), undefined;
  const before = problems.length;
  for (const field of Object.keys(value)) if (!SEED_KEY_FIELDS.has(field)) problems.push(`${at}: unknown field ${JSON.stringify(field.slice(0, 40))} (a key has ${[...SEED_KEY_FIELDS].join(', ')})`);
  const { key, key_id: keyId, name, scopes, allow_from: allowFrom, expires_at: expiresAt, created_at: createdAt, mode } = value;
  if (typeof key !== 'string' || key.length === 0) problems.push(`${at}.key: must be a non-empty string`);
  if (mode !== undefined && (typeof mode !== 'string' || keyModeProblem(mode) !== undefined)) problems.push(`${at}.mode: must be "live" or "test"`);
  // A test key is recognisable at a glance (docs/test-mode.md): the seed's own secrets too.
  else if (mode === 'test' && typeof key === 'string' && !key.startsWith(TEST_KEY_PREFIX)) problems.push(`${at}.key: a test key must start with "${TEST_KEY_PREFIX}"`);
  if (keyId !== undefined && (typeof keyId !== 'string' || !SEED_KEY_ID.test(keyId))) problems.push(`${at}.key_id: must be "key_" and 12 characters of 0-9 a-z without i, l, o, u`);
  if (name !== undefined && name !== null && (typeof name !== 'string' || keyNameProblem(name) !== undefined)) problems.push(`${at}.name: ${typeof name === 'string' ? keyNameProblem(name) : 'must be a string'}`);
  let parsedScopes: KeyLimits['scopes'];
  if (scopes !== undefined) {
    const parsed = Array.isArray(scopes) && scopes.every((scope) => typeof scope === 'string') ? parseScopes(scopes as string[]) : 'must be an array of scopes';
    if (typeof parsed === 'string') problems.push(`${at}.scopes: ${parsed}`);
    else parsedScopes = parsed;
  }
  let networks: string[] | undefined;
  if (allowFrom !== undefined && allowFrom !== null) {
    const parsed = Array.isArray(allowFrom) && allowFrom.every((entry) => typeof entry === 'string') ? parseAllowFrom(allowFrom as string[]) : { problems: ['must be an array of networks (CIDR)'] };
    if ('problems' in parsed) problems.push(...parsed.problems.map((problem) => `${at}.allow_from: ${problem}`));
    else networks = parsed.networks;
  }
  const timestamp = (text: unknown, field: string): string | undefined => {
    if (text === undefined || text === null) return undefined;
    const canonical = typeof text === 'string' ? canonicalTimestamp(text) : undefined;
    if (canonical === undefined) problems.push(`${at}.${field}: must be an RFC 3339 timestamp with a time zone`);
    return canonical;
  };
  const end = timestamp(expiresAt, 'expires_at');
  const created = timestamp(createdAt, 'created_at');
  if (problems.length > before) return undefined;
  const limits: KeyLimits = { ...(parsedScopes && { scopes: parsedScopes }), ...(networks && networks.length > 0 && { allowFrom: networks }), ...(end && { expiresAt: end }), ...(mode === 'test' && { mode: 'test' as const }) };
  const details: SeedKeyDetails = {
    ...(keyId !== undefined && { keyId: keyId as string }),
    ...(typeof name === 'string' && { name }),
    ...(created && { createdAt: created }),
    ...(!limitsNothing(limits) && { limits }),
  };
  return { key: key as string, details };
}

/**
 * A user record plus the merchant it is shared with, and optionally when it last changed
 * (canonical; the memory storage keeps it, the MySQL import stamps its own time).
 */
export interface SeedUser extends UserRecord {
  merchant_id: string;
  updated_at?: string;
}

export interface Seed {
  merchants: SeedMerchant[];
  users: SeedUser[];
}

/**
 * A seed that does not match the format; `problems` lists each with its place (a streamed load
 * keeps the first 1000 and counts the rest in `problemCount`).
 */
export class SeedError extends Error {
  constructor(
    readonly problems: string[],
    readonly problemCount = problems.length,
  ) {
    super(`Invalid seed: ${problems.slice(0, 10).join('; ')}${problemCount > 10 ? `; and ${problemCount - 10} more` : ''}`);
    this.name = 'SeedError';
  }
}

const NULLABLE = new Set(['state', 'deactivated_at', 'agreed_to_terms_and_conditions', 'agreed_to_marketing']);
const TIMESTAMPS = new Set(['date_joined', 'deactivated_at', 'agreed_to_terms_and_conditions', 'agreed_to_marketing']);
const LOWER_CASE = new Set(['country', 'preferred_language']);
const SEED_USER_KEYS = new Set<string>(['merchant_id', 'updated_at', ...USER_RECORD_KEYS]);
const SEED_MERCHANT_KEYS = new Set<string>(['id', 'status', 'keys']);
const SEED_MEMBERS = new Set<string>(['merchants', 'users']);

/**
 * A member of the seed document the format does not know: refused like an unknown field of a
 * merchant or a user, so a typo (`"user": [...]`) is not a seed loaded without its users.
 */
export function unknownMemberProblem(key: string): string | undefined {
  return SEED_MEMBERS.has(key) ? undefined : `${JSON.stringify(key)}: unknown member (a seed has "merchants" and "users")`;
}

/** Validates a parsed seed document; throws `SeedError` listing every problem. */
export function parseSeed(document: unknown): Seed {
  const problems: string[] = [];
  if (!isObject(document)) throw new SeedError(['the seed must be a JSON object with "merchants" and "users"']);
  const merchantsIn = document.merchants;
  const usersIn = document.users ?? [];
  if (!Array.isArray(merchantsIn)) problems.push('"merchants" must be an array');
  if (!Array.isArray(usersIn)) problems.push('"users" must be an array');
  if (problems.length) throw new SeedError(problems);
  // Reported with the elements' problems, as the streamed reader does (src/storage/seed/seed-stream.ts).
  for (const key of Object.keys(document)) {
    const problem = unknownMemberProblem(key);
    if (problem) problems.push(problem);
  }

  const merchants: SeedMerchant[] = [];
  const merchantIds = new Set<string>();
  (merchantsIn as unknown[]).forEach((m, i) => {
    const merchant = parseSeedMerchant(m, `merchants[${i}]`, problems);
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

/** Validates one merchant of a seed; problems are named with `at` (`merchants[0]`). */
export function parseSeedMerchant(value: unknown, at: string, problems: string[]): SeedMerchant | undefined {
  if (!isObject(value)) {
    problems.push(`${at}: must be an object`);
    return undefined;
  }
  const before = problems.length;
  const id = identifier(value.id, `${at}.id`, problems);
  // The merchant id rule (no ":", no control character): such a merchant could never authenticate.
  const idProblem = id === undefined ? undefined : merchantIdProblem(id);
  if (idProblem !== undefined) problems.push(`${at}.id: ${idProblem}`);
  const status = value.status ?? 'active';
  if (status !== 'active' && status !== 'disabled') problems.push(`${at}.status: must be "active" or "disabled"`);
  const keysIn = value.keys;
  const keys: string[] = [];
  let keyDetails: (SeedKeyDetails | undefined)[] | undefined;
  if (!Array.isArray(keysIn)) problems.push(`${at}.keys: must be an array of non-empty strings or key objects`);
  else if (keysIn.every((k) => typeof k === 'string' && k.length > 0)) keys.push(...(keysIn as string[]));
  else {
    keyDetails = [];
    keysIn.forEach((k, i) => {
      const parsed = parseSeedKey(k, `${at}.keys[${i}]`, problems);
      if (parsed) keys.push(parsed.key), keyDetails!.push(parsed.details);
    });
  }
  // As for users: a field the format does not know is a mistake (`"statuss": "disabled"` would serve an active merchant).
  for (const key of Object.keys(value)) {
    if (!SEED_MERCHANT_KEYS.has(key)) problems.push(`${at}.${key}: unknown field`);
  }
  if (problems.length > before) return undefined;
  return { id: id!, status: status as SeedMerchant['status'], keys, ...(keyDetails && { keyDetails }) };
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
  const fast = fastUser(value, true);
  if (fast) return fast as SeedUser;
  const before = problems.length;
  const user: Record<string, string | null> = {};
  user.merchant_id = identifier(value.merchant_id, `${at}.merchant_id`, problems) ?? null;
  return readUserFields(value, at, problems, user, before) as unknown as SeedUser | undefined;
}

/**
 * Validates one seed user like `parseSeedUser`, answering its merchant id and the record with
 * exactly the 14 record keys (what the memory storage keeps, without a copy).
 */
export function parseUserRecord(value: unknown, at: string, problems: string[]): { merchantId: string; record: UserRecord; updatedAt?: string } | undefined {
  if (!isObject(value)) {
    problems.push(`${at}: must be an object`);
    return undefined;
  }
  const fast = fastUser(value, false);
  if (fast) return fast as { merchantId: string; record: UserRecord };
  const before = problems.length;
  const merchantId = identifier(value.merchant_id, `${at}.merchant_id`, problems);
  const record = readUserFields(value, at, problems, {}, before) as unknown as (UserRecord & { updated_at?: string }) | undefined;
  if (!record) return undefined;
  const { updated_at: updatedAt, ...fields } = record;
  return updatedAt === undefined ? { merchantId: merchantId!, record } : { merchantId: merchantId!, record: fields, updatedAt };
}

/**
 * The common case in one step: exactly the 15 keys, every value valid, timestamps already
 * canonical and codes lower case. The record is built as one literal (one hidden class, fields
 * in the object: smaller and faster than key-by-key): with `merchant_id` (a `SeedUser`) or
 * without it, next to its merchant id. Undefined sends the user through the general path, which
 * names every problem.
 */
function fastUser(value: Record<string, unknown>, seedUser: boolean): SeedUser | { merchantId: string; record: UserRecord } | undefined {
  const { merchant_id, shared_user_id, first_name, last_name, email_address, street, zip_code, city, state, country, preferred_language, date_joined, deactivated_at, agreed_to_terms_and_conditions, agreed_to_marketing } = value;
  if (
    !isId(merchant_id) ||
    !isId(shared_user_id) ||
    shared_user_id === '.' ||
    shared_user_id === '..' ||
    typeof first_name !== 'string' ||
    typeof last_name !== 'string' ||
    typeof email_address !== 'string' ||
    typeof street !== 'string' ||
    typeof zip_code !== 'string' ||
    typeof city !== 'string' ||
    (state !== null && typeof state !== 'string') ||
    !isLowerCaseString(country) ||
    !isLowerCaseString(preferred_language) ||
    !isCanonicalTimestamp(date_joined) ||
    (deactivated_at !== null && !isCanonicalTimestamp(deactivated_at)) ||
    (agreed_to_terms_and_conditions !== null && !isCanonicalTimestamp(agreed_to_terms_and_conditions)) ||
    (agreed_to_marketing !== null && !isCanonicalTimestamp(agreed_to_marketing))
  ) {
    return undefined;
  }
  let keys = 0;
  for (const _ in value) keys++;
  if (keys !== 15) return undefined; // an unknown field (all 15 known ones are present)
  if (seedUser) {
    return {
      merchant_id,
      shared_user_id,
      first_name,
      last_name,
      email_address,
      street,
      zip_code,
      city,
      state: state as string | null,
      country,
      preferred_language,
      date_joined,
      deactivated_at: deactivated_at as string | null,
      agreed_to_terms_and_conditions: agreed_to_terms_and_conditions as string | null,
      agreed_to_marketing: agreed_to_marketing as string | null,
    };
  }
  return {
    merchantId: merchant_id,
    record: {
      shared_user_id,
      first_name,
      last_name,
      email_address,
      street,
      zip_code,
      city,
      state: state as string | null,
      country,
      preferred_language,
      date_joined,
      deactivated_at: deactivated_at as string | null,
      agreed_to_terms_and_conditions: agreed_to_terms_and_conditions as string | null,
      agreed_to_marketing: agreed_to_marketing as string | null,
    },
  };
}

function isId(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_ID_LENGTH && !value.includes('\u0000');
}

function isLowerCaseString(value: unknown): value is string {
  return typeof value === 'string' && value === value.toLowerCase();
}

/** Checks the 14 keys of `value` into `user`; undefined when problems grew past `before`. */
function readUserFields(value: Record<string, unknown>, at: string, problems: string[], user: Record<string, string | null>, before: number): Record<string, string | null> | undefined {
  for (const key of USER_RECORD_KEYS) {
    const field = value[key];
    if (field === null && NULLABLE.has(key)) {
      user[key] = null;
    } else if (key === 'shared_user_id') {
      user[key] = sharedUserId(field, `${at}.${key}`, problems) ?? null;
    } else if (typeof field !== 'string') {
      problems.push(`${at}.${key}: ${field === undefined ? 'is missing' : NULLABLE.has(key) ? 'must be a string or null' : 'must be a string'}`);
    } else if (TIMESTAMPS.has(key)) {
      const canonical = isCanonicalTimestamp(field) ? field : canonicalTimestamp(field);
      // The value is not quoted: seed problems reach logs, and user fields never may.
      if (canonical === undefined) problems.push(`${at}.${key}: not an ISO 8601 timestamp`);
      user[key] = canonical ?? null;
    } else {
      user[key] = LOWER_CASE.has(key) ? field.toLowerCase() : field;
    }
  }
  // Optional: when the record last changed (docs/protocol.md#the-seed-document).
  if (value.updated_at !== undefined) {
    const updatedAt = value.updated_at;
    const canonical = typeof updatedAt !== 'string' ? undefined : isCanonicalTimestamp(updatedAt) ? updatedAt : canonicalTimestamp(updatedAt);
    if (canonical === undefined) problems.push(`${at}.updated_at: not an ISO 8601 timestamp`);
    else user.updated_at = canonical;
  }
  for (const key of Object.keys(value)) {
    if (!SEED_USER_KEYS.has(key)) problems.push(`${at}.${key}: unknown field`);
  }
  if (problems.length > before) return undefined;
  return user;
}

/**
 * True when `text` is already a valid canonical timestamp (`YYYY-MM-DDTHH:MM:SS.ffffff+00:00`),
 * what `canonicalTimestamp` would answer unchanged: exports usually are, and this is checked in a
 * fraction of the time (a million users have four timestamps each).
 */
export function isCanonicalTimestamp(text: unknown): text is string {
  if (typeof text !== 'string' || text.length !== 32) return false;
  if (text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45 || text.charCodeAt(10) !== 84 || text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58 || text.charCodeAt(19) !== 46) return false;
  if (text.charCodeAt(26) !== 43 || text.charCodeAt(27) !== 48 || text.charCodeAt(28) !== 48 || text.charCodeAt(29) !== 58 || text.charCodeAt(30) !== 48 || text.charCodeAt(31) !== 48) return false;
  for (let i = 0; i < DIGITS.length; i++) {
    const c = text.charCodeAt(DIGITS[i]!);
    if (c < 48 || c > 57) return false;
  }
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 7);
  const day = digits(text, 8, 10);
  if (month < 1 || month > 12 || day < 1) return false;
  const days = month === 2 ? ((year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28) : month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
  return day <= days && digits(text, 11, 13) <= 23 && digits(text, 14, 16) <= 59 && digits(text, 17, 19) <= 59;
}

const DIGITS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22, 23, 24, 25];

/** The number the ASCII digits of `text` from `from` to `to` spell. */
function digits(text: string, from: number, to: number): number {
  let value = 0;
  for (let i = from; i < to; i++) value = value * 10 + text.charCodeAt(i) - 48;
  return value;
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
