/**
 * Reads from a MySQL replica, writes to the primary
 * (docs/mysql.md#read-replicas): `withReplicaReads(primary, options)` is a
 * storage whose user reads (listings, single users and so the streamed
 * export) go to a replica while it is known to be close enough behind, and
 * everything else to the primary: merchants and their keys, so that a revoked
 * key or a disabled merchant is never served stale by the replica's lag,
 * salts, the throttle, `ping` and every write.
 *
 * - **Lag.** Every `checkIntervalMs` the storage writes a heartbeat on the
 *   primary (the primary's clock) and reads the heartbeat the replica has
 *   applied (`replica-heartbeat.ts`). A read goes to the replica only when
 *   the primary's clock now (the last one read, plus the time since on this
 *   process's monotonic clock) minus that beat is at most `maxLagSeconds`:
 *   everything the primary committed before the beat is on the replica, so
 *   that difference bounds how old the answer may be, and it grows by itself
 *   while the beat stops advancing (a frozen link, stopped replication).
 *   Unknown lag means the primary: no beat read yet, or the last reading
 *   older than two check intervals (a reading that failed or hangs).
 * - **Failures.** A read the replica fails is asked of the primary at once,
 *   and reads stay there until the next good reading: the request is not
 *   refused for the replica's sake.
 * - **Streams.** The batches of one streamed listing (`UserPageQuery.listing`)
 *   are all read from the source of the first batch; a batch that source
 *   fails cuts the stream rather than go on from another source.
 */
import type { Kysely } from 'kysely';
import { DEFAULTS } from '../../../defaults.js';
import { StorageUnavailableError } from '../../../errors.js';
import type { Storage, UserPageQuery, UserRecord, UserRecordPage } from '../../contract.js';
import { ForwardingStorage } from '../../forwarding-storage.js';
import type { MerchantApiDatabase } from '../schema.js';
import { MysqlStorage, type MysqlStorageOptions } from '../mysql-storage.js';
import { readHeartbeat, writeHeartbeat } from './replica-heartbeat.js';

export interface ReplicaReadsOptions {
  /** A Kysely on the replica (`createMysqlKysely(replicaUrl)`), a user that may read (SELECT) the database, heartbeat table included. */
  replicaDb: Kysely<MerchantApiDatabase>;
  /**
   * A Kysely on the primary, where the heartbeat is written (the user needs INSERT and UPDATE on
   * `replica_heartbeat`). Default: `primary.db` when `primary` is a `MysqlStorage`; required otherwise.
   */
  primaryDb?: Kysely<MerchantApiDatabase>;
  /** The primary's master key: the replica's storage needs one, though it never opens a key (merchants stay on the primary). */
  masterKey: MysqlStorageOptions['masterKey'];
  /** Most seconds the replica may be behind for reads to go to it (default 5). */
  maxLagSeconds?: number;
  /** How often the heartbeat is written and read, in ms (default 1000). */
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

/** A time on the primary's clock (µs) and when this process learnt it (`performance.now()`, ms). */
type Clock = { micros: number; at: number };

/**
 * User reads and closing are its own; every other operation goes to the primary unchanged
 * (`ForwardingStorage`): merchants, so that a key revoked or a merchant disabled there a moment
 * ago is refused now, salts, `ping` and the throttle's store.
 */
class ReplicaReads extends ForwardingStorage implements ReplicaReadsStorage {
  readonly #replica: MysqlStorage;
  readonly #primaryDb: Kysely<MerchantApiDatabase>;
  readonly #options: ReplicaReadsOptions;
  readonly #maxLagMicros: number;
  readonly #interval: number;
  /** The primary's clock at the last beat written. */
  #primaryClock: Clock | undefined;
  /** The beat the replica had applied at the last reading, and when that reading answered. */
  #replicaBeat: Clock | undefined;
  /** Why the last check failed, while it is the latest word. */
  #problem: string | undefined = 'not checked yet';
  /** Where reads went last, for `onChange`. */
  #usable = false;
  #reason = 'not checked yet';
  /** A read the replica failed: reads stay on the primary until the next good reading. */
  #failedSince = false;
  /** The source of the first batch of each streamed listing. */
  readonly #listings = new WeakMap<object, Storage>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #checking: Promise<void> | undefined;
  #closed = false;

