/**
 * Reads from a MySQL replica, writes to the primary
 * (docs/mysql.md#read-replicas): `withReplicaReads(primary, options)` is a
 * storage whose user reads (listings, single users and so the streamed
 * export) go to a replica while it is close enough behind, and everything
 * else to the primary: merchants and their keys, so that a revoked key or a
 * disabled merchant is never served stale by the replica's lag, salts, the
 * throttle, `ping` and every write.
 *
 * - **Lag.** The replica's lag is read at most every `checkIntervalMs`
 *   while reads happen, in the background (a read never waits for it). Over
 *   `maxLagSeconds`, or unreadable, reads go to the primary until a reading
 *   is good again. Stopped replication (no lag to read) leaves the replica
 *   at most its last lag plus the time since that reading behind: reads stay
 *   on it until that bound passes `maxLagSeconds`.
 * - **Failures.** A read the replica fails is asked of the primary at once,
 *   and reads stay there until the next good reading: the request is not
 *   refused for the replica's sake.
 */
import type { Kysely } from 'kysely';
import { DEFAULTS } from '../../../defaults.js';
import { StorageUnavailableError } from '../../../errors.js';
import type { Storage, UserPageQuery, UserRecord, UserRecordPage } from '../../contract.js';
import { ForwardingStorage } from '../../forwarding-storage.js';
import type { MerchantApiDatabase } from '../schema.js';
import { MysqlStorage, type MysqlStorageOptions } from '../mysql-storage.js';
import { readReplicaLag } from './replica-lag.js';

export interface ReplicaReadsOptions {
  /** A Kysely on the replica (`createMysqlKysely(replicaUrl)`), a user that may read and run SHOW REPLICA STATUS. */
  replicaDb: Kysely<MerchantApiDatabase>;
  /** The primary's master key: the replica's storage needs one, though it never opens a key (merchants stay on the primary). */
  masterKey: MysqlStorageOptions['masterKey'];
  /** Most seconds the replica may be behind for reads to go to it (default 5). */
  maxLagSeconds?: number;
  /** How often the lag is read while reads happen, in ms (default 1000). */
  checkIntervalMs?: number;
  /** `close()` also destroys `replicaDb` (default false). */
  destroyOnClose?: boolean;
  /** Told when reads move to the primary (`usable` false, with the reason) and back to the replica. */
  onChange?: (usable: boolean, reason: string) => void;
  /** The bounds of a page's work on the replica, as `MysqlStorageOptions.pagePlan`; for tests. */
  pagePlan?: MysqlStorageOptions['pagePlan'];
}

export const DEFAULT_MAX_LAG_SECONDS = DEFAULTS.replicaReads.maxLagSeconds;

/** A storage reading from a replica; `readingFromReplica` says where reads go now. */
export interface ReplicaReadsStorage extends Storage {
  readonly readingFromReplica: boolean;
}

/** `primary`, with its user reads on a replica while the replica keeps up. */
export function withReplicaReads(primary: Storage, options: ReplicaReadsOptions): ReplicaReadsStorage {
  return new ReplicaReads(primary, options);
}

/**
 * User reads and closing are its own; every other operation goes to the primary unchanged
 * (`ForwardingStorage`): merchants, so that a key revoked or a merchant disabled there a moment
 * ago is refused now, salts, `ping` and the throttle's store.
 */
class ReplicaReads extends ForwardingStorage implements ReplicaReadsStorage {
  readonly #replica: MysqlStorage;
  readonly #options: ReplicaReadsOptions;
  readonly #maxLag: number;
  readonly #interval: number;
  /** False until a reading says the replica keeps up. */
  #usable = false;
  #reason = 'not checked yet';
  #checkedAt = Number.NEGATIVE_INFINITY;
  #checking: Promise<void> | undefined;
  /** The last lag read while replication ran, and when (performance.now()): bounds the lag once it stops. */
  #lastRunning: { seconds: number; at: number } | undefined;
  #closed = false;

  constructor(primary: Storage, options: ReplicaReadsOptions) {
    super(primary);
    this.#maxLag = options.maxLagSeconds ?? DEFAULT_MAX_LAG_SECONDS;
    this.#interval = options.checkIntervalMs ?? DEFAULTS.replicaReads.checkIntervalMs;
    if (!Number.isInteger(this.#maxLag) || this.#maxLag < 0) throw new TypeError('maxLagSeconds must be a whole number, 0 or more.');
    if (!Number.isInteger(this.#interval) || this.#interval < 1) throw new TypeError('checkIntervalMs must be a whole number, at least 1.');
    this.#options = options;
    // Only user reads reach it: it never records a salt, so it never prunes, and its throttle store is never asked for.
    this.#replica = new MysqlStorage({ db: options.replicaDb, masterKey: options.masterKey, keyCacheTtlMs: 0, throttleSharing: false, saltPruneIntervalMs: 0, pagePlan: options.pagePlan });
    this.#check();
  }

  /** Whether reads go to the replica now, for monitoring and tests. */
  get readingFromReplica(): boolean {
    return this.#usable;
  }

  override listUsers(query: UserPageQuery): Promise<UserRecordPage> {
    return this.#read((s) => s.listUsers(query));
  }

  override getUser(merchantId: string, sharedUserId: string): Promise<UserRecord | undefined> {
    return this.#read((s) => s.getUser(merchantId, sharedUserId));
  }

  override async close(): Promise<void> {
    this.#closed = true;
    await this.#checking;
    await this.#replica.close();
    if (this.#options.destroyOnClose) await this.#options.replicaDb.destroy();
    await this.inner.close();
  }

  async #read<T>(read: (storage: Storage) => Promise<T>): Promise<T> {
    if (performance.now() - this.#checkedAt >= this.#interval) this.#check();
    if (!this.#usable) return read(this.inner);
    try {
      return await read(this.#replica);
    } catch (error) {
      if (!(error instanceof StorageUnavailableError)) throw error;
      this.#set(false, `a read failed on the replica (${error.message})`);
      return read(this.inner);
    }
  }

  /** Reads the lag in the background, one reading at a time. */
  #check(): void {
    if (this.#checking || this.#closed) return;
    this.#checkedAt = performance.now();
    this.#checking = readReplicaLag(this.#options.replicaDb)
      .then(
        (lag) => {
          if ('problem' in lag) {
            const bound = lag.stopped && this.#lastRunning ? Math.ceil(this.#lastRunning.seconds + (performance.now() - this.#lastRunning.at) / 1000) : undefined;
            if (bound !== undefined && bound <= this.#maxLag) this.#set(true, `replication is stopped, the replica at most ${bound} s behind`);
            else this.#set(false, lag.problem);
            return;
          }
          this.#lastRunning = { seconds: lag.seconds, at: performance.now() };
          if (lag.seconds > this.#maxLag) this.#set(false, `the replica is ${lag.seconds} s behind, more than ${this.#maxLag}`);
          else this.#set(true, `the replica is ${lag.seconds} s behind`);
        },
        (error: unknown) => this.#set(false, `the replica's lag could not be read (${(error as { code?: string }).code ?? 'error'})`),
      )
      .finally(() => {
        this.#checking = undefined;
      });
  }

  #set(usable: boolean, reason: string): void {
    const changed = usable !== this.#usable || (!usable && this.#reason === 'not checked yet');
    this.#usable = usable;
    this.#reason = reason;
    if (changed && !this.#closed) this.#options.onChange?.(usable, reason);
  }
}
