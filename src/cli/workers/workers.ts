/**
 * WORKERS=N: the standalone server as N worker processes on one port, run
 * by a primary that starts them, prints the one `listening on` line once
 * every worker listens, restarts a worker that dies (at most
 * MAX_RESTARTS_PER_MINUTE), and on SIGTERM/SIGINT stops them all gracefully
 * (docs/runtimes.md#workers).
 *
 * What differs per runtime is injected (`WorkerRuntime`): on Node the workers
 * come from `node:cluster` and share the primary's listening socket; on Bun
 * and Deno they are processes of the same runtime and script
 * (`spawnedWorkers`), each listening with `reusePort`. Everything else is
 * here, for all three. The primary and its workers talk over the IPC channel
 * every runtime's `node:child_process` offers: a worker says when it listens
 * (`ready`), the primary tells it to stop (`stop`, with the signal's name),
 * so a worker never gets a second signal that would cut it short, and with
 * METRICS_PORT asks for its metrics on each scrape (worker-metrics.ts).
 */
import type { Cluster } from 'node:cluster';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import process from 'node:process';
import { createJsonLogger } from '../../observe/logger.js';
import { DEFAULT_SHUTDOWN_TIMEOUT_MS } from '../../../adapters/serve-options.js';
import type { ServerConfig } from '../config.js';
import type { CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';
import { METRICS_ANSWER, METRICS_REQUEST, WorkerMetrics, type MetricsAnswer, type MetricsRequest, type WorkerMetricsJson } from './worker-metrics.js';
import type { Served } from '../../../adapters/serve-options.js';

/** A worker that dies is started again at most this often a minute; once more and the server stops (exit 1). */
export const MAX_RESTARTS_PER_MINUTE = 5;
/** After the adapters' graceful close (8 s), the time a worker has to close its storage and exit before it is killed. */
const EXIT_MARGIN_MS = 2000;
/** The argument that makes `serve` a worker (`merchant-api serve --worker`); only the primary passes it. */
export const WORKER_ARGUMENT = '--worker';

type ToWorker = { type: 'merchant-api:stop'; signal: string } | MetricsRequest;
type FromWorker = { type: 'merchant-api:ready'; lines: string[] } | MetricsAnswer;

/** One worker process, as the primary sees it. */
export interface WorkerProcess {
  readonly pid: number | undefined;
  send(message: ToWorker): void;
  kill(signal: 'SIGKILL'): void;
  onMessage(listener: (message: unknown) => void): void;
  /** Called once: the process exited, or could not start (`error`). */
  onExit(listener: (code: number | null, signal: string | null, error?: Error) => void): void;
}

/** A worker's side: what the primary asks of it. */
export interface WorkerChannel {
  /** Whether the worker listens with `reusePort` (Bun, Deno) rather than on a socket the primary shares (node:cluster). */
  reusePort: boolean;
  /** Tells the primary this worker listens, with the lines it would have printed. */
  ready(lines: string[]): void;
  /** Resolves with the signal's name when the primary asks this worker to stop. */
  stopRequested: Promise<string>;
  /** Answers the primary's scrapes (METRICS_PORT) with what `collect` gives. */
  answerMetrics(collect: () => Promise<WorkerMetricsJson>): void;
}

/** The runtime-specific half, given to `serve` by main.ts, main-bun.ts and main-deno.ts. */
export interface WorkerRuntime {
  /** Whether each worker listens by itself with `reusePort`, so the primary must pick the port for PORT=0. */
  reusePort: boolean;
  /** Throws a CliUsageError saying why workers cannot run here, before any is started. */
  check(): void;
  /** Starts one worker (`serve --worker`) with this environment. */
  start(env: Record<string, string | undefined>): WorkerProcess;
  /** In a worker, its channel to the primary; undefined when this process was not started as one. */
  channel(): WorkerChannel | undefined;
}

/** Node: `node:cluster` (passed in, so Bun and Deno builds never load it); the workers share the primary's socket. */
export function clusterWorkers(cluster: Cluster): WorkerRuntime {
  return {
    // PORT=0 stays 0: node:cluster gives every worker, restarted ones too, the one port the primary picked.
    reusePort: false,
    check() {},
    start(env) {
      cluster.setupPrimary({ args: ['serve', WORKER_ARGUMENT] });
      const worker = cluster.fork(env);
      return {
        get pid() {
          return worker.process.pid;
        },
        send: (message) => void worker.send(message, () => {}),
        kill: (signal) => void worker.process.kill(signal),
        onMessage: (listener) => void worker.on('message', listener),
        onExit: (listener) => {
          const once = onlyOnce(listener);
          worker.once('exit', (code, signal) => once(code, signal));
          worker.process.once('error', (error) => once(null, null, error));
        },
      };
    },
    // A cluster worker exits by itself (code 0) when the primary disappears.
    channel: () => (cluster.isWorker ? processChannel(false) : undefined),
  };
}

/**
 * Bun and Deno: each worker is `command()` (this runtime, its flags, this
 * script, `serve --worker`), started with an IPC channel; the workers listen
 * with `reusePort`. `check` adds the runtime's own reasons to refuse.
 */
export function spawnedWorkers(command: () => [string, string[]], check: () => void = () => {}): WorkerRuntime {
  return {
    reusePort: true,
    check() {
      // Elsewhere SO_REUSEPORT does not spread connections (macOS gives them all to one process) or does not exist (Windows).
      if (process.platform !== 'linux') throw new CliUsageError(`WORKERS above 1 on ${process.platform} is not supported with this runtime: it needs SO_REUSEPORT as Linux has it. Run one process per port behind a proxy, or use Node.`);
      check();
    },
    start(env) {
      const [file, args] = command();
      const child = spawn(file, args, { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      return {
        get pid() {
          return child.pid;
        },
        send: (message) => {
          if (child.connected) child.send(message, () => {});
        },
        kill: (signal) => void child.kill(signal),
        onMessage: (listener) => void child.on('message', listener),
        onExit: (listener) => {
          const once = onlyOnce(listener);
          child.once('exit', (code, signal) => once(code, signal));
          child.once('error', (error) => once(null, null, error));
        },
      };
    },
    channel() {
      if (typeof process.send !== 'function') return undefined;
      // The primary is gone (its IPC channel closed): stop at once, as a second signal would, rather than serve orphaned.
      process.once('disconnect', () => process.exit(1));
      return processChannel(true);
    },
  };
}

/** 'exit' and 'error' may both come for one process; the primary must count it once. */
function onlyOnce<T extends unknown[]>(listener: (...args: T) => void): (...args: T) => void {
  let called = false;
  return (...args) => {
    if (called) return;
    called = true;
    listener(...args);
  };
}

function processChannel(reusePort: boolean): WorkerChannel {
  let collect: (() => Promise<WorkerMetricsJson>) | undefined;
  const stopRequested = new Promise<string>((resolve) => {
    process.on('message', (message: Partial<ToWorker>) => {
      if (message?.type === 'merchant-api:stop') resolve(String(message.signal));
      else if (message?.type === METRICS_REQUEST && collect) {
        const id = message.id!;
        void collect().then(
          (metrics) => process.connected && process.send!({ type: METRICS_ANSWER, id, metrics } satisfies FromWorker, () => {}),
          () => {},
        );
      }
    });
  });
  return {
    reusePort,
    ready: (lines) => void process.send!({ type: 'merchant-api:ready', lines } satisfies FromWorker),
    stopRequested,
    answerMetrics(collector) {
      collect = collector;
    },
  };
}

/** For `serve --worker`: the channel, or a usage error when no primary started this process. */
export function workerChannel(workers: WorkerRuntime | undefined): WorkerChannel {
  const channel = workers?.channel();
  if (!channel) throw new CliUsageError(`serve ${WORKER_ARGUMENT} is how the server starts its own workers (WORKERS); run merchant-api serve.`);
  return channel;
}

/** The largest write a pipe keeps whole when several processes write to it (POSIX PIPE_BUF on Linux). */
const PIPE_BUF = 4096;

/**
 * A worker's log writer: the logger hands over every line of an event-loop
 * turn at once, and a write of more than PIPE_BUF bytes to the pipe the
 * workers share may be interleaved with another worker's, cutting JSON
 * lines in two. So the lines go out in writes of at most PIPE_BUF bytes,
 * each ending at a line's end (a single longer line is written alone).
 * `out` appends the newline, as `CliIo.out` does.
 */
export function wholeLineWriter(out: (text: string) => void): (lines: string) => void {
  return (lines) => {
    const text = lines.endsWith('\n') ? lines.slice(0, -1) : lines;
    if (utf8Length(text, PIPE_BUF) < PIPE_BUF) return out(text);
    let chunk = '';
    let size = 0;
    for (const line of text.split('\n')) {
      const length = utf8Length(line, Infinity) + 1;
      if (chunk !== '' && size + length > PIPE_BUF) {
        out(chunk);
        chunk = '';
        size = 0;
      }
      chunk = chunk === '' ? line : `${chunk}\n${line}`;
      size += length;
    }
    if (chunk !== '') out(chunk);
  };
}

/** UTF-8 bytes of `text`, counting stops once `limit` is reached. */
function utf8Length(text: string, limit: number): number {
  let bytes = 0;
  for (let i = 0; i < text.length && bytes < limit; i++) {
    const code = text.charCodeAt(i);
    // A surrogate pair is 4 bytes: 2 for each half.
    bytes += code < 0x80 ? 1 : code < 0x800 ? 2 : code >= 0xd800 && code <= 0xdfff ? 2 : 3;
  }
  return bytes;
}

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
  config.mysql.masterKey();
  const logger = createJsonLogger({ level: config.logLevel, write: (lines) => io.out(lines.slice(0, -1)) });
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
      // Each worker lets in-flight requests finish for up to 8 s, then closes its storage; after that it is killed.
      stopping.timer = setTimeout(() => {
        for (const worker of live.keys()) {
          logger.error({ event: 'worker_killed', pid: worker.pid }, 'the worker did not stop in time');
          worker.kill('SIGKILL');
        }
        stopping!.code = 1;
      }, DEFAULT_SHUTDOWN_TIMEOUT_MS + EXIT_MARGIN_MS);
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
      io.out(lines.join('\n'));
      logger.info({ event: 'workers_listening', pids: [...live.keys()].map((each) => each.pid) });
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
