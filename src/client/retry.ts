/**
 * The retry policy of the client: which failures are retried, how long to
 * wait before the next attempt, and the deadline of a whole call.
 *
 * Only idempotent requests are retried: reads, and POSTs, which carry an `Idempotency-Key`
 * (./idempotency-key.ts; a DELETE is sent once):
 * 503 (storage unavailable), 429 (throttled) and connection failures
 * (refused, reset, cut before the answer). A timeout is not retried: the
 * server may be stuck, and retrying would multiply the caller's wait. Other
 * 4xx and 5xx are answers, not accidents, and are thrown at once.
 */
import { MerchantResponseError, type MerchantClientError } from './errors.js';
import type { RetryOptions } from './types.js';

export interface RetryPolicy {
  maxRetries: number;
  baseDelayMs: number;
  maxDelayMs: number;
  deadlineMs: number;
  onRetry?: RetryOptions['onRetry'];
}

export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 3, baseDelayMs: 250, maxDelayMs: 10_000, deadlineMs: 60_000 };

export function retryPolicy(option: number | false | RetryOptions | undefined): RetryPolicy {
  if (option === undefined) return DEFAULT_RETRY;
  if (option === false) return { ...DEFAULT_RETRY, maxRetries: 0 };
  const given = typeof option === 'number' ? { maxRetries: option } : option;
  const policy: RetryPolicy = { ...DEFAULT_RETRY };
  for (const name of ['maxRetries', 'baseDelayMs', 'maxDelayMs', 'deadlineMs'] as const) {
    const value = given[name];
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw new RangeError(`retries.${name} must be a number >= 0 (got ${String(value)}).`);
    policy[name] = name === 'maxRetries' ? Math.floor(value) : value;
  }
  if (typeof option === 'object' && option.onRetry) policy.onRetry = option.onRetry;
  return policy;
}

/** Statuses worth another attempt of an idempotent request. */
export function isRetryableStatus(status: number): boolean {
  return status === 503 || status === 429;
}

/** Connection failures are retried; a timeout, TLS and DNS failures, and answers other than 503/429 are not. */
export function isRetryableFailure(error: MerchantClientError): boolean {
  if (error instanceof MerchantResponseError) return isRetryableStatus(error.status);
  return error.name === 'MerchantNetworkError' && ['refused', 'connection', 'other'].includes((error as { kind?: string }).kind ?? '');
}

/**
 * `Retry-After` in milliseconds: delta-seconds, or an HTTP date measured
 * against `now`; undefined when absent or unreadable.
 */
export function retryAfterMs(header: string | null, now: number): number | undefined {
  if (header === null) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Exponential backoff with full jitter: a random wait in [0, min(max, base * 2^retry)). */
export function backoffMs(policy: RetryPolicy, retry: number, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  return Math.floor(random() * ceiling);
}

/** Resolves after `ms`, or rejects with the reason of the first of `signals` to abort; leaves no listener behind. */
export function sleep(ms: number, signals: readonly AbortSignal[] = []): Promise<void> {
  return new Promise((resolve, reject) => {
    const aborted = signals.find((signal) => signal.aborted);
    if (aborted) {
      reject(aborted.reason);
      return;
    }
    const cleanup = () => {
      clearTimeout(timer);
      for (const signal of signals) signal.removeEventListener('abort', onAbort);
    };
    const onAbort = (event: Event) => {
      cleanup();
      reject((event.target as AbortSignal).reason);
    };
    const timer = setTimeout(() => {
      cleanup();
      resolve();
    }, ms);
    for (const signal of signals) signal.addEventListener('abort', onAbort, { once: true });
  });
}
