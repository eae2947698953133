/**
 * merchant-api: request-signature validation and merchant user data as a
 * web-standard fetch handler. Other entry points (package.json "exports"):
 * `merchant-api/signing` (sign and verify requests), `merchant-api/metrics`
 * (Prometheus), the runtime adapters `merchant-api/node`, `/bun`, `/deno`,
 * the storages `merchant-api/storage/memory` and `merchant-api/storage/mysql`,
 * `merchant-api/storage/redis` (salts and throttle counters on Redis, in
 * front of any storage), and the merchant's side, `merchant-api/client`.
 */
export { createMerchantApi } from './api.js';
export type { MerchantApi, MerchantApiOptions } from './api.js';
export type { HealthPart, WebhookEndpointOptions } from './options.js';
export type { AuthFailureReason, RequestContext, RequestInfo } from './http/context.js';
export type { MerchantApiHooks, RequestSummary } from './http/hooks.js';
export type { StorageOperation } from './storage/contract.js';
export { MerchantApiError, StorageUnavailableError } from './errors.js';
export type { ErrorDetail, MerchantApiErrorCode, MerchantApiErrorOptions, RateLimitPolicy } from './errors.js';
export { errorResponse } from './http/error-reply.js';
export type { ErrorShape } from './http/responses.js';
export { createJsonLogger, silentLogger } from './observe/logger.js';
export type { JsonLoggerOptions, Logger, LogLevel } from './observe/logger.js';
export { MAX_ID_LENGTH, USER_RECORD_KEYS } from './storage/contract.js';
export type { Merchant, MerchantLookup, SaltRecord, Storage, UserFilter, UserPageQuery, UserRecord } from './storage/contract.js';
export type { ReservationAnswer, ThrottleFailure, ThrottleRecord, ThrottleReservation, ThrottleRules, ThrottleStore, ThrottleStoreListener } from './storage/throttle-store.js';
// What a storage implementer names (the answers of `listUsers`, `health`) and the options of the limits.
export type { ChangedUserRecord, PartHealth, UserOrder, UserRecordPage } from './storage/contract.js';
// The records of the optional key operations (`createKey`, ...; docs/protocol.md#managing-keys).
export type { CreatedMerchantKey, KeyChangeOptions, KeyPatch, KeyRotation, NewMerchantKey, RotatedMerchantKey } from './storage/contract.js';
export type { FairShareOptions } from './limits/fair-share.js';
export type { TarpitOptions } from './limits/tarpit.js';
export type { DocsAssets, SwaggerUiFile } from './routes/docs/assets.js';
export type { ThrottleOptions } from './limits/throttle.js';
// The webhook dispatcher `serve` runs, for an embedder sending a storage's outbox itself (docs/webhooks.md#embedding).
export { WebhookDispatcher } from './webhooks/dispatcher.js';
export type { AttemptEvent, DispatcherHealth, DispatcherOptions } from './webhooks/dispatcher.js';
export type { AttemptRecord, ClaimOptions, DueDelivery, OutboxStats, WebhookOutbox } from './storage/webhook-outbox.js';
