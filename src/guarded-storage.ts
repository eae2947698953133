/**
 * Wraps a storage so that every call is bounded in time and every failure
 * becomes the documented 503 (docs/protocol.md#failures). The storage itself recovers (a pool
 * reconnects), so the next request after the backend is back succeeds.
 */
import { MerchantApiError } from './errors.js';
import { describeError, type Logger } from './logger.js';
import type { Storage } from './storage.js';

/** Runs storage calls with a deadline; a late or failed call is a 503. */
export type StorageCall = <T>(operation: string, call: (storage: Storage) => Promise<T>) => Promise<T>;

export function guardStorage(storage: Storage, timeoutMs: number, logger: Logger): StorageCall {
  const unavailable = (operation: string, cause: unknown): MerchantApiError => {
    if (cause instanceof MerchantApiError) return cause;
    logger.error('storage_unavailable', { operation, ...describeError(cause) });
    return new MerchantApiError('storage_unavailable', 'The storage is unavailable; try again shortly.', { cause });
  };

  // A storage without I/O cannot hang: arming and clearing a timer and racing
  // two promises was a visible share of every request on it (bench/).
  if (storage.inProcess) {
    return async (operation, call) => {
      try {
        return await call(storage);
      } catch (error) {
        throw unavailable(operation, error);
      }
    };
  }

  return async (operation, call) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error(`timed out after ${timeoutMs} ms`), { name: 'TimeoutError' })), timeoutMs);
    });
    try {
      return await Promise.race([call(storage), deadline]);
    } catch (error) {
      throw unavailable(operation, error);
    } finally {
      clearTimeout(timer);
    }
  };
}
