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
  serveMetrics?: (fetch: (request: Request) => Promise<Response>) => Promise<Served>,
): Promise<number> {
  const count = config.workers;
  if (!workers) throw new CliUsageError(`WORKERS=${count} is not supported on ${runtimeName}.`);
  workers.check();
  // A missing or wrong MASTER_KEY: one message before any worker starts, not one per worker.
  if (config.databaseUrl) config.mysql.masterKey();
  const logger = createJsonLogger({ level: config.logLevel, write: stampPid(process.pid, (lines) => io.out(lines.slice(0, -1))) });
  // PORT=0 with reusePort: one free port for all of them, picked here (node:cluster shares its own).
  const port = workers.reusePort && config.port === 0 ? await freePort(config.hostname) : config.port;
  // Without CURSOR_SECRET each process would seal cursors with its own random key, and page 2 would fail on another worker.
  const env = { ...io.env, PORT: String(port), ...(config.cursorSecret ? {} : { CURSOR_SECRET: randomBytes(32).toString('base64url') }) };

  return new Promise<number>((resolve) => {
    const live = new Map<WorkerProcess, boolean>();
    const restarts: number[] = [];
    let listening = false;
    let stopping: { code: number; timer?: ReturnType<typeof setTimeout>; metricsClosed?: Promise<void> } | undefined;
    // METRICS_PORT: one scrape for all workers, served here.
    const metrics = config.metricsPort === undefined || !serveMetrics ? undefined : new WorkerMetrics(() => [...live].filter(([, ready]) => ready).map(([worker]) => worker));
    let metricsServer: Promise<Served> | undefined;

    const finish = () => {
      clearTimeout(stopping!.timer);
      logger.info({ event: 'stopped' });
      logger.flush();
      void Promise.resolve(stopping!.metricsClosed).then(() => resolve(stopping!.code));
    };
    const stopAll = (code: number, signal = 'SIGTERM') => {
      if (stopping) return;
      stopping = { code, metricsClosed: metricsServer?.then((served) => served.close()).catch(() => {}) };
      for (const worker of live.keys()) worker.send({ type: 'merchant-api:stop', signal });
      // Each worker lets in-flight requests finish for up to SHUTDOWN_TIMEOUT, then closes its storage; after that it is killed.
      stopping.timer = setTimeout(() => {
        for (const worker of live.keys()) {
          logger.error({ event: 'worker_killed', pid: worker.pid }, 'the worker did not stop in time');
          worker.kill('SIGKILL');
        }
        stopping!.code = 1;
      }, config.shutdownTimeout + EXIT_MARGIN_MS);
      if (live.size === 0) finish();
    };

    const start = (replacing?: number) => {
      const worker = workers.start(env);
      live.set(worker, false);
      worker.onMessage((message) => {
        if (metrics?.receive(message)) return;
        if ((message as Partial<FromWorker>)?.type !== 'merchant-api:ready') return;
        live.set(worker, true);
        if (replacing !== undefined) logger.info({ event: 'worker_restarted', pid: worker.pid, replaced: replacing });
        if (listening || stopping || live.size < count || [...live.values()].includes(false)) return;
        listening = true;
        // The first worker's lines, its first line stating how many workers listen.
        const [first = '', ...rest] = (message as { lines: string[] }).lines;
        void announce([first.replace(/\)$/, `, ${count} workers)`), ...rest]);
      });
      worker.onExit((code, signal, error) => {
        live.delete(worker);
        if (stopping) {
          if (code !== 0) stopping.code = 1;
          if (live.size === 0) finish();
          return;
        }
        if (!listening) {
          // Could not start: the worker printed why; a configuration problem (2) stays one.
          if (error) io.err(`merchant-api serve failed: cannot start a worker: ${error.message}`);
          stopAll(code === 2 ? 2 : 1);
          return;
        }
        const now = Date.now();
        while (restarts.length && restarts[0]! <= now - 60_000) restarts.shift();
        const restart = restarts.length < MAX_RESTARTS_PER_MINUTE;
        logger.error(
          { event: 'worker_exit', pid: worker.pid, code, signal, restart },
          restart ? 'a worker stopped unexpectedly; starting another' : `a worker stopped unexpectedly, more than ${MAX_RESTARTS_PER_MINUTE} times within a minute: stopping`,
        );
        if (!restart) return stopAll(1);
        restarts.push(now);
        start(worker.pid);
      });
    };

    const announce = async (lines: string[]) => {
      if (metrics) {
        try {
          metricsServer = serveMetrics!(metrics.fetch);
          lines.splice(1, 0, `Metrics: ${(await metricsServer).url}/metrics`);
          if (stopping) return;
        } catch (error) {
          io.err(`merchant-api serve failed: cannot serve the metrics on METRICS_PORT ${config.metricsPort}: ${(error as Error).message}`);
          metricsServer = undefined;
          return stopAll(1);
        }
      }
      if (!config.cursorSecret) lines.push('CURSOR_SECRET is not set: page cursors work only until this server restarts (its workers share one random secret).');
      printBanner(io, lines);
      logger.info({ event: 'workers_listening', pids: [...live.keys()].map((each) => each.pid) });
      if (metricsServer) logger.info({ event: 'metrics_listening', url: `${(await metricsServer).url}/metrics` });
      if (!config.cursorSecret) logger.warn({ event: 'cursor_secret_unset', workers: count }, 'page cursors work only until this server restarts (its workers share one random secret)');
    };

    void io.stopSignal?.then((signal) => {
      logger.info({ event: 'shutdown', signal, workers: live.size }, 'stopping the workers, which finish their in-flight requests');
      logger.flush();
      stopAll(0, signal);
    });
    for (let i = 0; i < count; i++) start();
  });
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
