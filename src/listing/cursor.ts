/**
 * Page cursors (docs/protocol.md#users): opaque and tamper-proof, sealed with jose
 * as a compact JWE (`dir`, `A256GCM`), so a client can neither read nor
 * forge the keyset position. A cursor is bound to the merchant, to the
 * filters (`updated_since` included) and to the order of the listing it came from.
 */
import { CompactEncrypt, compactDecrypt } from 'jose';
import { MerchantApiError } from '../errors.js';
import type { UserFilter, UserOrder } from '../storage/contract.js';

/** What a cursor carries: where the next page starts and its size. */
export interface CursorPosition {
  /** The `shared_user_id` of the position. */
  after: string;
  /** In `order=date_joined`: the `date_joined` of the position. */
  afterJoined?: string;
  /** In `order=updated_at`: the `updated_at` of the position. */
  afterUpdated?: string;
  limit: number;
}

interface CursorPayload {
  v: 1;
  m: string;
  /**
   * active, joined_after, joined_before, and updated_since when given (cursors without it stay as
   * they were); a change feed's (`include_removed=true`) adds a fifth, `1`, after updated_since or null.
   */
  f: [boolean | null, string | null, string | null] | [boolean | null, string | null, string | null, string] | [boolean | null, string | null, string | null, string | null, 1];
  a: string;
  l: number;
  /** 1 in `order=date_joined`, 2 in `order=updated_at`; absent in the default order, so its cursors stay as they were. */
  o?: 1 | 2;
  /** The position's `date_joined`, with `o: 1`. */
  j?: string;
  /** The position's `updated_at`, with `o: 2`. */
  u?: string;
}

const ORDER_CODES = { shared_user_id: undefined, date_joined: 1, updated_at: 2 } as const;

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const INVALID = 'cursor is not a next_cursor this server issued for this listing.';

/** Seals and opens cursors under one secret; instances sharing it accept each other's cursors. */
export class CursorCodec {
  readonly #key: Promise<CryptoKey>;

  /**
   * @param secret any string or bytes, at least 32 bytes of entropy; hashed
   * to the AES-256 key. Absent: a random key, so cursors work only on the
   * instance and the process that issued them.
   */
  constructor(secret?: string | Uint8Array) {
    let raw: Promise<ArrayBuffer | Uint8Array>;
    if (secret === undefined) {
      raw = Promise.resolve(crypto.getRandomValues(new Uint8Array(32)));
    } else {
      const bytes = typeof secret === 'string' ? encoder.encode(secret) : new Uint8Array(secret);
      if (bytes.length < 32) throw new TypeError('cursorSecret must be at least 32 bytes long.');
      raw = crypto.subtle.digest('SHA-256', bytes);
    }
    // Imported once: jose would import raw key bytes again on every cursor.
    this.#key = raw.then((key) => crypto.subtle.importKey('raw', key as BufferSource, 'AES-GCM', false, ['encrypt', 'decrypt']));
  }

  /** `feed`: a change feed's cursor (`include_removed=true`), which only a change feed accepts. */
  async seal(merchantId: string, filter: UserFilter, position: CursorPosition, order: UserOrder = 'shared_user_id', feed = false): Promise<string> {
    const payload: CursorPayload = { v: 1, m: merchantId, f: fingerprint(filter, feed), a: position.after, l: position.limit };
    if (order === 'date_joined') Object.assign(payload, { o: 1, j: position.afterJoined });
    if (order === 'updated_at') Object.assign(payload, { o: 2, u: position.afterUpdated });
    return new CompactEncrypt(encoder.encode(JSON.stringify(payload)))
      .setProtectedHeader({ alg: 'dir', enc: 'A256GCM' })
      .encrypt(await this.#key);
  }

  /** Opens a cursor for this merchant, filter and order, or throws 400 `invalid_cursor`. */
  async open(token: string, merchantId: string, filter: UserFilter, order: UserOrder = 'shared_user_id', feed = false): Promise<CursorPosition> {
    let payload: CursorPayload;
    try {
      const { plaintext } = await compactDecrypt(token, await this.#key, {
        keyManagementAlgorithms: ['dir'],
        contentEncryptionAlgorithms: ['A256GCM'],
      });
      payload = JSON.parse(decoder.decode(plaintext)) as CursorPayload;
    } catch {
      throw invalid(INVALID);
    }
    if (payload.v !== 1 || payload.m !== merchantId) throw invalid(INVALID);
    const expected = fingerprint(filter, feed);
    if (!Array.isArray(payload.f) || payload.f.length !== expected.length || expected.some((value, i) => value !== payload.f[i])) {
      // The old message, unchanged, unless include_removed is what differs.
      if (feed || payload.f.length === 5) throw invalid('cursor was issued for other filters (active, joined_after, joined_before, updated_since, include_removed); send the same filters as the first page.');
      throw invalid('cursor was issued for other filters (active, joined_after, joined_before, updated_since); send the same filters as the first page.');
    }
    if (payload.o !== ORDER_CODES[order] || (payload.o === 1 && typeof payload.j !== 'string') || (payload.o === 2 && typeof payload.u !== 'string')) {
      throw invalid('cursor was issued for another order; send the same order as the first page.');
    }
    if (payload.o === 1) return { after: payload.a, afterJoined: payload.j, limit: payload.l };
    if (payload.o === 2) return { after: payload.a, afterUpdated: payload.u, limit: payload.l };
    return { after: payload.a, limit: payload.l };
  }
}

function fingerprint(filter: UserFilter, feed = false): CursorPayload['f'] {
  const base: [boolean | null, string | null, string | null] = [filter.active ?? null, filter.joinedAfter ?? null, filter.joinedBefore ?? null];
  if (feed) return [...base, filter.updatedSince ?? null, 1];
  return filter.updatedSince === undefined ? base : [...base, filter.updatedSince];
}

function invalid(message: string): MerchantApiError {
  return new MerchantApiError('invalid_cursor', message, { param: 'cursor' });
}
