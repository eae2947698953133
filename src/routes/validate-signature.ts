/**
 * `GET /validatesignature` (docs/protocol.md#validating-a-signature): the outcome table, checked
 * in the documented order, with byte-exact bodies.
 */
import { verifyMerchant, type AuthFailureReason, type CredentialScheme } from '../auth/merchant-check.js';
import type { RequestContext } from '../http/context.js';
import { MerchantApiError } from '../errors.js';
import { decodePathSegment, parseQuery } from '../http/query.js';
import { signatureError } from '../http/error-reply.js';
import { reply, type Reply } from '../http/responses.js';
import { canonicalMessage } from '../signing/index.js';
import { constantTimeHexEqual, hmacSha224Hex } from '../signing/crypto.js';
import type { PublicBaseResolver } from '../http/public-url.js';
import { keyModeOf, MAX_ID_LENGTH } from '../storage/contract.js';
import { TEST_MODE_DISABLED_MESSAGE } from '../testmode/mode-check.js';
import { MALFORMED_QUERY, queryParameter, response, schemaRef } from '../openapi/fragments.js';
import type { OperationDoc } from '../openapi/operation.js';
import type { HandlerDeps, RouteInput } from './route.js';

const REQUIRED = ['salt', 'cp', 'ts', 'hmac'] as const;
const WHOLE_SECONDS = /^-?\d{1,15}$/;

const UNKNOWN_MERCHANT = reply(404, signatureError(undefined));
const DISABLED = reply(403, signatureError('This account is disabled.'));
const MISMATCH = reply(400, signatureError('Signature does not match.'));
const NOT_WHOLE_SECONDS = reply(400, signatureError('Invalid timestamp: ts must be a Unix time in whole seconds.'));
const REPLAYED = reply(400, signatureError('This salt was already used: every request needs a new salt.'));
const VALID = reply(200, '{"status":"ok","is_valid":true}');
const ADDRESS_NOT_ALLOWED = reply(403, signatureError('This API key may not be used from this address.'));
const INSUFFICIENT_SCOPE = reply(403, signatureError('This API key lacks the scope signature, which this endpoint needs.'));
const TEST_MODE_OFF = reply(403, signatureError(TEST_MODE_DISABLED_MESSAGE));
/** Only a hex digest of SHA-224's length can match (as `verify` of src/signing/index.ts checks). */
const HEX_SHA224 = /^[0-9a-fA-F]{56}$/;

/**
 * The codes of the 400 refusals for logs and metrics only (the body has none: wire compatibility), named as the
 * client derives them from the message (src/client/decode-error.ts).
 */
const REFUSAL_CODE = {
  mismatch: 'signature_mismatch',
  notWholeSeconds: 'invalid_timestamp',
  outsideWindow: 'timestamp_out_of_window',
  replayed: 'salt_reused',
} as const;

/** The refusal of a ts outside the window; worded as before when the window is symmetric (wire compatibility). */
function outsideWindow(deps: HandlerDeps): string {
  if (deps.futureTolerance === deps.tolerance) return `Invalid timestamp: ts is outside the accepted window of ${deps.tolerance} seconds from the server's time.`;
  return `Invalid timestamp: ts is outside the accepted window of ${deps.tolerance} seconds before and ${deps.futureTolerance} seconds after the server's time.`;
}

/** What a signed request presents: the four values, and what the signature covers. */
interface SignedQuery {
  salt: string;
  cp: string;
  ts: string;
  hmac: string;
  pairs: [string, string][];
  ctx: RequestContext;
  input: RouteInput;
  resolveBases: PublicBaseResolver;
  /** The public base URLs the merchant may have called, resolved at the first comparison (after the merchant is known active). */
  bases: string[] | undefined;
  /** Which of the merchant's keys the signature matched, for its limits (src/auth/key-gate.ts). */
  keyIndex: number;
}

/** A signature compared with every key of an active merchant's; a merchant disabled is answered before it. */
const SIGNATURE: CredentialScheme<SignedQuery> = {
  verifies: (merchant, signed) => merchant.status === 'active' && signatureMatches(signed, merchant.keys),
  mismatch: 'bad_signature',
  disabledFirst: true,
};

