/**
 * The in-memory storage, the embedded default (docs/protocol.md#storage-and-secrets). Loadable from
 * the seed format; salts expire so memory stays bounded however long it runs.
 */
import type { Merchant, SaltRecord, Storage, UserPageQuery, UserRecord } from '../storage.js';
import { USER_RECORD_KEYS } from '../storage.js';
import { StorageUnavailableError } from '../errors.js';
import { compareCodePoints } from '../order.js';
import { parseSeed, type Seed, type SeedMerchant } from './seed.js';

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
  // merchant id -> salt -> expiry second; per merchant, so no key is built per salt.
  readonly #salts = new Map<string, Map<string, number>>();
  // Salts bucketed by expiry second, so expiring them never scans every salt.
  // Parallel arrays rather than an object per salt: less garbage at high rates.
  readonly #saltsByExpiry = new Map<number, { merchants: Map<string, number>[]; salts: string[] }>();
  #saltCount = 0;
  #lastSweep = 0;
  #closed = false;

  constructor(seed: Seed = { merchants: [], users: [] }) {
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

  async recordSalt({ merchantId, salt, expiresAt, now }: SaltRecord): Promise<boolean> {
    this.#assertOpen();
    this.#sweep(now);
    let merchantSalts = this.#salts.get(merchantId);
    if (!merchantSalts) this.#salts.set(merchantId, (merchantSalts = new Map()));
    const existing = merchantSalts.get(salt);
    if (existing !== undefined && existing >= now) return false;
    if (existing === undefined) this.#saltCount++;
    merchantSalts.set(salt, expiresAt);
    let bucket = this.#saltsByExpiry.get(expiresAt);
    if (!bucket) this.#saltsByExpiry.set(expiresAt, (bucket = { merchants: [], salts: [] }));
    bucket.merchants.push(merchantSalts);
    bucket.salts.push(salt);
    return true;
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
    this.#saltsByExpiry.clear();
    this.#saltCount = 0;
  }

  /** How many salts are held now (for monitoring and tests). */
  get saltCount(): number {
    return this.#saltCount;
  }

  #usersOf(merchantId: string): MerchantUsers {
    let users = this.#users.get(merchantId);
    if (!users) this.#users.set(merchantId, (users = { ids: [], records: new Map() }));
    return users;
  }

  #sweep(now: number): void {
    if (now <= this.#lastSweep) return;
    this.#lastSweep = now;
    for (const [expiresAt, { merchants, salts }] of this.#saltsByExpiry) {
      if (expiresAt >= now) continue;
      for (let i = 0; i < salts.length; i++) {
        // A salt re-recorded after expiring sits in a later bucket too; only its own bucket removes it.
        if (merchants[i]!.get(salts[i]!) === expiresAt) {
          merchants[i]!.delete(salts[i]!);
          this.#saltCount--;
        }
      }
      this.#saltsByExpiry.delete(expiresAt);
    }
  }

  #assertOpen(): void {
    if (this.#closed) throw new StorageUnavailableError('The memory storage is closed.');
  }
}

/** Creates a memory storage, validating `seed` (the seed document) first. */
export function createMemoryStorage(options: { seed?: unknown } = {}): MemoryStorage {
  return new MemoryStorage(options.seed === undefined ? undefined : parseSeed(options.seed));
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
