/**
 * The in-memory storage, the embedded default (docs/protocol.md#storage-and-secrets). Loadable from
 * the seed format; salts expire so memory stays bounded however long it runs.
 */
import type { Merchant, SaltRecord, Storage, UserPageQuery, UserRecord } from '../storage.js';
import { USER_RECORD_KEYS } from '../storage.js';
import { StorageUnavailableError } from '../errors.js';
import { compareCodePoints } from '../order.js';
import { parseSeed, type Seed, type SeedMerchant } from './seed.js';
import { SaltStore, type SaltStoreOptions } from './memory-salts.js';

export { parseSeed, SeedError, type Seed, type SeedMerchant, type SeedUser } from './seed.js';

/** Users shared with one merchant, sorted by `shared_user_id` in code-point order. */
interface MerchantUsers {
  ids: string[];
  records: Map<string, UserRecord>;
}

/**
 * Storage held in process memory. Every instance is separate: behind a load
 * balancer use the MySQL storage, whose salts all instances share.
 *
 * @example
 * const storage = createMemoryStorage({ seed: JSON.parse(await readFile('examples/seed.json', 'utf8')) });
 */
export class MemoryStorage implements Storage {
  readonly #merchants = new Map<string, SeedMerchant>();
  readonly #users = new Map<string, MerchantUsers>();
  // Salts as keyed fingerprints in typed arrays, with a hard cap (src/storage/memory-salts.ts).
  readonly #salts: SaltStore;
  #closed = false;

  constructor(seed: Seed = { merchants: [], users: [] }, options: MemoryStorageOptions = {}) {
    this.#salts = new SaltStore(options);
    for (const merchant of seed.merchants) this.putMerchant(merchant);
    for (const { merchant_id, ...record } of seed.users) this.#usersOf(merchant_id).records.set(record.shared_user_id, record);
    for (const users of this.#users.values()) users.ids = [...users.records.keys()].sort(compareCodePoints);
  }

  /** Adds or replaces a merchant (keys are its active keys). */
  putMerchant(merchant: SeedMerchant): void {
    this.#merchants.set(merchant.id, { id: merchant.id, status: merchant.status, keys: [...merchant.keys] });
  }

  /** Adds or replaces a user shared with `merchantId`. */
  putUser(merchantId: string, record: UserRecord): void {
    const users = this.#usersOf(merchantId);
    const copy = pickRecord(record);
    if (!users.records.has(copy.shared_user_id)) {
      users.ids.splice(lowerBound(users.ids, copy.shared_user_id), 0, copy.shared_user_id);
    }
    users.records.set(copy.shared_user_id, copy);
  }

  async getMerchant(id: string): Promise<Merchant | undefined> {
    this.#assertOpen();
    const merchant = this.#merchants.get(id);
    return merchant && { id: merchant.id, status: merchant.status, keys: [...merchant.keys] };
  }

  /**
   * Records a salt (see `Storage.recordSalt`). Refuses, by throwing the answer: a `ts` from before
   * this storage was created (400), a merchant holding half of `maxSalts` (429), a full store (503).
   */
  async recordSalt({ merchantId, salt, expiresAt, now, ts }: SaltRecord): Promise<boolean> {
    this.#assertOpen();
    return this.#salts.record(merchantId, salt, expiresAt, now, ts);
  }

  async listUsers({ merchantId, filter, after, limit }: UserPageQuery): Promise<UserRecord[]> {
    this.#assertOpen();
    const users = this.#users.get(merchantId);
    if (!users) return [];
    const page: UserRecord[] = [];
    let i = after === undefined ? 0 : upperBound(users.ids, after);
    for (; i < users.ids.length && page.length < limit; i++) {
      const record = users.records.get(users.ids[i]!)!;
      if (filter.active !== undefined && (record.deactivated_at === null) !== filter.active) continue;
      if (filter.joinedAfter !== undefined && !(record.date_joined > filter.joinedAfter)) continue;
      if (filter.joinedBefore !== undefined && !(record.date_joined < filter.joinedBefore)) continue;
      page.push(record);
    }
    return page;
  }

  async getUser(merchantId: string, sharedUserId: string): Promise<UserRecord | undefined> {
    this.#assertOpen();
    return this.#users.get(merchantId)?.records.get(sharedUserId);
  }

  async ping(): Promise<void> {
    this.#assertOpen();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#salts.clear();
  }

  /** How many unexpired salts are held now (for monitoring and tests). */
  get saltCount(): number {
    return this.#salts.size;
  }

  #usersOf(merchantId: string): MerchantUsers {
    let users = this.#users.get(merchantId);
    if (!users) this.#users.set(merchantId, (users = { ids: [], records: new Map() }));
    return users;
  }

  #assertOpen(): void {
    if (this.#closed) throw new StorageUnavailableError('The memory storage is closed.');
  }
}

/**
 * Options of the memory storage's replay store (docs/configuration.md#memory): `maxSalts`
 * (default 1,000,000; `MAX_SALTS`) and `startedAt` (default: when the storage is created).
 */
export type MemoryStorageOptions = SaltStoreOptions;

/** Creates a memory storage, validating `seed` (the seed document) first. */
export function createMemoryStorage(options: { seed?: unknown } & MemoryStorageOptions = {}): MemoryStorage {
  const { seed, ...salts } = options;
  return new MemoryStorage(seed === undefined ? undefined : parseSeed(seed), salts);
}

function pickRecord(record: UserRecord): UserRecord {
  const copy = {} as Record<string, string | null>;
  for (const key of USER_RECORD_KEYS) copy[key] = record[key];
  return copy as unknown as UserRecord;
}

function lowerBound(ids: string[], id: string): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareCodePoints(ids[mid]!, id) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function upperBound(ids: string[], id: string): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareCodePoints(ids[mid]!, id) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
