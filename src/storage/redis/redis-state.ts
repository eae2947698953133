/**
 * `withRedisState(storage, connection)`: a storage whose salts and
 * failed-authentication counters live on Redis (docs/scaling.md), every other
 * call going to `storage` unchanged. With it, any number of instances and
 * workers on the memory storage (or on MySQL, sparing it the salt writes)
 * accept a signed URL exactly once between them, and share the throttle, a
 * block reaching every one of them at once.
 *
 * Salts fail closed: while Redis does not answer, answers an error, is full,
 * or has an eviction policy that could drop them, a signed request gets 503,
 * never a replay accepted. Whatever Redis loses (a restart, from a snapshot
 * or not, a FLUSHALL, a failover), no URL accepted before is accepted again:
 * see salt-script.ts. A restart or a failover that lost nothing (a durable
 * Redis, durability.ts, and no acknowledged write missing) goes on signing.
 */
import { DEFAULTS } from '../../defaults.js';
import { MerchantApiError, StorageUnavailableError } from '../../errors.js';
import { STORAGE_OPERATIONS, type PartHealth, type SaltRecord, type Storage, type StorageOperation } from '../contract.js';
import { ForwardingStorage } from '../forwarding-storage.js';
import type { ThrottleStore } from '../throttle-store.js';
import { ScriptNotLoadedError, type RedisConnection, type RedisScript } from './connection.js';
import { DurabilityCheck, type DurabilityReading } from './durability.js';
import { EvictionPolicyCheck } from './eviction-policy.js';
import { DEFAULT_PREFIX, RedisKeys, SALT_GROUPS } from './keys.js';
import { healthProblem, redisError } from './redis-error.js';
import { EXPIRY_MARGIN_SECONDS, readGroupVerdict, readSaltVerdict, saltScript, type SaltVerdict } from './salt-script.js';
import { RedisThrottleStore } from './throttle-store.js';

export interface RedisStateOptions {
  /** Prefix of every key and of the channel (default `merchant-api:`), to share one Redis between deployments. */
  prefix?: string;
  /**
   * The operator checked that every master has `maxmemory-policy noeviction`, where Redis refuses
   * `CONFIG GET` (managed services): the policy is not read (REDIS_ASSUME_NOEVICTION=true).
   */
  assumeNoEviction?: boolean;
  /** Seconds a salt's key outlives its expiry (default `EXPIRY_MARGIN_SECONDS`, 2): see salt-script.ts. */
  expiryMarginSeconds?: number;
  /** Share the throttle's counters on Redis (default true); false leaves `storage`'s own, if any. */
  throttle?: boolean;
  /** `close()` also closes `storage` (default true). */
  closeStorage?: boolean;
  /** `close()` also closes `connection` (default false: the caller owns it). */
  closeConnection?: boolean;
  /**
   * The handler's clock in ms (default `Date.now`), for the life markers `redisReady()` writes; give
   * it the `now` you gave `createMerchantApi`, if you changed it.
   */
  now?: () => number;
  /**
   * The handler's `timestampTolerance` in seconds (default 300): after a loss of Redis's data, every
   * ts up to then plus this is refused, since an instance may have accepted one that far ahead.
   */
  timestampTolerance?: number;
  /**
   * The handler's `timestampFutureTolerance` in seconds (default: `timestampTolerance`): how far
   * ahead of the clock a ts may be. After a loss of Redis's data, every ts up to then plus this is
   * refused, since an instance may have accepted one that far ahead (docs/scaling.md#the-life-marker).
   */
  timestampFutureTolerance?: number;
  /**
   * ms a new salt waits for Redis's replicas to acknowledge it (`WAIT`, default 250), where the
   * master has replicas: a failover to one of them then loses nothing. Fewer replicas in time, and
   * the salt does not count: a 503 (docs/scaling.md#a-restart-that-lost-nothing).
   */
  replicaWaitMs?: number;
}

export const BEFORE_MARKER_MESSAGE = 'Invalid timestamp: ts is before the replay store began keeping salts (it started, or lost its data, after it); sign the request again with the current time.';

