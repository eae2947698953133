/**
 * When a failed delivery is tried again (docs/webhooks.md#retries): the Standard Webhooks schedule
 * (`DEFAULTS.webhooks.retryScheduleMs`), or `WEBHOOK_RETRY_SCHEDULE`, the delays before each retry
 * as comma-separated durations (`1s,1s,2s`); the first attempt is immediate. Each delay gets up to
 * 10% jitter, so receivers that came back together are not hit together; a `Retry-After` of a 429
 * or 503 is honoured when longer, up to a cap.
 */
import { DEFAULTS } from '../defaults.js';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const MAX_RETRIES = 50;
const MAX_DELAY_MS = 7 * 86_400_000;

/** The default schedule: delays in ms before retries 1, 2, … */
export const DEFAULT_RETRY_SCHEDULE: readonly number[] = DEFAULTS.webhooks.retryScheduleMs;

/** `500ms`, `5s`, `5m`, `2h`, `1d` → ms; undefined for anything else. */
export function parseDurationMs(text: string): number | undefined {
  const match = /^(\d{1,9})(ms|s|m|h|d)$/.exec(text.trim());
  if (!match) return undefined;
  return Number(match[1]) * UNIT_MS[match[2]!]!;
}

/**
 * Parses `WEBHOOK_RETRY_SCHEDULE`. Throws an `Error` naming the problem (never silently the
 * default): an empty item, a duration without unit, more than 50 retries or a delay over 7 days.
 *
 * @example
 * parseRetrySchedule('1s,1s,2s') // [1000, 1000, 2000]
 */
export function parseRetrySchedule(text: string): number[] {
  const items = text.split(',');
  if (items.length > MAX_RETRIES) throw new Error(`WEBHOOK_RETRY_SCHEDULE: at most ${MAX_RETRIES} retries, got ${items.length}.`);
  return items.map((item, index) => {
    const ms = parseDurationMs(item);
    if (ms === undefined) throw new Error(`WEBHOOK_RETRY_SCHEDULE: item ${index + 1} is not a duration such as 500ms, 5s, 5m, 2h or 1d.`);
    if (ms > MAX_DELAY_MS) throw new Error(`WEBHOOK_RETRY_SCHEDULE: item ${index + 1} is longer than 7 days.`);
    return ms;
  });
}

/**
 * Milliseconds until the next attempt after `attemptsMade` attempts failed, or undefined when the
 * schedule is used up (the delivery fails for good). `random` in [0, 1) picks the jitter (up to
 * +10%); `retryAfterMs`, a receiver's `Retry-After`, wins when longer, capped at `maxRetryAfterMs`.
 */
export function nextRetryDelay(schedule: readonly number[], attemptsMade: number, random: number, retryAfterMs?: number, maxRetryAfterMs: number = DEFAULTS.webhooks.maxRetryAfterMs): number | undefined {
  const base = schedule[attemptsMade - 1];
  if (base === undefined || attemptsMade < 1) return undefined;
  const jittered = Math.round(base * (1 + 0.1 * random));
  if (retryAfterMs === undefined) return jittered;
  return Math.max(jittered, Math.min(retryAfterMs, maxRetryAfterMs));
}

/** A `Retry-After` header (seconds, or an HTTP date) in ms from `now`, or undefined. */
export function retryAfterMs(header: string | null | undefined, now: number): number | undefined {
  if (header === null || header === undefined) return undefined;
  const text = header.trim();
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
