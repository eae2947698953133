/**
 * The webhook dispatcher's metrics (docs/observability.md#metrics, docs/webhooks.md#operations):
 * attempts by outcome and event type, their duration, endpoints disabled by reason, and the outbox's
 * pending deliveries and the age of the oldest due one. Registered with the others by
 * `createMetrics`, so a server without a dispatcher shows them at zero (the alert rules read them).
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { OutboxStats } from '../storage/webhook-outbox.js';
import type { AttemptEvent } from '../webhooks/dispatcher.js';
import { WEBHOOK_EVENT_TYPES } from '../webhooks/events.js';

/** What the dispatcher reports to. */
export interface WebhookMetrics {
  /** One attempt recorded. */
  onAttempt(event: AttemptEvent): void;
  /** The outbox as last read. */
  setOutbox(stats: OutboxStats): void;
}

const DURATION_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30];

/**
 * `outboxPerProcess`: each process holds its own outbox (the memory storage's in-process queue), so
 * with WORKERS the pending deliveries of the workers add up; otherwise they share one.
 */
export function registerWebhookMetrics(registry: Registry, options: { outboxPerProcess?: boolean } = {}): WebhookMetrics {
  const registers = [registry];
  const attempts = new Counter({ name: 'merchant_api_webhook_attempts_total', help: 'Webhook delivery attempts, by outcome (delivered, retry, failed) and event type.', labelNames: ['outcome', 'type'], registers });
  const duration = new Histogram({ name: 'merchant_api_webhook_attempt_duration_seconds', help: 'One webhook attempt, resolving the name to the last byte read.', buckets: DURATION_BUCKETS, registers });
  const disabled = new Counter({ name: 'merchant_api_webhook_endpoints_disabled_total', help: 'Webhook endpoints disabled by the dispatcher, by reason (gone: a 410; failing: every attempt failed too long).', labelNames: ['reason'], registers });
  // On MySQL these two describe the one outbox every instance shares, not the work of this process:
  // with WORKERS, the primary merges its workers' answers (src/cli/workers/worker-metrics.ts) by the
  // gauge's aggregator, and a sum would count the outbox once per worker. Every worker reads the same
  // tables (each every 15 s): the max reports the outbox once, the higher of recent readings. The
  // memory storage's queues are one per process: their pending deliveries add up.
  const pending = new Gauge({ name: 'merchant_api_webhook_pending', help: 'Webhook deliveries not yet delivered nor given up, due or scheduled.', aggregator: options.outboxPerProcess ? 'sum' : 'max', registers });
  const oldest = new Gauge({ name: 'merchant_api_webhook_oldest_due_seconds', help: 'How long the oldest due webhook delivery has waited past its time (0: none is due).', aggregator: 'max', registers });
  // Every series at 0 from the start: a rule reading increase() sees the first disabling, and panels have their labels.
  for (const reason of ['gone', 'failing']) disabled.inc({ reason }, 0);
  for (const outcome of ['delivered', 'retry', 'failed']) for (const type of WEBHOOK_EVENT_TYPES) attempts.inc({ outcome, type }, 0);
  const types = new Set<string>(WEBHOOK_EVENT_TYPES);
  return {
    onAttempt(event) {
      // The type is one of ours; anything else (a row written by hand) is counted as other.
      attempts.inc({ outcome: event.outcome, type: types.has(event.type) ? event.type : 'other' });
      duration.observe(event.durationMs / 1000);
      if (event.disabledEndpoint) disabled.inc({ reason: event.disabledEndpoint });
    },
    setOutbox(stats) {
      pending.set(stats.pending);
      oldest.set(stats.oldestDueAgeMs / 1000);
    },
  };
}