/** How Redis is doing, for health details: `problem` says why salts are refused now. */
export type RedisHealth = { ok: true } | { ok: false; problem: string };

/** How long the durable Redis run ids this instance saw are remembered: a few restarts' worth. */
const DURABLE_RUNS_KEPT = 16;

/** A storage with its salts on Redis; `redisReady()` and `redisHealth()` check Redis alone. */
export interface RedisStateStorage extends Storage {
  /**
   * Resolves when Redis answers and may hold salts (version and eviction policy), having written the
   * missing life markers. Throws `RedisSetupError` when Redis answers but must not hold salts (an
   * evicting `maxmemory-policy`: refuse to start), `StorageUnavailableError` when it does not answer.
   */
  redisReady(): Promise<void>;
  /** `redisReady()` as a value that never throws, for health details. */
  redisHealth(): Promise<RedisHealth>;
}

/** `storage` with its salts and throttle counters on Redis. */
export function withRedisState(storage: Storage, connection: RedisConnection, options: RedisStateOptions = {}): RedisStateStorage {
  return new RedisState(storage, connection, options);
}

/**
 * Salts, the throttle's store, the health of Redis and closing are its own; every other operation
 * goes to the wrapped storage unchanged (`ForwardingStorage`), `ping` included: Redis holds only
 * salts and throttle counters, so a Redis outage must not make the instance unready (the users
 * endpoints work without it); see `redisHealth()`.
 */
class RedisState extends ForwardingStorage implements RedisStateStorage {
  readonly #connection: RedisConnection;
  readonly #keys: RedisKeys;
  readonly #margin: number;
  readonly #policy: EvictionPolicyCheck;
  readonly #throttle: RedisThrottleStore | undefined;
  readonly #options: RedisStateOptions;
  /** Why the last salt call failed; undefined once one succeeds. */
  #problem: string | undefined;
  override readonly pooledOperations: readonly StorageOperation[];
  /** This instance's salts' script (salt-script.ts): NOSCRIPT to it means Redis lost its scripts, and maybe its data. */
  readonly #script: RedisScript = saltScript();
  /**
   * Every group's marker checked against the Redis that answers now (written if missing, raised after
   * a loss); undefined: to do before the next salt is trusted.
   */
  #verified: Promise<void> | undefined;
  /** Each group's Redis (`run_id`) as the last check found it: a missing marker, or another Redis, is then a loss. */
  readonly #runIds: string[] = Array.from({ length: SALT_GROUPS }, () => '');
  /** Each group's marker as the last check found it, as Redis holds it: a first marker other than it is a loss (salt-script.ts). */
  readonly #markers: string[] = Array.from({ length: SALT_GROUPS }, () => '');
  /** Listening on the presence channel once the first check wrote every marker, until `close()`: see salt-script.ts. */
  #present: (() => void) | undefined;
  /** The latest marker the last check found (Unix seconds): a ts before it is refused, so health says signing is held until then. */
  #refusedBefore = 0;
  /** Each group's sequence as this instance last saw it acknowledged: a Redis whose sequence is lower lost a write (salt-script.ts). */
  readonly #sequences: number[] = Array.from({ length: SALT_GROUPS }, () => 0);
  /** How Redis keeps what it acknowledged (durability.ts). */
  readonly #durability: DurabilityCheck;
  /** The `run_id`s of the masters this instance found durable (the latest last): a restart of one of them, onto a durable one, is no loss. */
  readonly #durableRuns: string[] = [];
  /** The `run_id`s of the masters this instance once found not durable. */
  readonly #distrusted = new Set<string>();
  /** The largest future bound of a ts, of the option and of the records seen: a marker after a loss lies past it. */
  #future: number;

