/**
 * Whether Redis keeps every salt it acknowledged across a restart or a
 * failover (docs/scaling.md#a-restart-that-lost-nothing): then a restart, a
 * failover or a SCRIPT FLUSH is not a loss, and signing goes on.
 *
 * A master is durable when it writes an append-only file fsynced before
 * each answer (`appendonly yes`, `appendfsync always`: a SIGKILL or a power
 * cut loses nothing it acknowledged), read with `CONFIG GET`. Its replicas
 * (`connected_slaves` of `INFO replication`) are waited for after each new
 * salt (`WAIT`, redis-state.ts), so that a replica promoted holds every salt
 * acknowledged; a `WAIT` that fell short makes the next failover a loss.
 *
 * Where CONFIG is refused (managed services) nothing is known, so a restart
 * is a loss, as before. The reading is taken when the salts are checked
 * (at start and at every NOSCRIPT) and again at most every `recheckMs` while
 * salts are recorded, so that the instance knows how the Redis that held
 * its salts was set up before it restarted.
 */
import type { RedisConnection } from './connection.js';

export interface DurabilityReading {
  /** Every master writes an append-only file fsynced before it answers. */
  durable: boolean;
  /** The `run_id` of every master, as read with the setting. */
  runIds: string[];
  /** The fewest replicas connected to a master: each new salt waits for as many. */
  replicas: number;
}

const NOT_DURABLE: DurabilityReading = { durable: false, runIds: [], replicas: 0 };

/** The `run_id` in an `INFO server` text. */
function runIdOf(info: string): string {
  return /^run_id:(\w+)/m.exec(info)?.[1] ?? '';
}

/** A refusal by the server (CONFIG renamed or denied), as opposed to no answer. */
function isRefusal(error: unknown): boolean {
  return error instanceof Error && (error.name === 'ReplyError' || /^(ERR|NOPERM)\b/.test(error.message));
}

export class DurabilityCheck {
  readonly #connection: RedisConnection;
  readonly #recheckMs: number;
  readonly #onReading: (reading: DurabilityReading) => void;
  /** The last reading, and when it was taken (performance.now()). */
  #last: DurabilityReading | undefined;
  #readAt = Number.NEGATIVE_INFINITY;
  #running: Promise<DurabilityReading> | undefined;

  /** `onReading` hears every reading, the background ones too, so that a Redis made less durable is known at once. */
  constructor(connection: RedisConnection, options: { recheckMs?: number; onReading?: (reading: DurabilityReading) => void } = {}) {
    this.#connection = connection;
    this.#recheckMs = options.recheckMs ?? 10_000;
    this.#onReading = options.onReading ?? (() => undefined);
  }

  /** The last reading (undefined before the first). */
  get last(): DurabilityReading | undefined {
    return this.#last;
  }

  /**
   * Reads again now (deduplicated). A Redis that refuses CONFIG is not durable; one that does not
   * answer throws (the check that asked fails, and is made again at the next signed request).
   */
  read(): Promise<DurabilityReading> {
    this.#running ??= this.#read()
      .then((reading) => {
        this.#last = reading;
        this.#readAt = performance.now();
        this.#onReading(reading);
        return reading;
      })
      .finally(() => {
        this.#running = undefined;
      });
    return this.#running;
  }

  /** Reads again in the background when the last reading is older than `recheckMs`. */
  refresh(): void {
    if (!this.#running && performance.now() - this.#readAt >= this.#recheckMs) void this.read().catch(() => undefined);
  }

  async #read(): Promise<DurabilityReading> {
    const connection = this.#connection;
    if (!connection.replicationOfEveryMaster || !connection.waitForReplicas) return NOT_DURABLE;
    const [infos, replication] = await Promise.all([connection.infoOfEveryMaster(), connection.replicationOfEveryMaster()]);
    let appendOnly: string[];
    let fsync: string[];
    try {
      [appendOnly, fsync] = await Promise.all([connection.configOfEveryMaster('appendonly'), connection.configOfEveryMaster('appendfsync')]);
    } catch (error) {
      if (!isRefusal(error)) throw error;
      return { ...NOT_DURABLE, runIds: infos.map(runIdOf) };
    }
    const durable = infos.length > 0 && appendOnly.every((value) => value === 'yes') && fsync.every((value) => value === 'always');
    const replicas = Math.min(...replication.map((text) => Number(/^connected_slaves:(\d+)/m.exec(text)?.[1] ?? 0)));
    return { durable, runIds: infos.map(runIdOf), replicas: Number.isFinite(replicas) ? replicas : 0 };
  }
}
