/**
 * What the primary and its workers say to each other (docs/runtimes.md#workers), over the IPC
 * channel every runtime's `node:child_process` offers: the primary starts a process as its worker
 * with `serve --worker`; a worker says when it listens (`ready`, with the lines it would have
 * printed); the primary tells it to stop (`stop`, with the signal's name), so a worker never gets
 * a second signal that would cut it short; and with METRICS_PORT the primary asks for its metrics
 * on each scrape (worker-metrics.ts). Apart from the runtimes and the supervisor because both
 * ends speak it: the worker through `WorkerChannel`, the primary through `WorkerProcess`.
 */
import process from 'node:process';
import { CliUsageError } from '../usage-error.js';
import { METRICS_ANSWER, METRICS_REQUEST, type MetricsAnswer, type MetricsRequest, type WorkerMetricsJson } from './metrics-messages.js';

/** The argument that makes `serve` a worker (`merchant-api serve --worker`); only the primary passes it. */
export const WORKER_ARGUMENT = '--worker';

/** What the primary sends a worker. */
export type ToWorker = { type: 'merchant-api:stop'; signal: string } | MetricsRequest;
/** What a worker sends the primary. */
export type FromWorker = { type: 'merchant-api:ready'; lines: string[] } | MetricsAnswer;

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

/** A worker's side of the channel, on the IPC channel of this process (`process.send`, `process.on('message')`). */
export function processChannel(reusePort: boolean): WorkerChannel {
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

/**
 * For `serve --worker`: the channel of the runtime's workers (a `WorkerRuntime`, typed here by the
 * one method this needs, so this file does not import the runtimes that import it), or a usage
 * error when no primary started this process.
 */
export function workerChannel(workers: { channel(): WorkerChannel | undefined } | undefined): WorkerChannel {
  const channel = workers?.channel();
  if (!channel) throw new CliUsageError(`serve ${WORKER_ARGUMENT} is how the server starts its own workers (WORKERS); run merchant-api serve.`);
  return channel;
}