  constructor(inner: Storage, connection: RedisConnection, options: RedisStateOptions) {
    super(inner);
    this.#connection = connection;
    this.#keys = new RedisKeys(options.prefix ?? DEFAULT_PREFIX, connection.database ?? 0);
    this.#margin = options.expiryMarginSeconds ?? EXPIRY_MARGIN_SECONDS;
    if (!Number.isInteger(this.#margin) || this.#margin < 0 || this.#margin > 3600) throw new TypeError('expiryMarginSeconds must be a whole number from 0 to 3600.');
    this.#policy = new EvictionPolicyCheck(connection, { assumeNoEviction: options.assumeNoEviction });
    this.#throttle = options.throttle === false ? undefined : new RedisThrottleStore(connection, this.#keys);
    this.#options = options;
    const tolerance = options.timestampTolerance ?? DEFAULTS.timestampTolerance;
    if (!Number.isInteger(tolerance) || tolerance < 1) throw new TypeError('timestampTolerance must be a whole number of seconds, at least 1.');
    this.#future = options.timestampFutureTolerance ?? tolerance;
    if (!Number.isInteger(this.#future) || this.#future < 0 || this.#future > tolerance) throw new TypeError('timestampFutureTolerance must be a whole number of seconds, from 0 to timestampTolerance.');
    const wait = options.replicaWaitMs ?? 250;
    if (!Number.isInteger(wait) || wait < 1 || wait > 60_000) throw new TypeError('replicaWaitMs must be a whole number of ms from 1 to 60000.');
    this.#durability = new DurabilityCheck(connection, { onReading: (reading) => this.#noteDurability(reading) });
    // Salts go to Redis, not to the wrapped storage's pool: they do not wait for the merchant's share of it.
    this.pooledOperations = (inner.pooledOperations ?? STORAGE_OPERATIONS).filter((operation) => operation !== 'recordSalt');
  }

  /** See salt-script.ts: new, a replay, or a ts from before the group's life marker (400). */
  override async recordSalt({ merchantId, salt, expiresAt, now, ts, futureTolerance }: SaltRecord): Promise<boolean> {
    let verdict: SaltVerdict;
    try {
      await this.#policy.ensure();
      this.#durability.refresh();
      // The handler's own bound of a ts ahead, should it be wider than the option: a marker after a loss covers it.
      const ahead = futureTolerance ?? (ts === undefined ? 0 : Math.ceil(expiresAt - ts));
      if (ahead > this.#future) this.#future = ahead;
      await this.#verify(this.#precise(now));
      const { key, marker, boot, sequence, group } = this.#keys.salt(merchantId, salt);
      const lives = Math.max(1, Math.ceil(expiresAt - now)) + this.#margin;
      // The marker this instance verified: another first marker since means the group was emptied (salt-script.ts).
      const args = () => ['record', Math.floor(now), this.#future, lives, ts === undefined ? '' : Math.floor(ts), this.#markers[group]!];
      let reply: unknown;
      try {
        reply = await this.#connection.run(this.#script, [marker, key, boot, sequence], args(), { ifLoaded: true });
      } catch (error) {
        if (!(error instanceof ScriptNotLoadedError)) throw error;
        // Redis lost its scripts since this instance last ran one: perhaps its data too. Check every group first.
        this.#verified = undefined;
        await this.#verify(this.#precise(now));
        reply = await this.#connection.run(this.#script, [marker, key, boot, sequence], args());
      }
      verdict = readSaltVerdict(reply);
      if (verdict.kind === 'new') await this.#replicated(key, group, verdict.sequence);
    } catch (error) {
      this.#problem = healthProblem(error);
      throw redisError(error, 'salt record');
    }
    this.#problem = undefined;
    if (verdict.markerWritten) {
      // A marker was missing, so Redis lost data since the markers were written: raise the others now, not at each group's next request.
      this.#verified = undefined;
      void this.#verify(this.#precise(now)).catch(() => undefined);
    }
    if (verdict.kind === 'before-marker') {
      // Another instance may have raised the marker after a loss: health says signing is held until it passes.
      if (verdict.since > this.#refusedBefore) this.#refusedBefore = verdict.since;
      throw new MerchantApiError('invalid_parameter', BEFORE_MARKER_MESSAGE);
    }
    return verdict.kind === 'new';
  }

  /**
   * A new salt: where the master has replicas, waited for until they have it (`WAIT`, at most
   * `replicaWaitMs`), so that a replica promoted holds every salt acknowledged; fewer replicas in
   * time, and the salt does not count (503: the URL was not accepted, so its loss in a failover
   * lets nothing through). Then its group's sequence is noted as acknowledged.
   */
  async #replicated(key: string, group: number, sequence: number): Promise<void> {
    const replicas = this.#durability.last?.replicas ?? 0;
    if (replicas > 0 && this.#connection.waitForReplicas) {
      const wait = this.#options.replicaWaitMs ?? 250;
      const acknowledged = await this.#connection.waitForReplicas(key, replicas, wait);
      if (acknowledged < replicas) throw new StorageUnavailableError(`Redis salt record not acknowledged: ${acknowledged} of ${replicas} replicas had it within ${wait} ms.`);
    }
    if (sequence > this.#sequences[group]!) this.#sequences[group] = sequence;
  }

  async redisHealth(): Promise<RedisHealth> {
    try {
      await this.redisReady();
      return { ok: true };
    } catch (error) {
      return { ok: false, problem: error instanceof Error ? error.message : String(error) };
    }
  }

  async redisReady(): Promise<void> {
    try {
      await this.#connection.ping();
      await this.#policy.ensure();
      await this.#verify(this.#clock());
    } catch (error) {
      throw redisError(error, 'ping');
    }
  }

  #clock(): number {
    return (this.#options.now ?? Date.now)() / 1000;
  }

  /**
   * A salt's `now` (whole seconds) to the millisecond, from the handler's clock when that agrees with
   * it (the same second, or the next one: a later time only refuses more). A clock set apart from
   * the record's (a test's) leaves it as it is.
   */
  #precise(now: number): number {
    const clock = (this.#options.now ?? Date.now)() / 1000;
    const apart = Math.floor(clock) - Math.floor(now);
    return apart === 0 || apart === 1 ? clock : now;
  }

  /**
   * Checks every group against the Redis that answers now (salt-script.ts, `verify`), once, and again
   * after a loss, a NOSCRIPT or a failure; `now` in Unix seconds. On first contact with an empty
   * group its marker says since when this instance runs, to the millisecond, as the memory storage
   * refuses a ts from before its start: a ts equal to its whole second is refused, since a loss may
   * have taken salts of this very second. Once a check completed, a missing marker, a sequence lower
   * than this instance saw acknowledged, or a marker written by another Redis (its `run_id` in the
   * boot key) unless both are durable (durability.ts), is a loss: the marker is raised past every
   * ts an instance may have accepted.
   */
  #verify(now: number): Promise<void> {
    const since = Math.round(now * 1000) / 1000;
    const check = (group: number, others: boolean, durable: string, lost = false) =>
      this.#connection.run(
        this.#script,
        [this.#keys.lifeMarker(group), this.#keys.bootMarker(group), this.#keys.sequence(group)],
        ['verify', since, this.#future, this.#runIds[group]!, others ? '1' : '', this.#markers[group]!, this.#sequences[group] || '', durable, lost ? '1' : ''],
      );
    // The first group alone, so that the script is loaded once (on a single server) rather than sent whole 1,024 times.
    this.#verified ??= Promise.all([this.#othersRun(), this.#durableNow()])
      .then(([others, durable]) => check(0, others, durable).then(async (first) => [first, ...(await Promise.all(Array.from({ length: SALT_GROUPS - 1 }, (_, group) => check(group + 1, others, durable))))]))
      // A loss in one group (its sequence went back) shows that Redis lost writes: those other instances
      // acknowledged in other groups too, which they may never check. Every group is then taken as lost.
      .then((replies) =>
        replies.some((reply) => readGroupVerdict(reply).kind === 'loss') && replies.some((reply) => readGroupVerdict(reply).kind === 'kept')
          ? Promise.all(replies.map((reply, group) => (readGroupVerdict(reply).kind === 'kept' ? check(group, false, '', true) : reply)))
          : replies,
      )
      .then(
      (replies) => {
        const verdicts = replies.map(readGroupVerdict);
        for (const [group, verdict] of verdicts.entries()) {
          this.#runIds[group] = verdict.runId;
          this.#markers[group] = verdict.marker;
          if (verdict.sequence > this.#sequences[group]!) this.#sequences[group] = verdict.sequence;
        }
        this.#refusedBefore = Math.max(...verdicts.map((verdict) => verdict.since));
        // Every marker is written: from now on an empty group while this instance listens is a loss to the ones that start.
        this.#present ??= this.#connection.subscribe(this.#keys.presenceChannel, { message: () => undefined, ready: () => undefined, failed: () => undefined });
      },
      (error: unknown) => {
        this.#verified = undefined;
        throw error;
      },
    );
    return this.#verified;
  }

  /**
   * The `run_id`s a group's Redis may have restarted or failed over between and lost nothing, for
   * `verify`: the masters this instance found durable at every reading since it first saw them, the
   * ones answering now included (read now, so that a Redis restarted without its append-only file is
   * not trusted); none when those are not durable.
   */
  async #durableNow(): Promise<string> {
    const reading = await this.#durability.read();
    return reading.durable ? this.#durableRuns.join(',') : '';
  }

  /**
   * Every reading, the background ones too: a master found not durable, even once, is trusted no more
   * (made durable again at run time, its file may still lack writes it took meanwhile).
   */
  #noteDurability(reading: DurabilityReading): void {
    for (const run of reading.runIds) {
      const at = this.#durableRuns.indexOf(run);
      if (!reading.durable) {
        if (at >= 0) this.#durableRuns.splice(at, 1);
        this.#distrusted.add(run);
      } else if (at < 0 && !this.#distrusted.has(run)) this.#durableRuns.push(run);
    }
    this.#durableRuns.splice(0, Math.max(0, this.#durableRuns.length - DURABLE_RUNS_KEPT));
    // Bounded: a run forgotten here could be trusted again only after 16 newer ones were found not durable.
    if (this.#distrusted.size > DURABLE_RUNS_KEPT) this.#distrusted.delete(this.#distrusted.values().next().value!);
  }

  /**
   * Whether other instances run on this Redis (listeners on the presence channel), asked only at this
   * instance's first check: then a missing marker is a loss (a FLUSHALL while they ran), not a new
   * Redis. A connection that cannot count them answers no.
   */
  async #othersRun(): Promise<boolean> {
    if (this.#present || this.#runIds[0] !== '' || !this.#connection.subscribersOfEveryMaster) return false;
    return (await this.#connection.subscribersOfEveryMaster(this.#keys.presenceChannel)) > 0;
  }

  /**
   * Redis as the last salt found it; `signing` while the markers refuse a ts of now (after a loss,
   * and in the second this instance first marked an empty Redis); the wrapped storage's own parts.
   */
  override health(): Record<string, PartHealth> {
    const parts: Record<string, PartHealth> = { ...this.inner.health?.(), redis: this.#problem === undefined ? { ok: true } : { ok: false, problem: this.#problem } };
    // A ts of the current second is refused while that second is before the marker.
    const wait = Math.ceil(this.#refusedBefore - Math.floor(this.#clock()));
    if (wait > 0) parts.signing = { ok: false, problem: `held: a ts before ${Math.ceil(this.#refusedBefore)} is refused, as Redis lost salts (or was first marked) then; ${wait} s left` };
    return parts;
  }

  override throttleStore(): ThrottleStore | undefined {
    return this.#throttle ?? this.inner.throttleStore?.();
  }

  override async close(): Promise<void> {
    this.#throttle?.close();
    this.#present?.();
    this.#present = undefined;
    if (this.#options.closeStorage !== false) await this.inner.close();
    if (this.#options.closeConnection) await this.#connection.close();
  }
}