export async function validateSignature(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  const signed = requiredValues(parseQuery(input.search), ctx, input, deps.resolveBases);

  // A value without a promise when the storage holds the merchant in memory: awaited only when it is one.
  const verifying = verifyMerchant(ctx, deps.storage(ctx), signed.cp, SIGNATURE, signed);
  const verified = verifying instanceof Promise ? await verifying : verifying;
  if (typeof verified === 'string') {
    if (verified === 'bad_signature') ctx.errorCode = REFUSAL_CODE.mismatch;
    return verified === 'unknown_merchant' ? UNKNOWN_MERCHANT : verified === 'disabled' ? DISABLED : MISMATCH;
  }

  // The key that matched may not be usable here: expired (answered as a key that does not match, like a
  // revoked one), outside its networks (a failure for the throttle), or without the scope.
  const refused = deps.keys.refusal(verified, signed.keyIndex, 'signature', ctx.clientAddress);
  if (refused !== undefined) {
    if (refused === 'expired') return (ctx.authFailure = 'bad_signature'), (ctx.errorCode = REFUSAL_CODE.mismatch), MISMATCH;
    if (refused === 'address_not_allowed') return (ctx.authFailure = 'address_not_allowed'), (ctx.errorCode = 'address_not_allowed'), ADDRESS_NOT_ALLOWED;
    return (ctx.errorCode = 'insufficient_scope'), INSUFFICIENT_SCOPE;
  }
  // A test key signs too (docs/test-mode.md#signing): its salts are then recorded apart from the live ones (the test view's `recordSalt`).
  if (keyModeOf(verified, signed.keyIndex) === 'test') {
    if (!deps.testMode.enabled) return (ctx.errorCode = 'test_mode_disabled'), TEST_MODE_OFF;
    ctx.mode = 'test';
  }

  // A signature that verifies is not yet a success: a captured URL, expired or already used, verifies too.
  // A refusal on the ts is a failure for the throttle, is not admitted to the merchant, and writes nothing.
  const nowSeconds = Math.floor(deps.now() / 1000);
  if (!WHOLE_SECONDS.test(signed.ts)) return (ctx.authFailure = 'bad_timestamp'), (ctx.errorCode = REFUSAL_CODE.notWholeSeconds), NOT_WHOLE_SECONDS;
  const ts = Number(signed.ts);
  if (nowSeconds - ts > deps.tolerance || ts - nowSeconds > deps.futureTolerance) {
    ctx.authFailure = 'bad_timestamp';
    ctx.errorCode = REFUSAL_CODE.outsideWindow;
    return reply(400, signatureError(outsideWindow(deps)));
  }

  // The one place the merchant is marked authenticated (fair share, the onAuthenticated hooks), before
  // the salt is recorded: their refusal (429) must not spend the URL, which the client may send again.
  const hooks = deps.authenticated(ctx, verified.id);
  if (hooks) await hooks;

  const record = { merchantId: verified.id, salt: signed.salt, expiresAt: ts + deps.tolerance, now: nowSeconds, ts, futureTolerance: deps.futureTolerance };
  let fresh: boolean;
  try {
    fresh = await deps.storage(ctx).recordSalt(record);
  } catch (error) {
    // The storage's own 400: a ts from before its replay store began (docs/protocol.md#a-bounded-replay-store).
    // The server caused it (it started, or lost salts): not a success, and not the caller's failure either,
    // so a merchant signing again meanwhile is not blocked by the throttle on top of the refusal.
    if (error instanceof MerchantApiError && error.code === 'invalid_parameter') ctx.merchantId = undefined;
    throw error;
  }
  if (!fresh) return notASuccess(ctx, 'replayed_salt'), (ctx.errorCode = REFUSAL_CODE.replayed), REPLAYED;
  return VALID;
}

/**
 * A URL refused after it was admitted: a failure for the throttle, and no longer the merchant's
 * (no reset of its count, no charge to its fair share, no merchant in the access log).
 */
function notASuccess(ctx: RequestContext, reason: AuthFailureReason): void {
  ctx.authFailure = reason;
  ctx.merchantId = undefined;
}

