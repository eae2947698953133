/**
 * `/merchant/keys` changes (docs/protocol.md#managing-keys): the authenticated merchant adds a key
 * (its secret answered once), rotates one (a new key with the old one's name, scopes and networks;
 * the old one working on for at most `MAX_KEY_OVERLAP_MS`), changes a key's name or networks, and
 * revokes one. Every one needs the scope `keys:manage` (the route table). A key gives only scopes
 * it has itself (a new key's, a rotated key's: 403 `insufficient_scope` naming the scope), so a
 * key cannot make a stronger one. The request is checked here with the rules the CLI's key options
 * use (`keyNameProblem`, `parseScopes`, `parseAllowFrom` of src/storage/key-limits.ts); the rules
 * that read the merchant's other keys (at most `MAX_ACTIVE_KEYS`, never revoking the last key with
 * `keys:manage`) are the storage's, kept atomically. Another merchant's key id is 404, as one that
 * does not exist. Every change is logged (never a secret) and audited as done by the merchant and
 * the key that made it (`merchantChange`). A storage without the operations answers 501.
 */
import { MerchantApiError } from '../errors.js';
import type { RequestContext } from '../http/context.js';
import { readJsonBody } from '../http/json-body.js';
import { reply, type Reply } from '../http/responses.js';
import type { CreatedMerchantKey } from '../storage/contract.js';
import { canonicalAtMs, cannotGive, MAX_KEY_OVERLAP_MS } from '../storage/key-changes.js';
import { KEY_SCOPES, keyModeProblem, keyNameProblem, MAX_ALLOW_FROM, parseAllowFrom, parseScopes, type KeyMode, type KeyScope } from '../storage/key-limits.js';
import { TEST_MODE_DISABLED } from '../testmode/mode-check.js';
import { canonicalTimestamp } from '../storage/timestamps.js';
import { parseDurationMs } from '../webhooks/retry-schedule.js';
import { keyJson } from './keys.js';
import type { HandlerDeps, RouteInput } from './route.js';
import { merchantChange, noQuery, onlyMembers } from './webhooks.js';

/** The longest `expires_in` (as the CLI's `--expires-in`): 366 days. */
export const MAX_EXPIRES_IN_MS = 366 * 86_400_000;

const KEY_NOT_FOUND = new MerchantApiError('not_found', 'This merchant has no working key with this id.');

function invalid(param: string, message: string): MerchantApiError {
  return new MerchantApiError('invalid_parameter', message, { param });
}

/** The scopes of the key that authenticated the request: what it may give. */
function callerScopes(ctx: RequestContext, input: RouteInput): readonly KeyScope[] {
  return input.merchant!.keyLimits?.[ctx.keyIndex]?.scopes ?? KEY_SCOPES;
}

/** A key id from the path: longer than any key id is none (404), before the storage is asked. */
function keyIdOf(input: RouteInput): string {
  const keyId = input.params.key_id!;
  if (keyId.length === 0 || keyId.length > 128) throw KEY_NOT_FOUND;
  return keyId;
}

/** `name`: a string of 1-100 characters without a control character, or null (none). */
function nameOf(value: unknown): string | null {
  if (value === null) return null;
  const problem = typeof value === 'string' ? keyNameProblem(value) : 'must be a string or null';
  if (problem !== undefined) throw invalid('name', `name ${problem}.`);
  return value as string;
}

/** `allow_from`: an array of networks in CIDR notation, canonical after; `empty` says what an empty list is. */
function allowFromOf(value: unknown, emptyAllowed: boolean): string[] {
  if (!Array.isArray(value) || value.length > MAX_ALLOW_FROM * 2 || value.some((entry) => typeof entry !== 'string')) {
    throw invalid('allow_from', `allow_from must be an array of at most ${MAX_ALLOW_FROM} networks in CIDR notation, such as ["203.0.113.0/24"].`);
  }
  const parsed = parseAllowFrom(value as string[]);
  if ('problems' in parsed) throw invalid('allow_from', `allow_from: ${parsed.problems.join('; ')}.`);
  if (parsed.networks.length === 0 && !emptyAllowed) throw invalid('allow_from', 'allow_from needs at least one network (CIDR), such as 203.0.113.0/24; leave it out for a key usable from anywhere.');
  return parsed.networks;
}

