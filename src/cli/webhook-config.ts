/**
 * The webhook variables (docs/webhooks.md#configuration), read with the MySQL settings: `serve`
 * runs the dispatcher with them, and `webhook add` checks a URL with the same address rules.
 * `WEBHOOK_ALLOW_PRIVATE` and `WEBHOOK_ALLOW_HTTP` lift the rules against server-side request
 * forgery for development and tests only; `serve` warns at start while either is set.
 */
import { DEFAULTS, parseDurationMs, parseRetrySchedule } from '../cli-internal.js';
import type { SettingsReader } from './redis-config.js';

export interface WebhookConfig {
  /** WEBHOOKS (default true): whether `serve` on MySQL runs the dispatcher. */
  dispatch: boolean;
  /** WEBHOOK_ALLOW_PRIVATE: private, loopback and reserved addresses allowed. */
  allowPrivate: boolean;
  /** WEBHOOK_ALLOW_HTTP: `http` URLs allowed. */
  allowHttp: boolean;
  /** WEBHOOK_RETRY_SCHEDULE: delays before each retry, ms. */
  retrySchedule: readonly number[];
  /** WEBHOOK_TIMEOUT: one attempt, ms. */
  timeoutMs: number;
  /** WEBHOOK_MAX_ENDPOINTS: endpoints per merchant. */
  maxEndpointsPerMerchant: number;
  /** WEBHOOK_DISABLE_AFTER: an endpoint failing every attempt this long is disabled, ms. */
  disableAfterFailingMs: number;
  /** WEBHOOK_RETENTION: deliveries kept this long, ms. */
  retentionMs: number;
}

export function webhookSettings(r: SettingsReader): WebhookConfig {
  const duration = (raw: string | undefined, name: string, fallback: number, max: number): number => {
    if (raw === undefined) return fallback;
    const ms = parseDurationMs(raw);
    if (ms === undefined || ms < 1 || ms > max) {
      r.problems.push(`${name} must be a duration such as 500ms, 15s, 5m, 2h or 5d, at most ${max / 1000} s (got "${raw}")`);
      return fallback;
    }
    return ms;
  };
  let retrySchedule: readonly number[] = DEFAULTS.webhooks.retryScheduleMs;
  const schedule = r.text('WEBHOOK_RETRY_SCHEDULE');
  if (schedule !== undefined) {
    try {
      retrySchedule = parseRetrySchedule(schedule);
    } catch (error) {
      r.problems.push((error as Error).message.replace(/\.$/, ''));
    }
  }
  return {
    dispatch: r.bool('WEBHOOKS', true),
    allowPrivate: r.bool('WEBHOOK_ALLOW_PRIVATE', false),
    allowHttp: r.bool('WEBHOOK_ALLOW_HTTP', false),
    retrySchedule,
    timeoutMs: duration(r.text('WEBHOOK_TIMEOUT'), 'WEBHOOK_TIMEOUT', DEFAULTS.webhooks.timeoutMs, 300_000),
    maxEndpointsPerMerchant: r.int('WEBHOOK_MAX_ENDPOINTS', DEFAULTS.webhooks.maxEndpointsPerMerchant, 1, 1000),
    disableAfterFailingMs: duration(r.text('WEBHOOK_DISABLE_AFTER'), 'WEBHOOK_DISABLE_AFTER', DEFAULTS.webhooks.disableAfterFailingMs, 365 * 86_400_000),
    retentionMs: duration(r.text('WEBHOOK_RETENTION'), 'WEBHOOK_RETENTION', DEFAULTS.webhooks.retentionMs, 365 * 86_400_000),
  };
}
