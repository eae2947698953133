import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/observe/metrics.js';

async function value(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return metric?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l) && (!('metricName' in v) || v.metricName === name || v.metricName === undefined))?.value;
}

describe('webhook metrics', () => {
  it('every outcome, type and reason is there at 0, then counts what the dispatcher reports; the outbox gauges follow its stats', async () => {
    const metrics = createMetrics({ processMetrics: false });
    expect(await value(metrics.registry, 'merchant_api_webhook_attempts_total', { outcome: 'retry', type: 'user.unshared' })).toBe(0);
    expect(await value(metrics.registry, 'merchant_api_webhook_endpoints_disabled_total', { reason: 'gone' })).toBe(0);
    const attempt = { endpointId: 'we_1', eventId: 'evt_1', merchantId: 'm', type: 'user.updated', attempt: 1, durationMs: 120 };
    metrics.webhooks.onAttempt({ ...attempt, outcome: 'delivered', status: 204 });
    metrics.webhooks.onAttempt({ ...attempt, outcome: 'failed', status: 410, disabledEndpoint: 'gone' });
    metrics.webhooks.onAttempt({ ...attempt, type: 'made.up', outcome: 'retry', error: 'timeout' });
    expect(await value(metrics.registry, 'merchant_api_webhook_attempts_total', { outcome: 'delivered', type: 'user.updated' })).toBe(1);
    expect(await value(metrics.registry, 'merchant_api_webhook_attempts_total', { outcome: 'retry', type: 'other' })).toBe(1);
    expect(await value(metrics.registry, 'merchant_api_webhook_endpoints_disabled_total', { reason: 'gone' })).toBe(1);
    metrics.webhooks.setOutbox({ pending: 12, oldestDueAgeMs: 90_000 });
    expect(await value(metrics.registry, 'merchant_api_webhook_pending')).toBe(12);
    expect(await value(metrics.registry, 'merchant_api_webhook_oldest_due_seconds')).toBe(90);
    const text = await metrics.registry.metrics();
    expect(text).toContain('merchant_api_webhook_attempt_duration_seconds_count 3');
  });
});
