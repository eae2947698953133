/**
 * Every Redis failure as the storage contract wants it: a
 * StorageUnavailableError (503) whose message names the operation and the
 * cause, for operators. A full Redis says so, since the fix differs.
 */
import { MerchantApiError, StorageUnavailableError } from '../../errors.js';

export function redisError(error: unknown, operation: string): MerchantApiError {
  if (error instanceof MerchantApiError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (message.startsWith('OOM')) {
    return new StorageUnavailableError(`Redis ${operation} refused: Redis is at its maxmemory; raise maxmemory, or lower the traffic it must remember.`, { cause: error });
  }
  return new StorageUnavailableError(`Redis ${operation} failed: ${message.slice(0, 200)}`, { cause: error });
}

/**
 * What `/healthz` may say of a failed Redis call: it answers anyone, so a
 * kind of failure and an error code, never the driver's message (which can
 * name hosts and ports).
 */
export function healthProblem(error: unknown): string {
  const cause = error instanceof Error && error.cause !== undefined ? error.cause : error;
  const message = cause instanceof Error ? cause.message : '';
  const code = (cause as { code?: unknown } | undefined)?.code;
  if (message.startsWith('OOM')) return 'full: at its maxmemory';
  if (/timed? ?out/i.test(message)) return 'timed out';
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return `unreachable (${code})`;
  // ioredis while its connection is down (no offline queue): the call was never sent.
  if (/^(Stream isn't writeable|Connection is closed)/.test(message)) return 'unreachable (not connected)';
  if (error instanceof Error && /maxmemory-policy/.test(error.message)) return 'refused: its maxmemory-policy may evict salts';
  return 'failed';
}
