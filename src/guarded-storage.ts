/**
 * Wraps a storage so that every call is bounded in time and every failure
 * becomes the SPEC's 503 (section 4). The storage itself recovers (a pool
 * reconnects), so the next request after the backend is back succeeds.
 */
import { MerchantApiError } from './errors.js';
import { describeError, type Logger } from './logger.js';
import type { Storage } from './storage.js';

/** Runs storage calls with a deadline; a late or failed call is a 503. */
export type StorageCall = <T>(operation: string, call: (storage: Storage) => Promise<T>) => Promise<T>;

const PENDING = 0;
const FULFILLED = 1;
const REJECTED = 2;

export function guardStorage(storage: Storage, timeoutMs: number, logger: Logger): StorageCall {
  const unavailable = (operation: string, cause: unknown): MerchantApiError => {
    logger.error('storage_unavailable', { operation, ...describeError(cause) });
    return new MerchantApiError('storage_unavailable', 'The storage is unavailable; try again shortly.', { cause });
  };
  const failed = (operation: string, error: unknown): MerchantApiError =>
    error instanceof MerchantApiError ? error : unavailable(operation, error);

  return async <T>(operation: string, call: (storage: Storage) => Promise<T>): Promise<T> => {
    let pending: Promise<T>;
    try {
      pending = call(storage);
    } catch (error) {
      throw unavailable(operation, error);
    }

    // Fast path (measured in bench/): a storage that answers without I/O (the
    // memory storage) has settled after one microtask, so it needs no timer;
    // arming and clearing a setTimeout and racing two promises was a visible
    // share of every request. Anything still pending then gets the deadline.
    let state = PENDING;
    let value: T | undefined;
    let reason: unknown;
    const observed = pending.then(
      (v) => {
        state = FULFILLED;
        value = v;
      },
      (e: unknown) => {
        state = REJECTED;
        reason = e;
      },
    );
    await undefined;
    if (state === FULFILLED) return value as T;
    if (state === REJECTED) throw failed(operation, reason);

    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error(`timed out after ${timeoutMs} ms`), { name: 'TimeoutError' })), timeoutMs);
    });
    try {
      await Promise.race([observed, deadline]);
    } catch (error) {
      throw failed(operation, error);
    } finally {
      clearTimeout(timer);
    }
    if (state === REJECTED) throw failed(operation, reason);
    return value as T;
  };
}
