/**
 * merchant-api: request-signature validation and merchant user data as a
 * web-standard fetch handler. Other entry points: `merchant-api/signing`
 * (sign and verify requests), `merchant-api/metrics` (Prometheus), the
 * runtime adapters `merchant-api/node`, `/bun`, `/deno`, and the storages
 * `merchant-api/storage/memory`, `merchant-api/storage/mysql`.
 */
export { createMerchantApi } from './api.js';
export type { MerchantApi, MerchantApiOptions } from './api.js';
export type { AuthFailureReason, RequestContext, RequestInfo } from './context.js';
export type { MerchantApiHooks, RequestSummary } from './hooks.js';
export type { StorageOperation } from './guarded-storage.js';
export { MerchantApiError, StorageUnavailableError } from './errors.js';
export type { ErrorDetail, MerchantApiErrorCode } from './errors.js';
export { errorResponse } from './responses.js';
export type { ErrorShape } from './responses.js';
export { createJsonLogger, silentLogger } from './logger.js';
export type { JsonLoggerOptions, Logger, LogLevel } from './logger.js';
export { MAX_ID_LENGTH, USER_RECORD_KEYS } from './storage.js';
export type { Merchant, SaltRecord, Storage, UserFilter, UserPageQuery, UserRecord } from './storage.js';
export type { ThrottleFailure, ThrottleRecord, ThrottleRules, ThrottleStore, ThrottleStoreListener } from './throttle-store.js';
