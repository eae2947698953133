/**
 * `createMetrics({ registry })` beside a host that already collects
 * prom-client's default (process) metrics in its registry: no
 * "already registered" error, the process metrics once, and the caller
 * deciding whether they are collected (docs/observability.md#metrics).
 */
import { collectDefaultMetrics, Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/observe/metrics.js';

const PROCESS_METRIC = 'process_cpu_user_seconds_total';

function count(text: string, name: string): number {
  return text.split('\n').filter((line) => line.startsWith(`# TYPE ${name} `)).length;
}

describe('createMetrics({ registry })', () => {
  it('registers beside a host that collects the default metrics, which stay the host’s', async () => {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    new Counter({ name: 'host_orders_total', help: 'The host’s own.', registers: [registry] });
    const metrics = createMetrics({ registry });
    expect(metrics.registry).toBe(registry);
    const text = await registry.metrics();
    expect(count(text, PROCESS_METRIC)).toBe(1);
    expect(count(text, 'host_orders_total')).toBe(1);
    expect(count(text, 'merchant_api_requests_total')).toBe(1);
  });

  it('leaves process metrics out of a registry of the caller unless asked for', async () => {
    const bare = new Registry();
    createMetrics({ registry: bare });
    expect(count(await bare.metrics(), PROCESS_METRIC)).toBe(0);
    const asked = new Registry();
    createMetrics({ registry: asked, processMetrics: true });
    expect(count(await asked.metrics(), PROCESS_METRIC)).toBe(1);
  });

  it('processMetrics: true on a registry that already has them keeps one set', async () => {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    expect(() => createMetrics({ registry, processMetrics: true })).not.toThrow();
    expect(count(await registry.metrics(), PROCESS_METRIC)).toBe(1);
  });

  it('a registry of its own has the process metrics by default, and none with processMetrics: false', async () => {
    expect(count(await createMetrics().registry.metrics(), PROCESS_METRIC)).toBe(1);
    expect(count(await createMetrics({ processMetrics: false }).registry.metrics(), PROCESS_METRIC)).toBe(0);
  });
});