/** The four required values with what the signature covers, or a 400 naming every absent, empty or repeated value. */
function requiredValues(pairs: [string, string][], ctx: RequestContext, input: RouteInput, resolveBases: PublicBaseResolver): SignedQuery {
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
  if (seen === 4 && salt && cp && ts && hmac && cp.length <= MAX_ID_LENGTH && salt.length <= MAX_ID_LENGTH) return { salt, cp, ts, hmac, pairs, ctx, input, resolveBases, bases: undefined, keyIndex: -1 };
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
function signatureMatches(signed: SignedQuery, keys: string[]): boolean {
  const { ctx: { method }, input: { path }, pairs, hmac } = signed;
  // Only a hex digest of the right length can match; anything else is refused before comparing bytes.
  if (!HEX_SHA224.test(hmac)) return false;
  const received = hmac.toLowerCase();
  const bases = (signed.bases ??= signed.resolveBases(signed.ctx, signed.input.origin));
  const decoded = path.includes('%') ? decodePathSegment(path) : undefined;
  let matched = false;
  for (const base of bases) {
    if (keyMatching(signed, received, keys, canonicalMessage({ method, url: base + path, params: pairs }))) matched = true;
    if (decoded !== undefined && keyMatching(signed, received, keys, canonicalMessage({ method, url: base + decoded, params: pairs }))) matched = true;
  }
  return matched;
}

/**
 * `verify` of src/signing/index.ts, noting which key matched: every key is compared, in constant
 * time, so timing does not tell which.
 */
function keyMatching(signed: SignedQuery, received: string, keys: string[], text: string): boolean {
  let matched = false;
  for (let i = 0; i < keys.length; i++) if (constantTimeHexEqual(hmacSha224Hex(keys[i]!, text), received)) (matched = true), (signed.keyIndex = i);
  return matched;
}

/** The OpenAPI operation of `GET /validatesignature`, besides what the route table and every route share. */
export const validateSignatureDoc: OperationDoc = {
  tag: 'Signatures',
  description:
    'Checks an API key and request signing. The signature is the lower-case hex HMAC-SHA224, keyed with the API key, of ' +
    '`METHOD & pct(base_url) & pct(sorted pct(k)=pct(v) pairs)`, leaving out `hmac` and `gettoken` (docs/protocol.md#signing). ' +
    'Any other query parameters are allowed, and signed. The checks run in a fixed order and the first failing one decides: ' +
    'required parameters, merchant, disabled, signature, timestamp, salt.',
  readsQuery: true,
  parameters: [
    queryParameter('cp', 'The merchant id.', { type: 'string', minLength: 1, maxLength: MAX_ID_LENGTH }, true),
    queryParameter('ts', 'The time of signing in Unix seconds: up to 15 digits, with an optional leading `-`.', { type: 'string', minLength: 1, pattern: '^-?[0-9]{1,15}$' }, true),
    queryParameter('salt', 'A random string, new for every request; a salt is accepted once per merchant.', { type: 'string', minLength: 1, maxLength: MAX_ID_LENGTH }, true),
    queryParameter('hmac', 'The signature, hex (compared case-insensitively).', { type: 'string', minLength: 1 }, true),
    queryParameter('gettoken', 'Allowed and left out of the signature, like `hmac`.', { type: 'string' }, false),
  ],
  tooManyRequests: 'Also, with the memory storage: the merchant already holds half of the replay store (`MAX_SALTS`), until `Retry-After` seconds have passed.',
  badRequest:
    `A required parameter is absent, empty, repeated or (cp, salt) longer than ${MAX_ID_LENGTH} characters; the signature does not match; ` +
    `ts is not whole seconds or is outside the accepted window; the salt was already used; with the memory storage, ts is before the server started ` +
    `(salts seen before a restart are not known: docs/protocol.md#a-bounded-replay-store); or ${MALFORMED_QUERY}`,
  responses: {
    '200': response('The signature is valid: `{"status":"ok","is_valid":true}`.', schemaRef('SignatureValid')),
    '403': response(
      'The merchant is disabled: `{"status":"error","message":"This account is disabled.","is_valid":false}`; or the key that signed lacks the scope `signature` ' +
        '(message `This API key lacks the scope signature, which this endpoint needs.`) or may not be used from this address (message ' +
        '`This API key may not be used from this address.`, counted as a failed authentication).',
      schemaRef('SignatureError'),
    ),
    '404': response('No merchant has the id `cp`: `{"status":"error","is_valid":false}`, the only body without a message.', schemaRef('SignatureUnknownMerchant')),
  },
};
