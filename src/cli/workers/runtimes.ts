/**
 * What differs per runtime when the server runs as workers (docs/runtimes.md#workers), injected
 * into `serve` as a `WorkerRuntime` by node-cli.ts, bun-cli.ts and deno-cli.ts: on Node the workers
 * come from `node:cluster` and share the primary's listening socket; on Bun and Deno they are
 * processes of the same runtime and script (`spawnedWorkers`), each listening with `reusePort`.
 * Everything the runtimes share (the supervisor, the channel) is elsewhere, written once for all three.
 */
import type { Cluster } from 'node:cluster';
import { spawn } from 'node:child_process';
import process from 'node:process';
import { CliUsageError } from '../usage-error.js';
import { processChannel, WORKER_ARGUMENT, type ToWorker, type WorkerChannel } from './channel.js';

/** One worker process, as the primary sees it. */
export interface WorkerProcess {
  readonly pid: number | undefined;
  send(message: ToWorker): void;
  kill(signal: 'SIGKILL'): void;
  onMessage(listener: (message: unknown) => void): void;
  /** Called once: the process exited, or could not start (`error`). */
  onExit(listener: (code: number | null, signal: string | null, error?: Error) => void): void;
}

/** The runtime-specific half, given to `serve` by node-cli.ts, bun-cli.ts and deno-cli.ts. */
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
