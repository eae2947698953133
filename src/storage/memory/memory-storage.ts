/**
 * The in-memory storage, the embedded default (docs/protocol.md#storage-and-secrets). Loadable from
 * the seed format; salts expire so memory stays bounded however long it runs.
 */
import type { Merchant, SaltRecord, Storage, UserPageQuery, UserRecord, UserRecordPage } from '../contract.js';
import { merchantIdProblem, USER_RECORD_KEYS } from '../contract.js';
import { StorageUnavailableError } from '../../errors.js';
import { parseSeed, type Seed, type SeedMerchant } from '../seed/seed.js';
import { MemoryUserIndex } from './users.js';
import { SaltStore, type SaltStoreOptions } from './salts.js';

/** A seed whose users are already in a `MemoryUserIndex` (the streaming loader builds one). */
export interface IndexedSeed {
  merchants: SeedMerchant[];
  users: MemoryUserIndex;
}

/**
 * Storage held in process memory. Every instance is separate: behind a load
 * balancer use the MySQL storage, whose salts all instances share.
 *
 * @example
 * const storage = createMemoryStorage({ seed: JSON.parse(await readFile('my-seed.json', 'utf8')) }); // or createDemoStorage()
 */
export class MemoryStorage implements Storage {
  readonly #merchants = new Map<string, SeedMerchant>();
  // Users with the sorted lists every listing reads (src/storage/memory/users.ts).
  readonly #users: MemoryUserIndex;
  // Salts as keyed fingerprints in typed arrays, with a hard cap (src/storage/memory/salts.ts).
  readonly #salts: SaltStore;
  #closed = false;

  constructor(seed: Seed | IndexedSeed = { merchants: [], users: [] }, options: MemoryStorageOptions = {}) {
    this.#salts = new SaltStore(options);
    for (const merchant of seed.merchants) this.putMerchant(merchant);
    this.#users = seed.users instanceof MemoryUserIndex ? seed.users : MemoryUserIndex.fromSeedUsers(seed.users);
  }

  /**
   * Adds or replaces a merchant (keys are its active keys). Throws a `TypeError` naming the rule
   * for an id no merchant may have (`merchantIdProblem`, as the seed, `merchant add` and the MySQL
   * import check it): a merchant with a colon in its id could never authenticate with HTTP Basic.
   */
  putMerchant(merchant: SeedMerchant): void {
    const problem = merchantIdProblem(merchant.id);
    if (problem !== undefined) throw new TypeError(`MemoryStorage.putMerchant: merchant id ${JSON.stringify(merchant.id)}: ${problem}.`);
    this.#merchants.set(merchant.id, { id: merchant.id, status: merchant.status, keys: [...merchant.keys] });
  }

  /**
   * Adds or replaces a user shared with `merchantId`, stamping its `updated_at` with now; a record
   * equal to the one held changes nothing, `updated_at` included (docs/protocol.md#changed-since).
   */
  putUser(merchantId: string, record: UserRecord): void {
    this.#users.put(merchantId, pickRecord(record));
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

  async listUsers(query: UserPageQuery): Promise<UserRecordPage> {
    this.#assertOpen();
    return this.#users.page(query);
  }

  async getUser(merchantId: string, sharedUserId: string): Promise<UserRecord | undefined> {
    this.#assertOpen();
    return this.#users.get(merchantId, sharedUserId);
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

  /** The most salts held at once (`maxSalts`), for monitoring how full the replay store is. */
  get maxSalts(): number {
    return this.#salts.maxSalts;
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
