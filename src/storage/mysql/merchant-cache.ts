/**
 * In-process cache of merchants with their decrypted keys, so a signed
 * request costs no key query and no decryption. The price is staleness: a
 * revoked key, a new key or a status change reaches an instance only when
 * its entry expires, so `ttlMs` is how long a revoked key may still work.
 * Unknown merchants are not cached: a merchant added by the CLI works at once.
 */
import type { Merchant } from '../../storage.js';

interface Entry {
  merchant: Merchant;
  expiresAt: number;
}

/** Bounds memory even if a caller makes up merchant ids that exist. */
const MAX_ENTRIES = 10_000;

/** Merchants by id for `ttlMs`, with one load at a time per id; callers get copies. */
export class MerchantCache {
  readonly #entries = new Map<string, Entry>();
  readonly #loading = new Map<string, Promise<Merchant | undefined>>();

  constructor(
    readonly ttlMs: number,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** The cached merchant, or the one `load` returns (one load per id at a time). */
  async get(id: string, load: () => Promise<Merchant | undefined>): Promise<Merchant | undefined> {
    if (this.ttlMs <= 0) return load();
    const entry = this.#entries.get(id);
    if (entry && entry.expiresAt > this.clock()) return copy(entry.merchant);
    const pending = this.#loading.get(id);
    if (pending) return pending.then((merchant) => merchant && copy(merchant));
    const loading = load().then((merchant) => {
      if (merchant) this.#store(id, merchant);
      else this.#entries.delete(id);
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

  /** Forgets one merchant (after a change made through this process) or all. */
  invalidate(id?: string): void {
    if (id === undefined) this.#entries.clear();
    else this.#entries.delete(id);
  }

  #store(id: string, merchant: Merchant): void {
    if (this.#entries.size >= MAX_ENTRIES && !this.#entries.has(id)) {
      // Map iterates in insertion order: drop the oldest entry.
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
    this.#entries.delete(id);
    this.#entries.set(id, { merchant: copy(merchant), expiresAt: this.clock() + this.ttlMs });
  }
}

function copy(merchant: Merchant): Merchant {
  return { id: merchant.id, status: merchant.status, keys: [...merchant.keys] };
}
