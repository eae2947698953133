/**
 * `client.keys`: the merchant's own API keys (docs/protocol.md#managing-keys). Called as a
 * function it lists them, as it always did (`await client.keys()`); its methods list, add, rotate,
 * change and revoke. The listing is retried as every read is; a POST (`create`, `rotate`) carries an
 * `Idempotency-Key` (the caller's `idempotencyKey`, or a random UUID per call, the same on every
 * retry: ./idempotency-key.ts), so it is retried too and the server makes the key once, answering a
 * retry with the same secret (docs/protocol.md#safe-retries). A PATCH or DELETE is sent once and
 * never retried (a lost answer could be a change made: `list()` tells). The changes need a key with
 * the scope `keys:manage`; the listing, `users:read`.
 */
import { pct } from '../signing/index.js';
import { MerchantResponseError } from './errors.js';
import type { Transport } from './transport.js';
import { idempotencyKeyOf } from './idempotency-key.js';
import type { ChangeOptions, KeyInfo, RequestOptions } from './types.js';

/** A scope a key may have (docs/security.md#key-scopes-and-allowlists). */
export type KeyScope = KeyInfo['scopes'][number];

/** A key just added or rotated in: what `list()` answers of it, and the key itself, shown only this once. */
export interface CreatedKey extends KeyInfo {
  secret: string;
}

/** A rotation: the new key, with the old one's id and when it stops working. */
export interface RotatedKey extends CreatedKey {
  old_key_id: string;
  old_key_expires_at: string;
}

/** The end of a key: a time (`expiresAt`, a `Date` or RFC 3339 text) or a duration from now (`expiresIn`: `90d`). Neither: never. */
export interface KeyEnd {
  expiresAt?: Date | string;
  expiresIn?: string;
}

export interface CreateKeyOptions extends ChangeOptions, KeyEnd {
  /** What the key may do; each one the calling key has itself. */
  scopes: readonly KeyScope[];
  name?: string | null;
  /** Networks in CIDR notation the key may be used from; default: anywhere. */
  allowFrom?: readonly string[];
}

export interface RotateKeyOptions extends ChangeOptions, KeyEnd {
  /** How long the old key keeps working beside the new one: `24h`, at most `7d`; default: it stops at once. */
  expireOldIn?: string;
}

export interface UpdateKeyOptions extends RequestOptions {
  /** A new name; null: none. */
  name?: string | null;
  /** New networks; `[]`: anywhere again. */
  allowFrom?: readonly string[];
}

/** `client.keys`: a function listing the keys (as before), with the changes as methods. */
export interface KeysClient {
  (options?: RequestOptions): Promise<KeyInfo[]>;
  /** The merchant's working keys (not revoked, not past their end), oldest first; never a secret. Needs `users:read`. */
  list(options?: RequestOptions): Promise<KeyInfo[]>;
  /** Adds a random key; the answer holds it (`secret`), shown only now. */
  create(options: CreateKeyOptions): Promise<CreatedKey>;
  /** A new key with the same name, scopes and networks; the old one works on for `expireOldIn`. */
  rotate(keyId: string, options?: RotateKeyOptions): Promise<RotatedKey>;
  /** Changes a key's name or networks; the key after. */
  update(keyId: string, options: UpdateKeyOptions): Promise<KeyInfo>;
  /** Revokes a key now; `MerchantResponseError` 404 when the merchant has no working key with this id, 409 for its last key with `keys:manage`. */
  revoke(keyId: string, options?: RequestOptions): Promise<void>;
}

/** The records of `data` in the success envelope. */
function dataOf<T>(body: unknown): T[] {
  const answer = body as { status?: unknown; data?: unknown };
  if (typeof answer !== 'object' || answer === null || answer.status !== 'ok' || !Array.isArray(answer.data)) throw new Error('not {"status":"ok","data":[…]}');
  return answer.data as T[];
}

function firstOf<T>(body: unknown): T {
  const [first] = dataOf<T>(body);
  if (first === undefined) throw new Error('no record in "data"');
  return first;
}

function keyPath(baseUrl: string, keyId: string): string {
  if (typeof keyId !== 'string' || keyId === '' || keyId === '.' || keyId === '..') throw new TypeError('keys: the key id must be a non-empty string.');
  return `${baseUrl}/merchant/keys/${pct(keyId)}`;
}

function endOf(options: KeyEnd): Record<string, string> {
  if (options.expiresAt !== undefined && options.expiresIn !== undefined) throw new TypeError('keys: give expiresAt or expiresIn, not both.');
  if (options.expiresIn !== undefined) return { expires_in: options.expiresIn };
  if (options.expiresAt !== undefined) return { expires_at: options.expiresAt instanceof Date ? options.expiresAt.toISOString() : options.expiresAt };
  return {};
}

export function keysClient(baseUrl: string, transport: Transport, auth: () => Record<string, string>): KeysClient {
  const json = { 'content-type': 'application/json' };
  // A POST: one key per call, made before the first attempt, every retry sending the same; a PATCH: sent once.
  const change = <T>(method: string, url: string, body: object | undefined, options: ChangeOptions): Promise<T> => {
    const keyed = method === 'POST';
    const key: Record<string, string> = keyed ? { 'idempotency-key': idempotencyKeyOf(options.idempotencyKey) } : {};
    return transport.call({ method, url, body: body === undefined ? undefined : JSON.stringify(body), ...(keyed ? { idempotent: true } : { once: true }) }, () => url, { ...auth(), ...(body === undefined ? {} : json), ...key } as Record<string, string>, options.signal, firstOf<T>);
  };
  const list = (options: RequestOptions = {}): Promise<KeyInfo[]> => {
    const url = `${baseUrl}/merchant/keys`;
    return transport.call({ method: 'GET', url }, () => url, auth(), options.signal, (body) => dataOf<KeyInfo>(body));
  };
  return Object.assign((options?: RequestOptions) => list(options), {
    list,
    create: (options: CreateKeyOptions) => {
      if (!options || !Array.isArray(options.scopes)) throw new TypeError('keys.create(): scopes must be an array, such as ["users:read"].');
      const body = { ...(options.name !== undefined && { name: options.name }), scopes: options.scopes, ...(options.allowFrom !== undefined && { allow_from: options.allowFrom }), ...endOf(options) };
      return change<CreatedKey>('POST', `${baseUrl}/merchant/keys`, body, options);
    },
    rotate: (keyId: string, options: RotateKeyOptions = {}) => change<RotatedKey>('POST', `${keyPath(baseUrl, keyId)}/rotate`, { ...(options.expireOldIn !== undefined && { expire_old_in: options.expireOldIn }), ...endOf(options) }, options),
    update: (keyId: string, options: UpdateKeyOptions) => {
      const body = { ...(options?.name !== undefined && { name: options.name }), ...(options?.allowFrom !== undefined && { allow_from: options.allowFrom }) };
      if (Object.keys(body).length === 0) throw new TypeError('keys.update(): give name, allowFrom or both.');
      return change<KeyInfo>('PATCH', keyPath(baseUrl, keyId), body, options);
    },
    revoke: async (keyId: string, options: RequestOptions = {}) => {
      const url = keyPath(baseUrl, keyId);
      await transport.send({ method: 'DELETE', url, once: true }, () => url, auth(), options.signal, async (response) => {
        await response.body?.cancel().catch(() => undefined);
        if (response.status !== 204) throw new MerchantResponseError({ status: response.status, code: 'invalid_response', message: `${url} answered ${response.status}, not 204.`, headers: response.headers }, { method: 'DELETE', url });
      });
    },
  });
}