/** The end a body asks for (`expires_at` or `expires_in`), canonical; null when it asks for none. */
function endOf(body: Record<string, unknown>, now: number): string | null {
  if (body.expires_at !== undefined && body.expires_in !== undefined) throw new MerchantApiError('malformed_request', 'Give expires_at or expires_in, not both.');
  if (body.expires_in !== undefined) {
    const ms = typeof body.expires_in === 'string' ? parseDurationMs(body.expires_in) : undefined;
    if (ms === undefined || ms < 1000 || ms > MAX_EXPIRES_IN_MS) throw invalid('expires_in', 'expires_in must be a duration such as 1h, 30d or 90d, from 1s to 366d.');
    return canonicalAtMs(now + ms);
  }
  if (body.expires_at !== undefined && body.expires_at !== null) {
    const end = typeof body.expires_at === 'string' ? canonicalTimestamp(body.expires_at) : undefined;
    if (end === undefined) throw invalid('expires_at', 'expires_at must be an RFC 3339 time, such as 2027-01-31T00:00:00Z.');
    if (Date.parse(end) <= now) throw invalid('expires_at', 'expires_at must be later than now: a key that has ended cannot be made.');
    return end;
  }
  return null;
}

/** The answer of a change: the envelope holding one item. */
function one(status: number, item: string): Reply {
  return reply(status, `{"status":"ok","data":[${item}],"errors":[]}`);
}

/** A new key as answered: the fields `GET /merchant/keys` lists, then its secret (shown only now). */
function createdJson(key: CreatedMerchantKey, extra: Record<string, unknown> = {}): string {
  return `${keyJson(key).slice(0, -1)},${JSON.stringify({ secret: key.secret, ...extra }).slice(1)}`;
}

/** The new key's mode: live unless `"mode": "test"` (docs/test-mode.md); a test key only where test mode is on. */
function modeOf(value: unknown, deps: HandlerDeps): KeyMode {
  if (value === undefined) return 'live';
  const problem = typeof value === 'string' ? keyModeProblem(value) : 'mode must be a string';
  if (problem !== undefined) throw invalid('mode', `mode: ${problem}.`);
  if (value === 'test' && !deps.testMode.enabled) throw TEST_MODE_DISABLED;
  return value as KeyMode;
}

/** `POST /merchant/keys` with `{"name", "scopes", "allow_from", "expires_at" | "expires_in", "mode"}`: 201, the key with its secret. */
export async function createKey(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  noQuery(input.search);
  const body = await readJsonBody(ctx.request);
  onlyMembers(body, ['name', 'scopes', 'allow_from', 'expires_at', 'expires_in', 'mode']);
  const name = body.name === undefined ? null : nameOf(body.name);
  const mode = modeOf(body.mode, deps);
  if (!Array.isArray(body.scopes) || body.scopes.length > KEY_SCOPES.length * 4 || body.scopes.some((scope) => typeof scope !== 'string')) {
    throw invalid('scopes', `scopes must be a non-empty array of ${KEY_SCOPES.join(', ')}.`);
  }
  const scopes = parseScopes(body.scopes as string[]);
  if (typeof scopes === 'string') throw invalid('scopes', `scopes: ${scopes}.`);
  const mayGive = callerScopes(ctx, input);
  const lacking = scopes.find((scope) => !mayGive.includes(scope));
  if (lacking !== undefined) throw cannotGive(lacking);
  const allowFrom = body.allow_from === undefined ? [] : allowFromOf(body.allow_from, false);
  const expiresAt = endOf(body, deps.now());
  const merchantId = input.merchant!.id;
  const created = await deps.storage(ctx).createKey({ merchantId, name, scopes, allowFrom, expiresAt, mode, ...merchantChange(ctx, input) });
  deps.logger.info({ event: 'key_added', request_id: ctx.requestId, merchant_id: merchantId, key_id: created.key_id, scopes: created.scopes }, 'key added');
  return one(201, createdJson(created));
}

