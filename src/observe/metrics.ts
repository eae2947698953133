/**
 * Prometheus metrics for the handler, through prom-client (which runs on
 * Node, Bun and Deno): `merchant-api/metrics` (docs/observability.md#metrics).
 * No label takes a value an outsider chooses: routes are patterns, methods
 * outside the HTTP set are `OTHER`, and merchant ids only when asked for.
 *
 * @example
 * const metrics = createMetrics();
 * const api = createMerchantApi({ storage, hooks: metrics.hooks });
 * // serve metrics.fetch on a port that is not public
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { MerchantApiHooks } from '../http/hooks.js';
import { answerScrape } from './metrics-endpoint.js';
import { registerWebhookMetrics, type WebhookMetrics } from './webhook-metrics.js';

export type { WebhookMetrics };

export { answerScrape };

export interface MetricsOptions {
  /** Where the metrics are registered. Default: a new registry of their own. */
  registry?: Registry;
  /**
   * Also the runtime's process metrics (CPU, memory, event loop lag). Default:
   * true with a registry of their own, false with yours, which is the
   * caller's to fill (most hosts already collect them there). When true and
   * the registry has them already, they are left as they are.
   */
  processMetrics?: boolean;
  /** Add a `merchant` label to the request counter. Default false: merchant ids are not for every scraper. */
  merchantLabel?: boolean;
  /** How many salts the storage holds, for `merchant_api_salts_stored` (the memory storage's `saltCount`); without it the metric is left out. */
  saltCount?: () => number | Promise<number>;
  /** The most salts the storage may hold, for `merchant_api_salts_capacity` (the memory storage's `maxSalts`): with `saltCount`, how full it is. */
  saltCapacity?: number;
  /**
   * Write conflicts of the process so far, for `merchant_api_storage_write_conflicts_total` (MySQL's
   * `writeConflictCounts`: deadlocks, and on Galera certification failures): retried, and failed
   * after the retries. Without it the metric is left out.
   */
  writeConflicts?: () => { retried: number; failed: number };
  /**
   * Failures of the process so far that the shared throttle store could not count because it holds
   * as many counters as it may, for `merchant_api_throttle_full_total` (docs/scaling.md#the-throttles-keys):
   * those are counted by each instance alone. Without it the metric is left out.
   */
  throttleFull?: () => number;
  /** Webhook deliveries the memory storage's queue dropped for want of room (docs/webhooks.md#on-the-memory-storage). */
  webhookDropped?: () => number;
  /** Each process has its own webhook outbox (the memory storage): with WORKERS, `merchant_api_webhook_pending` is summed, not the max of one shared outbox's readings. */
  webhookOutboxPerProcess?: boolean;
}

