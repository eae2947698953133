/**
 * Idempotency keys of the memory storage (docs/protocol.md#safe-retries): a bounded map in this
 * process, for one instance (behind a load balancer, the MySQL storage shares them).
 *
 * Bounded twice: at most `maxKeys` keys and `maxBytes` of stored answers (bodies and headers), one
 * merchant at most half of each (as the replay store of salts: one merchant cannot take the
 * others' keys). Expired keys go first, oldest first (the map keeps claim order, and every key
 * lives `ttlMs` from its claim, so the oldest is the first to expire): a sweep from the front costs
 * only what it removes. When the map is still full, a new key is refused, never an older one
 * evicted: an evicted key would let its retry run twice, the one thing a key promises against. A
 * merchant at its half is 429, a full map 503, both with `Retry-After` until its oldest key
 * expires. A completion may pass `maxBytes` by the answers of the requests running at once (each
 * at most `MAX_STORED_ANSWER_BYTES`): the cap is checked when a key is claimed.
 */
import { randomUUID } from 'node:crypto';
import { MerchantApiError, StorageUnavailableError } from '../../errors.js';
import type { ClaimOutcome, IdempotencyClaim, IdempotencyCompletion, IdempotencyRelease, StoredAnswer } from '../idempotency.js';

/** Bounds of the memory storage's idempotency keys (`MemoryStorageOptions.idempotency`). */
export interface MemoryIdempotencyOptions {
  /** Most keys held at once, running or answered (default 100,000). */
  maxKeys?: number;
  /** Most bytes of stored answers (UTF-16 units of bodies and headers, counted as 2 bytes each; default 64 MiB). */
  maxBytes?: number;
}

export const DEFAULT_MEMORY_IDEMPOTENCY = { maxKeys: 100_000, maxBytes: 64 * 1024 * 1024 } as const;

interface Entry {
  merchantId: string;
  fingerprint: string;
  expiresAt: number;
  /** While running: the claim's token and the end of its lease. */
  token: string | undefined;
  leaseUntil: number;
  answer: StoredAnswer | undefined;
  bytes: number;
}

interface MerchantKeys {
  /** This merchant's keys, oldest first (its first one is the next of its to expire). */
  entries: Map<string, Entry>;
  bytes: number;
}

export class MemoryIdempotencyKeys {
  readonly maxKeys: number;
  readonly maxBytes: number;
  /** Every key, `merchantId NUL key`, in claim order. */
  readonly #all = new Map<string, Entry>();
  readonly #merchants = new Map<string, MerchantKeys>();
  #bytes = 0;

  constructor(options: MemoryIdempotencyOptions = {}) {
    this.maxKeys = positive(options.maxKeys ?? DEFAULT_MEMORY_IDEMPOTENCY.maxKeys, 'maxKeys');
    this.maxBytes = positive(options.maxBytes ?? DEFAULT_MEMORY_IDEMPOTENCY.maxBytes, 'maxBytes');
  }

  /** Keys held now, expired ones not yet swept included (for monitoring and tests). */
  get size(): number {
    return this.#all.size;
  }

  /** Bytes of stored answers held now. */
  get bytes(): number {
    return this.#bytes;
  }

  claim({ merchantId, key, fingerprint, now, leaseMs, ttlMs }: IdempotencyClaim): ClaimOutcome {
    this.#sweep(now);
    const id = `${merchantId}\u0000${key}`;
    const held = this.#all.get(id);
    if (held !== undefined && held.expiresAt > now) {
      if (held.fingerprint !== fingerprint) return { state: 'mismatch' };
      if (held.answer !== undefined) return { state: 'completed', answer: held.answer };
      if (held.leaseUntil > now) return { state: 'running', retryAfterMs: held.leaseUntil - now };
      // Its worker died (or outran its lease): the key is this request's, under a new token.
      held.token = randomUUID();
      held.leaseUntil = now + leaseMs;
      return { state: 'claimed', token: held.token };
    }
    if (held !== undefined) this.#remove(id, held);
    this.#makeRoom(merchantId, now);
    const entry: Entry = { merchantId, fingerprint, expiresAt: now + ttlMs, token: randomUUID(), leaseUntil: now + leaseMs, answer: undefined, bytes: 0 };
    this.#all.set(id, entry);
    const mine = this.#merchants.get(merchantId) ?? { entries: new Map<string, Entry>(), bytes: 0 };
    mine.entries.set(id, entry);
    this.#merchants.set(merchantId, mine);
    return { state: 'claimed', token: entry.token! };
  }

