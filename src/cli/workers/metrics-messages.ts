/**
 * The messages of a scrape between the primary and its workers
 * (worker-metrics.ts). Apart, with prom-client's types only, so that the
 * channel every runtime loads at start needs no prom-client installed.
 */
import type { MetricObjectWithValues, MetricValue } from 'prom-client';

export const METRICS_REQUEST = 'merchant-api:metrics-request';
export const METRICS_ANSWER = 'merchant-api:metrics';

export type WorkerMetricsJson = MetricObjectWithValues<MetricValue<string>>[];
export type MetricsRequest = { type: typeof METRICS_REQUEST; id: number };
export type MetricsAnswer = { type: typeof METRICS_ANSWER; id: number; metrics: WorkerMetricsJson };
