/**
 * METRICS_PORT with WORKERS: the primary serves one `/metrics` for all its
 * workers (docs/runtimes.md#workers). On a scrape it asks every worker over
 * the IPC channel the workers already have (node:cluster on Node, child
 * processes on Bun and Deno) for its registry as JSON, and merges the
 * answers with prom-client's `AggregatorRegistry.aggregate`: counters and
 * histograms are summed, so `merchant_api_requests_total` counts every
 * request whichever worker answered it. prom-client's own cluster support
 * needs node:cluster, which Bun's and Deno's workers are not.
 */
import { AggregatorRegistry } from 'prom-client';
import { answerScrape } from '../../observe/metrics.js';
import { METRICS_ANSWER, METRICS_REQUEST, type MetricsAnswer, type MetricsRequest, type WorkerMetricsJson } from './metrics-messages.js';

export { METRICS_ANSWER, METRICS_REQUEST, type MetricsAnswer, type MetricsRequest, type WorkerMetricsJson } from './metrics-messages.js';

/** How long a scrape waits for the workers; one that has not answered by then is left out (and said so). */
const SCRAPE_TIMEOUT_MS = 2000;

interface Scrape {
  answers: WorkerMetricsJson[];
  waiting: number;
  done(): void;
}

/** The primary's half: asks the workers it is given, and merges what they answer. */
export class WorkerMetrics {
  readonly #scrapes = new Map<number, Scrape>();
  #nextId = 0;

  constructor(private readonly workers: () => { send(message: MetricsRequest): void }[]) {}

  /** Takes a worker's message if it answers a scrape; false for any other message. */
  receive(message: unknown): boolean {
    const answer = message as Partial<MetricsAnswer> | undefined;
    if (answer?.type !== METRICS_ANSWER || typeof answer.id !== 'number') return false;
    const scrape = this.#scrapes.get(answer.id);
    if (scrape && Array.isArray(answer.metrics)) {
      scrape.answers.push(answer.metrics);
      if (--scrape.waiting === 0) scrape.done();
    }
    return true;
  }

  /** Answers `GET /metrics` with every worker's metrics merged; anything else 404 or 405, as a single process does. */
  readonly fetch = (request: Request): Promise<Response> =>
    answerScrape(request, async () => {
      const { answers, asked } = await this.#collect();
      const registry = AggregatorRegistry.aggregate(answers);
      // A worker that did not answer in time (starting, stopping, stuck) is missing from the sums: say how many did.
      return { text: `# merchant-api: ${answers.length} of ${asked} workers answered this scrape\n${await registry.metrics()}`, contentType: registry.contentType };
    });

  #collect(): Promise<{ answers: WorkerMetricsJson[]; asked: number }> {
    const workers = this.workers();
    const id = ++this.#nextId;
    return new Promise((resolve) => {
      const scrape: Scrape = {
        answers: [],
        waiting: workers.length,
        done: () => {
          clearTimeout(timer);
          this.#scrapes.delete(id);
          resolve({ answers: scrape.answers, asked: workers.length });
        },
      };
      const timer = setTimeout(() => scrape.done(), SCRAPE_TIMEOUT_MS);
      this.#scrapes.set(id, scrape);
      if (workers.length === 0) return scrape.done();
      for (const worker of workers) worker.send({ type: METRICS_REQUEST, id });
    });
  }
}