  complete({ merchantId, key, token, answer }: IdempotencyCompletion): void {
    const entry = this.#all.get(`${merchantId}\u0000${key}`);
    if (entry === undefined || entry.token !== token) return;
    entry.token = undefined;
    entry.answer = { status: answer.status, headers: { ...answer.headers }, body: answer.body };
    entry.bytes = answerBytes(answer);
    this.#bytes += entry.bytes;
    this.#merchants.get(merchantId)!.bytes += entry.bytes;
  }

  release({ merchantId, key, token }: IdempotencyRelease): void {
    const id = `${merchantId}\u0000${key}`;
    const entry = this.#all.get(id);
    if (entry !== undefined && entry.token === token) this.#remove(id, entry);
  }

  clear(): void {
    this.#all.clear();
    this.#merchants.clear();
    this.#bytes = 0;
  }

  /** Refuses a new key where the map, or the merchant's half of it, is full of unexpired keys. */
  #makeRoom(merchantId: string, now: number): void {
    const mine = this.#merchants.get(merchantId);
    if (mine !== undefined && (mine.entries.size >= this.maxKeys / 2 || mine.bytes >= this.maxBytes / 2)) {
      const retryAfter = secondsUntil(first(mine.entries)!.expiresAt, now);
      throw new MerchantApiError(
        'too_many_requests',
        `This merchant holds ${mine.entries.size} idempotency keys (${mine.bytes} bytes of answers), the most one merchant may (half of the memory storage's ${this.maxKeys} keys, ${this.maxBytes} bytes); a new key is refused until its oldest expires in ${retryAfter} seconds.`,
        { retryAfter, policy: { name: 'idempotency-keys', quota: Math.floor(this.maxKeys / 2) } },
      );
    }
    if (this.#all.size >= this.maxKeys || this.#bytes >= this.maxBytes) {
      const retryAfter = secondsUntil(first(this.#all)!.expiresAt, now);
      throw new StorageUnavailableError(`The memory storage's idempotency keys are full (${this.#all.size} keys, ${this.#bytes} bytes of answers); the oldest expires in ${retryAfter} seconds.`, { retryAfter });
    }
  }

  /** Removes the expired keys at the front (claim order is expiry order for one `ttlMs`). */
  #sweep(now: number): void {
    for (const [id, entry] of this.#all) {
      if (entry.expiresAt > now) return;
      this.#remove(id, entry);
    }
  }

  #remove(id: string, entry: Entry): void {
    this.#all.delete(id);
    this.#bytes -= entry.bytes;
    const mine = this.#merchants.get(entry.merchantId);
    if (mine === undefined) return;
    mine.entries.delete(id);
    mine.bytes -= entry.bytes;
    if (mine.entries.size === 0) this.#merchants.delete(entry.merchantId);
  }
}

/** What a stored answer costs: its strings at two bytes a unit, and a little for the entry. */
function answerBytes(answer: StoredAnswer): number {
  let units = answer.body.length;
  for (const [name, value] of Object.entries(answer.headers)) units += name.length + value.length;
  return units * 2 + 64;
}

function first<V>(map: Map<string, V>): V | undefined {
  for (const value of map.values()) return value;
  return undefined;
}

function secondsUntil(at: number, now: number): number {
  return Math.max(1, Math.ceil((at - now) / 1000));
}

function positive(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 2) throw new RangeError(`MemoryStorage idempotency.${name} must be an integer of at least 2, got ${value}.`);
  return value;
}
