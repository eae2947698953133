/**
 * In-process cache of merchants with their decrypted keys, so a signed
 * request costs no key query and no decryption. The price is staleness: a
 * revoked key, a new key or a status change reaches an instance only when
 * its entry expires, so `ttlMs` is how long a revoked key may still work.
 * Unknown ids are cached as absent for `ttlMs` too, in a bounded map of their
 * own, for when the storage keeps no list of every id (merchant-directory.ts):
 * asking again for one then costs no query. So a merchant added by the CLI
 * may take up to `ttlMs` to work on an instance that was just asked for it.
 * A key added elsewhere works at once: a presented key that matches none of the
 * cached ones asks for `refresh`, which reads the merchant again, at most once
 * per merchant per `REFRESH_INTERVAL_MS`, so wrong keys cannot flood the
 * database. A revoked key is not noticed that way: it still matches.
 */
import type { Merchant } from '../contract.js';

interface Entry {
  merchant: Merchant;
  expiresAt: number;
}

/** Bounds memory (each map) whatever merchant ids callers make up. */
const MAX_ENTRIES = 10_000;
/** At most one re-read of a merchant per this long, whatever the number of wrong keys. */
export const REFRESH_INTERVAL_MS = 1000;

/** Merchants by id for `ttlMs`, with one load at a time per id; callers get copies. */
export class MerchantCache {
  readonly #entries = new Map<string, Entry>();
  /** Ids known to be absent, with when that stops being trusted. */
  readonly #absent = new Map<string, number>();
  readonly #loading = new Map<string, Promise<Merchant | undefined>>();
  /** When each merchant was last re-read on request (`refresh`). */
  readonly #refreshed = new Map<string, number>();

  constructor(
    readonly ttlMs: number,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** The cached merchant, or the one `load` returns (one load per id at a time). */
  async get(id: string, load: () => Promise<Merchant | undefined>): Promise<Merchant | undefined> {
    if (this.ttlMs <= 0) return load();
    const entry = this.#entries.get(id);
    if (entry && entry.expiresAt > this.clock()) return copy(entry.merchant);
    const absentUntil = this.#absent.get(id);
    if (absentUntil !== undefined && absentUntil > this.clock()) return undefined;
    const pending = this.#loading.get(id);
    if (pending) return pending.then((merchant) => merchant && copy(merchant));
    const loading = load().then((merchant) => {
      if (merchant) {
        this.#absent.delete(id);
        this.#store(id, merchant);
      } else {
        this.#entries.delete(id);
        remember(this.#absent, id, this.clock() + this.ttlMs);
      }
      return merchant;
    });
    this.#loading.set(id, loading);
    try {
      const merchant = await loading;
      return merchant && copy(merchant);
    } finally {
      this.#loading.delete(id);
    }
  }

  /** The merchant while its entry is fresh, as `get` would answer it, without a promise; else undefined (`get` then reads). */
  peek(id: string): Merchant | undefined {
    if (this.ttlMs <= 0) return undefined;
    const entry = this.#entries.get(id);
    return entry !== undefined && entry.expiresAt > this.clock() ? copy(entry.merchant) : undefined;
  }

  /**
   * The merchant read again, unless it was re-read less than `REFRESH_INTERVAL_MS` ago (then
   * what `get` answers). A load already under way is joined, not repeated.
   */
  async refresh(id: string, load: () => Promise<Merchant | undefined>): Promise<Merchant | undefined> {
    let stale: Entry | undefined;
    if (this.ttlMs > 0) {
      const now = this.clock();
      const last = this.#refreshed.get(id);
      if (last === undefined || now - last >= REFRESH_INTERVAL_MS) {
        remember(this.#refreshed, id, now);
        stale = this.#entries.get(id);
        this.#entries.delete(id);
        this.#absent.delete(id);
      }
    }
    try {
      return await this.get(id, load);
    } catch (error) {
      // The database failing must not turn a wrong key into a 503: answer from the copy held.
      if (stale === undefined || stale.expiresAt <= this.clock()) throw error;
      if (!this.#entries.has(id)) remember(this.#entries, id, stale);
      return copy(stale.merchant);
    }
  }

  /** Forgets one merchant (after a change made through this process) or all. */
  invalidate(id?: string): void {
    if (id === undefined) {
      this.#entries.clear();
      this.#absent.clear();
    } else {
      this.#entries.delete(id);
      this.#absent.delete(id);
    }
  }

  /** Entries held, for tests. */
  get size(): { merchants: number; absent: number } {
    return { merchants: this.#entries.size, absent: this.#absent.size };
  }

  #store(id: string, merchant: Merchant): void {
    remember(this.#entries, id, { merchant: copy(merchant), expiresAt: this.clock() + this.ttlMs });
  }
}

/** Sets `id` as the newest entry; Map iterates in insertion order, so beyond the bound the oldest goes. */
function remember<V>(map: Map<string, V>, id: string, value: V): void {
  map.delete(id);
  map.set(id, value);
  if (map.size > MAX_ENTRIES) map.delete(map.keys().next().value!);
}

/** A copy whose keys the caller may change; `keyIds` and `keyLimits` are never changed, so shared. */
function copy(merchant: Merchant): Merchant {
  const copied: Merchant = { id: merchant.id, status: merchant.status, keys: [...merchant.keys] };
  if (merchant.keyIds !== undefined) copied.keyIds = merchant.keyIds;
  if (merchant.keyLimits !== undefined) copied.keyLimits = merchant.keyLimits;
  return copied;
}
