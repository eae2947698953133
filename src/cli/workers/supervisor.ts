/**
 * WORKERS=N: the standalone server as N worker processes on one port, run
 * by a primary that starts them, prints the one `listening on` line once
 * every worker listens, restarts a worker that dies (at most
 * MAX_RESTARTS_PER_MINUTE), and on SIGTERM/SIGINT stops them all gracefully
 * (docs/runtimes.md#workers). This is the primary, the same on every runtime:
 * how a worker is started is the runtime's (runtimes.ts), what the primary
 * and its workers say to each other is the channel's (channel.ts), and with
 * METRICS_PORT the one scrape for all of them is worker-metrics.ts.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import process from 'node:process';
import { createJsonLogger } from '../../index.js';
import type { Served } from '../../../adapters/node.js';
import type { ServerConfig } from '../config.js';
import type { CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';
import type { FromWorker } from './channel.js';
import type { WorkerProcess, WorkerRuntime } from './runtimes.js';
import { stampPid } from './line-writer.js';
import { WorkerMetrics } from './worker-metrics.js';
import { printBanner } from '../start-lines.js';

/** A worker that dies is started again at most this often a minute; once more and the server stops (exit 1). */
export const MAX_RESTARTS_PER_MINUTE = 5;
/** After the workers' graceful close (SHUTDOWN_TIMEOUT), the time a worker has to close its storage and exit before it is killed. */
const EXIT_MARGIN_MS = 2000;

/**
 * The primary: starts `config.workers` workers on one port, prints one
 * `merchant-api listening on <url> (..., N workers)` line once all of them
 * listen, and runs until a signal (exit 0 once every worker has stopped) or
 * a failure (a worker that could not start, or too many restarts: exit 1,
 * or 2 when a worker found the configuration wrong).
 */
export async function runWorkers(
  runtimeName: string,
  workers: WorkerRuntime | undefined,
  io: CliIo,
  config: ServerConfig,
  serveMetrics?: MetricsServe,
): Promise<number> {
  if (!workers) throw new CliUsageError(`WORKERS=${config.workers} is not supported on ${runtimeName}.`);
  workers.check();
  // A missing or wrong MASTER_KEY: one message before any worker starts, not one per worker.
  if (config.databaseUrl) config.mysql.masterKey();
  const logger = createJsonLogger({ level: config.logLevel, write: stampPid(process.pid, (lines) => io.out(lines.slice(0, -1))) });
  // PORT=0 with reusePort: one free port for all of them, picked here (node:cluster shares its own).
  const port = workers.reusePort && config.port === 0 ? await freePort(config.hostname) : config.port;
  // Without CURSOR_SECRET each process would seal cursors with its own random key, and page 2 would fail on another worker.
  const env = { ...io.env, PORT: String(port), ...(config.cursorSecret ? {} : { CURSOR_SECRET: randomBytes(32).toString('base64url') }) };
  // METRICS_PORT: one scrape for all workers, served here.
  const metricsServe = config.metricsPort === undefined ? undefined : serveMetrics;
  return new Promise<number>((resolve) => new Primary(workers, io, config, logger, env, metricsServe, resolve).run());
}

type JsonLogger = ReturnType<typeof createJsonLogger>;
type MetricsServe = (fetch: (request: Request) => Promise<Response>) => Promise<Served>;
/** A stop under way: the exit code so far, the deadline of the workers' exit, the metrics listener's close. */
type Stopping = { code: number; timer?: ReturnType<typeof setTimeout>; metricsClosed?: Promise<void> };

/** The primary once set up: its workers, their restarts, the announcement that they listen, and the stop. */
class Primary {
  readonly #workers: WorkerRuntime;
  readonly #io: CliIo;
  readonly #config: ServerConfig;
  readonly #logger: JsonLogger;
  readonly #env: Record<string, string | undefined>;
  readonly #serveMetrics: MetricsServe | undefined;
  readonly #resolve: (code: number) => void;
  /** Every worker that has not exited, and whether it said it listens. */
  readonly #live = new Map<WorkerProcess, boolean>();
  /** When each restart of the last minute happened. */
  readonly #restarts: number[] = [];
  readonly #metrics: WorkerMetrics | undefined;
  #metricsServer: Promise<Served> | undefined;
  #listening = false;
  #stopping: Stopping | undefined;

  constructor(
    workers: WorkerRuntime,
    io: CliIo,
    config: ServerConfig,
    logger: JsonLogger,
    env: Record<string, string | undefined>,
    serveMetrics: MetricsServe | undefined,
    resolve: (code: number) => void,
  ) {
    this.#workers = workers;
    this.#io = io;
    this.#config = config;
    this.#logger = logger;
    this.#env = env;
    this.#serveMetrics = serveMetrics;
    this.#resolve = resolve;
    this.#metrics = serveMetrics ? new WorkerMetrics(() => [...this.#live].filter(([, ready]) => ready).map(([worker]) => worker)) : undefined;
  }

