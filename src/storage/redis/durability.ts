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

export class DurabilityCheck {
  readonly #connection: RedisConnection;
  readonly #recheckMs: number;
  /** The last reading, and when it was taken (performance.now()). */
  #last: DurabilityReading | undefined;
  #readAt = Number.NEGATIVE_INFINITY;
  #running: Promise<DurabilityReading> | undefined;

  constructor(connection: RedisConnection, options: { recheckMs?: number } = {}) {
    this.#connection = connection;
    this.#recheckMs = options.recheckMs ?? 10_000;
  }

  /** The last reading (undefined before the first). */
  get last(): DurabilityReading | undefined {
    return this.#last;
  }

  /** Reads again now (deduplicated); a Redis that does not answer, or refuses CONFIG, is not durable. */
  read(): Promise<DurabilityReading> {
    this.#running ??= this.#read()
      .catch(() => NOT_DURABLE)
      .then((reading) => {
        this.#last = reading;
        this.#readAt = performance.now();
        return reading;
      })
      .finally(() => {
        this.#running = undefined;
      });
    return this.#running;
  }

  /** Reads again in the background when the last reading is older than `recheckMs`. */
  refresh(): void {
    if (!this.#running && performance.now() - this.#readAt >= this.#recheckMs) void this.read();
  }

  async #read(): Promise<DurabilityReading> {
    const connection = this.#connection;
    if (!connection.replicationOfEveryMaster || !connection.waitForReplicas) return NOT_DURABLE;
    const [infos, appendOnly, fsync, replication] = await Promise.all([
      connection.infoOfEveryMaster(),
      connection.configOfEveryMaster('appendonly'),
      connection.configOfEveryMaster('appendfsync'),
      connection.replicationOfEveryMaster(),
    ]);
    const durable = infos.length > 0 && appendOnly.every((value) => value === 'yes') && fsync.every((value) => value === 'always');
    const replicas = Math.min(...replication.map((text) => Number(/^connected_slaves:(\d+)/m.exec(text)?.[1] ?? 0)));
    return { durable, runIds: infos.map(runIdOf), replicas: Number.isFinite(replicas) ? replicas : 0 };
  }
}