export interface Metrics {
  readonly registry: Registry;
  /** Pass to `createMerchantApi({ hooks })`. */
  readonly hooks: MerchantApiHooks;
  /** Answers `GET /metrics` with the text exposition format; anything else 404. */
  fetch(request: Request): Promise<Response>;
  /** What the webhook dispatcher reports to (docs/webhooks.md#operations). */
  readonly webhooks: WebhookMetrics;
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'CONNECT', 'TRACE']);
// Seconds: from the fastest in-memory answer to a slow storage call near its timeout.
const BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = options.registry ?? new Registry();
  const registers = [registry];
  // prom-client throws on a second registration of a name: a host that collects the defaults itself keeps its own.
  const processMetrics = options.processMetrics ?? options.registry === undefined;
  if (processMetrics && !registry.getSingleMetric('process_cpu_user_seconds_total')) collectDefaultMetrics({ register: registry });
  const merchantLabel = options.merchantLabel === true;

  const requests = new Counter({
    name: 'merchant_api_requests_total',
    help: 'Requests answered, by route pattern, method, status and the mode of the key (live, or test: docs/test-mode.md).',
    labelNames: merchantLabel ? ['route', 'method', 'status', 'mode', 'merchant'] : ['route', 'method', 'status', 'mode'],
    registers,
  });
  const duration = new Histogram({
    name: 'merchant_api_request_duration_seconds',
    help: 'From arrival to the last byte handed to the runtime, by route pattern (refusals held back on purpose are in merchant_api_held_refusal_duration_seconds).',
    labelNames: ['route'],
    buckets: BUCKETS,
    registers,
  });
  // A refusal held back on purpose (late refusals) measures the hold, not the service: kept out of the latency above.
  const heldDuration = new Histogram({
    name: 'merchant_api_held_refusal_duration_seconds',
    help: 'Refusals held back on purpose for a client that ignored Retry-After (docs/security.md), by route pattern: not in merchant_api_request_duration_seconds.',
    labelNames: ['route'],
    buckets: BUCKETS,
    registers,
  });
  const authFailures = new Counter({ name: 'merchant_api_auth_failures_total', help: 'Failed authentications, by reason.', labelNames: ['reason'], registers });
  const throttled = new Counter({ name: 'merchant_api_throttled_total', help: 'Requests refused by a limit, by reason.', labelNames: ['reason'], registers });
  const storageDuration = new Histogram({
    name: 'merchant_api_storage_operation_duration_seconds',
    help: 'Storage calls, by operation.',
    labelNames: ['operation'],
    buckets: BUCKETS,
    registers,
  });
  const storageErrors = new Counter({ name: 'merchant_api_storage_errors_total', help: 'Storage calls that failed or timed out, by operation.', labelNames: ['operation'], registers });
  // Only ever an error code of MerchantApiErrorCode or of a /validatesignature refusal (src/routes/validate-signature.ts):
  // a short fixed list, so a label an outsider cannot grow.
  const errors = new Counter({ name: 'merchant_api_errors_total', help: 'Error answers, by error code (docs/protocol.md#errors).', labelNames: ['code'], registers });
  const saltCount = options.saltCount;
  // Only where the storage can count: a 0 elsewhere would read as an empty store.
  if (saltCount) {
    new Gauge({
      name: 'merchant_api_salts_stored',
      help: 'Salts the storage holds for replay protection (only where the storage can tell).',
      registers,
      async collect(this: Gauge) {
        this.set(await saltCount());
      },
    });
  }
  const writeConflicts = options.writeConflicts;
  if (writeConflicts) {
    new Counter({
      name: 'merchant_api_storage_write_conflicts_total',
      help: 'Storage writes that lost a conflict (a deadlock, or a Galera certification failure), by outcome: retried, or failed after the retries.',
      labelNames: ['outcome'],
      registers,
      collect(this: Counter) {
        const { retried, failed } = writeConflicts();
        this.reset();
        this.inc({ outcome: 'retried' }, retried);
        this.inc({ outcome: 'failed' }, failed);
      },
    });
  }
  if (options.throttleFull) {
    countedElsewhere(registers, options.throttleFull, 'merchant_api_throttle_full_total', 'Failed authentications the shared throttle store could not count because it holds as many counters as it may (AUTH_MAX_ENTRIES): counted by each instance alone.');
  }
  if (options.webhookDropped) {
    countedElsewhere(registers, options.webhookDropped, 'merchant_api_webhook_dropped_total', 'Webhook deliveries the memory storage dropped because its in-process queue had no room (the change itself was kept).');
  }
  const saltCapacity = new Gauge({ name: 'merchant_api_salts_capacity', help: 'The most salts the storage may hold (where it has a bound: MAX_SALTS of the memory storage), else 0.', registers });
  if (options.saltCapacity !== undefined) saltCapacity.set(options.saltCapacity);

  // Label children cached by key: prom-client hashes the label object on every call otherwise.
  const requestChildren = new Map<string, Counter.Internal>();
  const durationChildren = new Map<string, Histogram.Internal<string>>();
  const storageChildren = new Map<string, Histogram.Internal<string>>();

  const hooks: MerchantApiHooks = {
    onFinish(ctx, summary) {
      const route = ctx.route ?? 'unmatched';
      const method = METHODS.has(ctx.method) ? ctx.method : 'OTHER';
      const merchant = merchantLabel ? (ctx.merchantId ?? '') : undefined;
      const key = `${route} ${method} ${summary.status} ${ctx.mode} ${merchant ?? ''}`;
      let child = requestChildren.get(key);
      if (!child) {
        const labels: Record<string, string> = { route, method, status: String(summary.status), mode: ctx.mode };
        if (merchant !== undefined) labels.merchant = merchant;
        child = requests.labels(labels);
        requestChildren.set(key, child);
      }
      child.inc();
      if (ctx.heldMs !== undefined) {
        heldDuration.observe({ route }, summary.durationMs / 1000);
      } else {
        let timer = durationChildren.get(route);
        if (!timer) durationChildren.set(route, (timer = duration.labels({ route })));
        timer.observe(summary.durationMs / 1000);
      }
      if (ctx.errorCode !== undefined) errors.inc({ code: ctx.errorCode });
      if (ctx.authFailure !== undefined) authFailures.inc({ reason: ctx.authFailure });
      if (ctx.throttled !== undefined) throttled.inc({ reason: ctx.throttled });
    },
    onStorageCall(_ctx, operation) {
      const started = performance.now();
      let timer = storageChildren.get(operation);
      if (!timer) storageChildren.set(operation, (timer = storageDuration.labels({ operation })));
      const child = timer;
      return (error) => {
        child.observe((performance.now() - started) / 1000);
        if (error !== undefined) storageErrors.inc({ operation });
      };
    },
  };

  const webhooks = registerWebhookMetrics(registry, { outboxPerProcess: options.webhookOutboxPerProcess });

  return {
    registry,
    hooks,
    webhooks,
    fetch: (request) => answerScrape(request, async () => ({ text: await registry.metrics(), contentType: registry.contentType })),
  };
}

/** A counter whose count another part of the process keeps: read at each scrape. */
function countedElsewhere(registers: Registry[], count: () => number, name: string, help: string): void {
  new Counter({
    name,
    help,
    registers,
    collect(this: Counter) {
      this.reset();
      this.inc(count());
    },
  });
}
