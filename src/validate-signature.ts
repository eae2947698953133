/**
 * `GET|HEAD /validatesignature` (docs/protocol.md#signing): the outcome table, checked
 * in the documented order, with byte-exact bodies.
 */
import { MerchantApiError } from './errors.js';
import type { StorageCall } from './guarded-storage.js';
import { decodePathSegment } from './query.js';
import { json, SIGNATURE_OK, signatureError } from './responses.js';
import { canonicalMessage, verify } from './signing.js';
import { MAX_ID_LENGTH } from './storage.js';

export interface SignatureContext {
  method: string;
  head: boolean;
  /** Public base URLs without path, e.g. `https://api.example.com` (see public-url.ts). */
  bases: string[];
  /** The path as received, still percent-encoded. */
  path: string;
  pairs: [string, string][];
  nowMs: number;
  tolerance: number;
  storage: StorageCall;
}

const REQUIRED = ['salt', 'cp', 'ts', 'hmac'] as const;
const WHOLE_SECONDS = /^-?\d{1,15}$/;

export async function validateSignature(ctx: SignatureContext): Promise<Response> {
  const { head } = ctx;
  const values = requiredValues(ctx.pairs);

  const merchant = await ctx.storage('getMerchant', (s) => s.getMerchant(values.cp));
  if (!merchant) return json(404, signatureError(undefined), head);
  if (merchant.status !== 'active') return json(403, signatureError('This account is disabled.'), head);

  if (!signatureMatches(ctx, values.hmac, merchant.keys)) return json(400, signatureError('Signature does not match.'), head);

  const nowSeconds = Math.floor(ctx.nowMs / 1000);
  if (!WHOLE_SECONDS.test(values.ts)) {
    return json(400, signatureError('Invalid timestamp: ts must be a Unix time in whole seconds.'), head);
  }
  const ts = Number(values.ts);
  if (Math.abs(nowSeconds - ts) > ctx.tolerance) {
    return json(400, signatureError(`Invalid timestamp: ts is outside the accepted window of ${ctx.tolerance} seconds from the server's time.`), head);
  }

  const record = { merchantId: merchant.id, salt: values.salt, expiresAt: ts + ctx.tolerance, now: nowSeconds };
  const fresh = await ctx.storage('recordSalt', (s) => s.recordSalt(record));
  if (!fresh) return json(400, signatureError('This salt was already used: every request needs a new salt.'), head);
  return json(200, SIGNATURE_OK, head);
}

/** The four required values, or a 400 naming every absent, empty or repeated one. */
function requiredValues(pairs: [string, string][]): Record<(typeof REQUIRED)[number], string> {
  // Fast path, no allocation but the result: each of the four exactly once,
  // non-empty and short enough, as every valid request has them.
  let salt: string | undefined;
  let cp: string | undefined;
  let ts: string | undefined;
  let hmac: string | undefined;
  let seen = 0;
  for (let i = 0; i < pairs.length; i++) {
    const [key, value] = pairs[i]!;
    if (key === 'salt') (salt = value), seen++;
    else if (key === 'cp') (cp = value), seen++;
    else if (key === 'ts') (ts = value), seen++;
    else if (key === 'hmac') (hmac = value), seen++;
  }
  if (seen === 4 && salt && cp && ts && hmac && cp.length <= MAX_ID_LENGTH && salt.length <= MAX_ID_LENGTH) return { salt, cp, ts, hmac };
  return describeProblems(pairs);
}

/** Throws the 400 naming every absent, empty, repeated or too long parameter. */
function describeProblems(pairs: [string, string][]): never {
  const found: Record<string, string | undefined> = {};
  const repeated = new Set<string>();
  for (const [key, value] of pairs) {
    if (key !== 'salt' && key !== 'cp' && key !== 'ts' && key !== 'hmac') continue;
    if (key in found) repeated.add(key);
    found[key] = value;
  }
  const missing = REQUIRED.filter((key) => !found[key]);
  const twice = REQUIRED.filter((key) => repeated.has(key) && found[key]);
  const messages: string[] = [];
  if (missing.length) messages.push(`Missing required parameter${missing.length > 1 ? 's' : ''}: ${missing.join(', ')}.`);
  if (twice.length) messages.push(`Parameter given more than once: ${twice.join(', ')}.`);
  const tooLong = (['cp', 'salt'] as const).filter((key) => !missing.includes(key) && found[key]!.length > MAX_ID_LENGTH);
  if (tooLong.length) messages.push(`Invalid parameter: ${tooLong.join(', ')} longer than ${MAX_ID_LENGTH} characters.`);
  throw new MerchantApiError('invalid_parameter', messages.join(' '));
}

/**
 * Tries every public base URL the merchant may have called, and for a path
 * with escapes both its encoded and its decoded form: clients sign the URL
 * string they hold, which may be either.
 */
function signatureMatches(ctx: SignatureContext, hmac: string, keys: string[]): boolean {
  const decoded = ctx.path.includes('%') ? decodePathSegment(ctx.path) : undefined;
  let matched = false;
  for (const base of ctx.bases) {
    if (verify(hmac, keys, canonicalMessage({ method: ctx.method, url: base + ctx.path, params: ctx.pairs }))) matched = true;
    if (decoded !== undefined && verify(hmac, keys, canonicalMessage({ method: ctx.method, url: base + decoded, params: ctx.pairs }))) matched = true;
  }
  return matched;
}
