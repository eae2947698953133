/**
 * The webhook dispatcher `serve` runs (docs/webhooks.md#delivery), over whichever outbox its
 * storage has: MySQL's (`commands/mysql-webhook.ts` opens it on a pool of its own) or the memory
 * storage's queue. Attempts are logged as `webhook_attempt` events (ids, status, duration, attempt
 * number: never the secret nor the body), a disabled endpoint as `webhook_endpoint_disabled`; it
 * warns at start while the address rules are lifted, and once on Deno without `--allow-sys` when an
 * https attempt fails for it; the outbox is read every 15 s for the metrics
 * and `/healthz`.
 */
import type { HealthPart, Logger } from '../index.js';
import type { WebhookMetrics } from '../observe/metrics.js';
import { WebhookDispatcher, type DispatcherHealth, type OutboxStats, type WebhookOutbox } from '../cli-internal.js';
import type { CliIo } from './io.js';
import type { WebhookConfig } from './webhook-config.js';

/** The dispatcher of a `serve` instance. */
export interface RunningDispatcher {
  stop(): Promise<void>;
  health(): DispatcherHealth;
  /** The `webhooks` part of `/healthz`'s details: running, in flight, and the outbox as of the last read (every 15 s). */
  healthPart(): HealthPart;
}

/** Starts the dispatcher over `outbox`; `onStop` releases what the outbox holds (a pool). */
export function runWebhookDispatcher(outbox: WebhookOutbox, settings: WebhookConfig, io: CliIo, logger: Logger, metrics?: WebhookMetrics, onStop?: () => Promise<void>): RunningDispatcher {
  if (settings.allowPrivate || settings.allowHttp) {
    const lifted = [settings.allowPrivate && 'WEBHOOK_ALLOW_PRIVATE', settings.allowHttp && 'WEBHOOK_ALLOW_HTTP'].filter(Boolean).join(' and ');
    logger.warn({ event: 'webhook_address_rules_lifted', allow_private: settings.allowPrivate, allow_http: settings.allowHttp }, `${lifted} set: webhooks may reach private addresses or plain http; for development and tests only`);
    io.err(`Warning: ${lifted} set: webhooks may be sent to private addresses or over plain http. For development and tests only.`);
  }
  // Deno without --allow-sys (send-attempt.ts): said once, at the first https attempt it fails, so
  // that a server with no https endpoint is not warned about it.
  let warnedTls = false;
  const warnTls = () => {
    if (warnedTls) return;
    warnedTls = true;
    logger.warn({ event: 'webhook_https_not_permitted' }, 'Deno without --allow-sys: https webhook attempts fail until the server runs with it');
    io.err('Warning: on Deno, webhooks to https endpoints need --allow-sys (its node:tls reads the root certificates under it); until then every https attempt fails and is retried.');
  };
  const dispatcher = new WebhookDispatcher({
    outbox,
    policy: { allowPrivate: settings.allowPrivate, allowHttp: settings.allowHttp },
    retrySchedule: settings.retrySchedule,
    timeoutMs: settings.timeoutMs,
    // Longer than any attempt: a live instance's claim is never taken over.
    leaseMs: Math.max(4 * settings.timeoutMs, 2000),
    disableAfterFailingMs: settings.disableAfterFailingMs,
    retentionMs: settings.retentionMs,
    onAttempt: (attempt) => {
      metrics?.onAttempt(attempt);
      const fields = { event: 'webhook_attempt', endpoint_id: attempt.endpointId, event_id: attempt.eventId, merchant_id: attempt.merchantId, type: attempt.type, attempt: attempt.attempt, outcome: attempt.outcome, status: attempt.status ?? null, error: attempt.error ?? null, duration_ms: Math.round(attempt.durationMs) };
      if (attempt.outcome === 'delivered') logger.info(fields);
      else logger.warn(fields);
      if (attempt.error === 'tls_roots_not_permitted') warnTls();
      if (attempt.disabledEndpoint) logger.warn({ event: 'webhook_endpoint_disabled', endpoint_id: attempt.endpointId, merchant_id: attempt.merchantId, reason: attempt.disabledEndpoint });
    },
    onError: (error) => logger.warn({ event: 'webhook_dispatch_failed', error: error instanceof Error ? error.name : 'error', code: (error as { code?: string }).code ?? null }),
  });
  dispatcher.start();
  // The pending count and the oldest due delivery, for the metrics: one read every 15 s.
  // Read for /healthz too, so with or without metrics.
  let stats: (OutboxStats & { dropped?: number }) | undefined;
  const readStats = async () => {
    try {
      stats = await dispatcher.stats();
      metrics?.setOutbox(stats);
    } catch {
      // The database away: the next read tells; the dispatcher logs its own failures.
    }
  };
  const statsTimer = setInterval(() => void readStats(), 15_000);
  statsTimer.unref?.();
  void readStats();
  return {
    health: () => dispatcher.health(),
    healthPart: () => {
      const health = dispatcher.health();
      const part: HealthPart = { ok: health.running && health.lastError === null, running: health.running, in_flight: health.inFlight };
      if (health.lastError !== null) part.problem = `the last round failed (${health.lastError})`;
      if (stats !== undefined) Object.assign(part, { pending: stats.pending, oldest_due_seconds: Math.round(stats.oldestDueAgeMs / 100) / 10 }, stats.dropped === undefined ? {} : { dropped: stats.dropped });
      return part;
    },
    async stop() {
      clearInterval(statsTimer);
      await dispatcher.stop();
      await onStop?.();
    },
  };
}