  constructor(primary: Storage, options: ReplicaReadsOptions) {
    super(primary);
    const maxLag = options.maxLagSeconds ?? DEFAULT_MAX_LAG_SECONDS;
    this.#interval = options.checkIntervalMs ?? DEFAULTS.replicaReads.checkIntervalMs;
    if (!Number.isInteger(maxLag) || maxLag < 0) throw new TypeError('maxLagSeconds must be a whole number, 0 or more.');
    if (!Number.isInteger(this.#interval) || this.#interval < 1) throw new TypeError('checkIntervalMs must be a whole number, at least 1.');
    const primaryDb = options.primaryDb ?? (primary instanceof MysqlStorage ? primary.db : undefined);
    if (primaryDb === undefined) throw new TypeError('primaryDb is needed (the heartbeat is written there) when the primary is not a MysqlStorage.');
    this.#primaryDb = primaryDb;
    this.#maxLagMicros = maxLag * 1_000_000;
    this.#options = options;
    // Only user reads reach it: it never records a salt, so it never prunes, and its throttle store is never asked for.
    this.#replica = new MysqlStorage({ db: options.replicaDb, masterKey: options.masterKey, keyCacheTtlMs: 0, throttleSharing: false, saltPruneIntervalMs: 0, pagePlan: options.pagePlan });
    this.#check();
  }

  /** Whether reads go to the replica now, for monitoring and tests. */
  get readingFromReplica(): boolean {
    return this.#decide();
  }

  override listUsers(query: UserPageQuery): Promise<UserRecordPage> {
    if (query.listing === undefined) return this.#read((s) => s.listUsers(query));
    return this.#readListing(query.listing, (s) => s.listUsers(query));
  }

  override getUser(merchantId: string, sharedUserId: string): Promise<UserRecord | undefined> {
    return this.#read((s) => s.getUser(merchantId, sharedUserId));
  }

  override async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#checking;
    await this.#replica.close();
    if (this.#options.destroyOnClose) await this.#options.replicaDb.destroy();
    await this.inner.close();
  }

  async #read<T>(read: (storage: Storage) => Promise<T>): Promise<T> {
    if (!this.#decide()) return read(this.inner);
    try {
      return await read(this.#replica);
    } catch (error) {
      if (!(error instanceof StorageUnavailableError)) throw error;
      this.#failedSince = true;
      this.#decide(`a read failed on the replica (${error.message})`);
      return read(this.inner);
    }
  }

  /** A batch of a streamed listing: from the source of its first batch, whatever the lag says since. */
  async #readListing<T>(listing: object, read: (storage: Storage) => Promise<T>): Promise<T> {
    const pinned = this.#listings.get(listing);
    if (pinned !== undefined) return read(pinned);
    let source: Storage = this.#decide() ? this.#replica : this.inner;
    let answer: T;
    try {
      answer = await read(source);
    } catch (error) {
      if (source === this.inner || !(error instanceof StorageUnavailableError)) throw error;
      this.#failedSince = true;
      this.#decide(`a read failed on the replica (${error.message})`);
      source = this.inner;
      answer = await read(source);
    }
    this.#listings.set(listing, source);
    return answer;
  }

  /**
   * Whether a read now may go to the replica: the lag bound, from the last readings, within
   * `maxLagSeconds`. Tells `onChange` when the answer changes, with the reason.
   */
  #decide(failure?: string): boolean {
    const now = performance.now();
    let usable = false;
    let reason: string;
    if (failure !== undefined) reason = failure;
    else if (this.#failedSince) reason = this.#reason;
    else if (this.#problem !== undefined) reason = this.#problem;
    else if (now - this.#replicaBeat!.at > 2 * this.#interval) reason = `the replica's lag is unknown: no reading for ${Math.round(now - this.#replicaBeat!.at)} ms`;
    else {
      const primaryNow = this.#primaryClock!.micros + (now - this.#primaryClock!.at) * 1000;
      const lag = primaryNow - this.#replicaBeat!.micros;
      const seconds = Math.floor(lag / 1_000_000);
      // The estimate of the primary's clock is never early (see #check), so a beat after it was not
      // written by this clock as it runs now: one from before a step back, or written by hand. Unknown.
      if (lag < 0) reason = "the replica's heartbeat is ahead of the primary's clock (was that clock set back?)";
      else {
        usable = lag <= this.#maxLagMicros;
        reason = usable ? `the replica is ${seconds} s behind` : `the replica is ${seconds} s behind, more than ${this.#maxLagMicros / 1_000_000}`;
      }
    }
    const changed = usable !== this.#usable || (!usable && this.#reason === 'not checked yet' && reason !== this.#reason);
    this.#usable = usable;
    this.#reason = reason;
    if (changed && !this.#closed) this.#options.onChange?.(usable, reason);
    return usable;
  }

  /** Writes a beat on the primary, then reads the replica's; again every interval until closed. */
  #check(): void {
    if (this.#closed) return;
    const started = performance.now();
    this.#checking = (async () => {
      try {
        const beat = await writeHeartbeat(this.#primaryDb);
        // When the primary's clock was read is unknown within the round trip: `started`, the earliest, overstates the lag, never understates it.
        this.#primaryClock = { micros: beat, at: started };
      } catch (error) {
        // The beat stops advancing here; other instances' beats may still arrive, so the reading goes on.
        this.#problemWriting = `the heartbeat could not be written on the primary (${errorCode(error)})`;
      }
      try {
        const applied = await readHeartbeat(this.#options.replicaDb);
        const at = performance.now();
        if (applied === undefined) this.#problem = this.#problemWriting ?? 'no heartbeat has reached the replica yet';
        else if (this.#primaryClock === undefined) this.#problem = this.#problemWriting ?? "the primary's clock is not known yet";
        else {
          this.#problem = undefined;
          this.#replicaBeat = { micros: applied, at };
        }
        this.#failedSince = false;
      } catch (error) {
        this.#problem = `the replica's lag could not be read (${errorCode(error)})`;
      }
      this.#problemWriting = undefined;
      this.#decide();
    })().finally(() => {
      this.#checking = undefined;
      if (this.#closed) return;
      this.#timer = setTimeout(() => this.#check(), Math.max(0, this.#interval - (performance.now() - started)));
      this.#timer.unref?.();
    });
  }

  #problemWriting: string | undefined;
}

function errorCode(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : error instanceof Error ? error.name : 'error';
}