  run(): void {
    void this.#io.stopSignal?.then((signal) => {
      this.#logger.info({ event: 'shutdown', signal, workers: this.#live.size }, 'stopping the workers, which finish their in-flight requests');
      this.#logger.flush();
      this.#stopAll(0, signal);
    });
    for (let i = 0; i < this.#config.workers; i++) this.#start();
  }

  #start(replacing?: number): void {
    const worker = this.#workers.start(this.#env);
    this.#live.set(worker, false);
    worker.onMessage((message) => this.#received(worker, message, replacing));
    worker.onExit((code, signal, error) => this.#exited(worker, code, signal, error));
  }

  #received(worker: WorkerProcess, message: unknown, replacing: number | undefined): void {
    if (this.#metrics?.receive(message)) return;
    if ((message as Partial<FromWorker>)?.type !== 'merchant-api:ready') return;
    this.#live.set(worker, true);
    if (replacing !== undefined) this.#logger.info({ event: 'worker_restarted', pid: worker.pid, replaced: replacing });
    const count = this.#config.workers;
    if (this.#listening || this.#stopping || this.#live.size < count || [...this.#live.values()].includes(false)) return;
    this.#listening = true;
    // The first worker's lines, its first line stating how many workers listen.
    const [first = '', ...rest] = (message as { lines: string[] }).lines;
    void this.#announce([first.replace(/\)$/, `, ${count} workers)`), ...rest]);
  }

  #exited(worker: WorkerProcess, code: number | null, signal: string | null, error: Error | undefined): void {
    this.#live.delete(worker);
    if (this.#stopping) {
      if (code !== 0) this.#stopping.code = 1;
      if (this.#live.size === 0) this.#finish();
      return;
    }
    if (!this.#listening) {
      // Could not start: the worker printed why; a configuration problem (2) stays one.
      if (error) this.#io.err(`merchant-api serve failed: cannot start a worker: ${error.message}`);
      this.#stopAll(code === 2 ? 2 : 1);
      return;
    }
    const now = Date.now();
    while (this.#restarts.length && this.#restarts[0]! <= now - 60_000) this.#restarts.shift();
    const restart = this.#restarts.length < MAX_RESTARTS_PER_MINUTE;
    this.#logger.error(
      { event: 'worker_exit', pid: worker.pid, code, signal, restart },
      restart ? 'a worker stopped unexpectedly; starting another' : `a worker stopped unexpectedly, more than ${MAX_RESTARTS_PER_MINUTE} times within a minute: stopping`,
    );
    if (!restart) return this.#stopAll(1);
    this.#restarts.push(now);
    this.#start(worker.pid);
  }

  async #announce(lines: string[]): Promise<void> {
    const io = this.#io;
    const config = this.#config;
    if (this.#metrics) {
      try {
        this.#metricsServer = this.#serveMetrics!(this.#metrics.fetch);
        lines.splice(1, 0, `Metrics: ${(await this.#metricsServer).url}/metrics`);
        if (this.#stopping) return;
      } catch (error) {
        io.err(`merchant-api serve failed: cannot serve the metrics on METRICS_PORT ${config.metricsPort}: ${(error as Error).message}`);
        this.#metricsServer = undefined;
        return this.#stopAll(1);
      }
    }
    if (!config.cursorSecret) lines.push('CURSOR_SECRET is not set: page cursors work only until this server restarts (its workers share one random secret).');
    printBanner(io, lines);
    this.#logger.info({ event: 'workers_listening', pids: [...this.#live.keys()].map((each) => each.pid) });
    if (this.#metricsServer) this.#logger.info({ event: 'metrics_listening', url: `${(await this.#metricsServer).url}/metrics` });
    if (!config.cursorSecret) this.#logger.warn({ event: 'cursor_secret_unset', workers: config.workers }, 'page cursors work only until this server restarts (its workers share one random secret)');
  }

  #stopAll(code: number, signal = 'SIGTERM'): void {
    if (this.#stopping) return;
    const stopping: Stopping = { code, metricsClosed: this.#metricsServer?.then((served) => served.close()).catch(() => {}) };
    this.#stopping = stopping;
    for (const worker of this.#live.keys()) worker.send({ type: 'merchant-api:stop', signal });
    // Each worker lets in-flight requests finish for up to SHUTDOWN_TIMEOUT, then closes its storage; after that it is killed.
    stopping.timer = setTimeout(() => {
      for (const worker of this.#live.keys()) {
        this.#logger.error({ event: 'worker_killed', pid: worker.pid }, 'the worker did not stop in time');
        worker.kill('SIGKILL');
      }
      stopping.code = 1;
    }, this.#config.shutdownTimeout + EXIT_MARGIN_MS);
    if (this.#live.size === 0) this.#finish();
  }

  #finish(): void {
    const stopping = this.#stopping!;
    clearTimeout(stopping.timer);
    this.#logger.info({ event: 'stopped' });
    this.#logger.flush();
    void Promise.resolve(stopping.metricsClosed).then(() => this.#resolve(stopping.code));
  }
}

/** A port free on `hostname` now, for every worker to listen on. */
function freePort(hostname: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, hostname, () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