/**
 * `POST /merchant/keys/{key_id}/rotate` with `{"expire_old_in": "24h"}` (optional; default: the old
 * key stops now) and the new key's `expires_at` or `expires_in` (default: none): 200, the new key
 * with its secret, and when the old one stops.
 */
export async function rotateKey(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  noQuery(input.search);
  const body = await readJsonBody(ctx.request, undefined, { optional: true });
  onlyMembers(body, ['expire_old_in', 'expires_at', 'expires_in']);
  let overlapMs = 0;
  if (body.expire_old_in !== undefined) {
    const ms = typeof body.expire_old_in === 'string' ? parseDurationMs(body.expire_old_in) : undefined;
    if (ms === undefined || ms > MAX_KEY_OVERLAP_MS) throw invalid('expire_old_in', `expire_old_in must be a duration such as 0s, 15m, 24h or 7d, at most ${MAX_KEY_OVERLAP_MS / 86_400_000}d.`);
    overlapMs = ms;
  }
  const now = deps.now();
  const expiresAt = endOf(body, now);
  const merchantId = input.merchant!.id;
  const rotatedKeyId = keyIdOf(input);
  const rotated = await deps.storage(ctx).rotateKey({
    merchantId,
    rotatedKeyId,
    oldExpiresAt: canonicalAtMs(now + overlapMs),
    now: canonicalAtMs(now),
    expiresAt,
    mayGive: callerScopes(ctx, input),
    ...merchantChange(ctx, input),
  });
  if (rotated === undefined) throw KEY_NOT_FOUND;
  deps.logger.info({ event: 'key_rotated', request_id: ctx.requestId, merchant_id: merchantId, key_id: rotated.key_id, old_key_id: rotated.old_key_id, old_expires_at: rotated.old_key_expires_at }, 'key rotated');
  return one(200, createdJson(rotated, { old_key_id: rotated.old_key_id, old_key_expires_at: rotated.old_key_expires_at }));
}

/** `PATCH /merchant/keys/{key_id}` with `{"name", "allow_from"}` (either; `[]`: anywhere again): 200, the key as listed. */
export async function updateKey(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  noQuery(input.search);
  const body = await readJsonBody(ctx.request);
  onlyMembers(body, ['name', 'allow_from']);
  if (body.name === undefined && body.allow_from === undefined) throw new MerchantApiError('malformed_request', 'The body changes nothing: give name, allow_from or both.');
  const patch = {
    ...(body.name !== undefined && { name: nameOf(body.name) }),
    ...(body.allow_from !== undefined && { allowFrom: allowFromOf(body.allow_from, true) }),
  };
  const merchantId = input.merchant!.id;
  const keyId = keyIdOf(input);
  const updated = await deps.storage(ctx).updateKey(merchantId, keyId, patch, merchantChange(ctx, input));
  if (updated === undefined) throw KEY_NOT_FOUND;
  deps.logger.info({ event: 'key_updated', request_id: ctx.requestId, merchant_id: merchantId, key_id: keyId }, 'key updated');
  return one(200, keyJson(updated));
}

/**
 * `DELETE /merchant/keys/{key_id}`: 204, the key revoked now. The last working key with
 * `keys:manage` is 409: a merchant never locks itself out of managing its keys through the API.
 * A key may revoke itself while another key with `keys:manage` remains (it is the caller's choice
 * to stop using it; its next request is 401).
 */
export async function revokeKey(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  noQuery(input.search);
  const merchantId = input.merchant!.id;
  const keyId = keyIdOf(input);
  if (!(await deps.storage(ctx).revokeKey(merchantId, keyId, merchantChange(ctx, input)))) throw KEY_NOT_FOUND;
  deps.logger.info({ event: 'key_revoked', request_id: ctx.requestId, merchant_id: merchantId, key_id: keyId }, 'key revoked');
  return reply(204, '');
}
