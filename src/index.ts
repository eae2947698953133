/**
 * merchant-api: request-signature validation and merchant user data as a
 * web-standard fetch handler. Runtime adapters: `merchant-api/node`,
 * `merchant-api/bun`, `merchant-api/deno`; storages:
 * `merchant-api/storage/memory`, `merchant-api/storage/mysql`.
 */
export { createMerchantApi } from './api.js';
export type { MerchantApi, MerchantApiOptions } from './api.js';
export { canonicalMessage, pct, sign, signUrl, verify } from './signing.js';
export type { SignedRequest, SigningParams, SignUrlOptions } from './signing.js';
export { MerchantApiError, StorageUnavailableError } from './errors.js';
export type { ErrorDetail, MerchantApiErrorCode } from './errors.js';
export { consoleLogger, silentLogger } from './logger.js';
export type { Logger } from './logger.js';
export { MAX_ID_LENGTH, USER_RECORD_KEYS } from './storage.js';
export type { Merchant, SaltRecord, Storage, UserFilter, UserPageQuery, UserRecord } from './storage.js';
export { canonicalTimestamp } from './timestamps.js';
export { compareCodePoints } from './order.js';
