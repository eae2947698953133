/**
 * `merchant-api/client`: the Merchant API from a merchant's side
 * (docs/client.md). Runs on Node 20+, Bun and Deno; imports nothing of the
 * server but the signing functions of `merchant-api/signing`.
 */
export { createMerchantClient, type MerchantClient } from './client.js';
export { MerchantClientError, MerchantNetworkError, MerchantResponseError, MerchantTimeoutError, type NetworkErrorKind } from './errors.js';
export { verifyWebhook, WebhookVerificationError } from './verify-webhook.js';
export type { CreatedWebhookEndpoint, CreateWebhookOptions, QueuedWebhookTest, RedeliverTarget, Redelivered, RotatedWebhookSecret, RotateWebhookSecretOptions, WebhookDeliveriesOptions, WebhookDelivery, WebhookDeliveryPage, WebhookEndpoint, WebhookEventType, WebhooksClient } from './webhooks.js';
export type { CreatedKey, CreateKeyOptions, KeyEnd, KeyScope, KeysClient, RotatedKey, RotateKeyOptions, UpdateKeyOptions } from './keys.js';
export type { TestWebhookEvent, UnsharedWebhookEvent, UserWebhookEvent, VerifyWebhookOptions, WebhookEvent } from './verify-webhook.js';
export type {
  ChangedUserRecord,
  ChangeEntry,
  ChangesOptions,
  RemovedUser,
  ClientErrorCode,
  ErrorCode,
  ErrorDetail,
  ErrorEnvelope,
  ExportOptions,
  KeyInfo,
  MerchantClientOptions,
  ChangeOptions,
  RequestOptions,
  RetryInfo,
  RetryOptions,
  ServerErrorCode,
  SignatureErrorBody,
  SignatureErrorCode,
  SignatureResult,
  SigningParams,
  Timestamp,
  UserFilters,
  UserListBody,
  UserOrder,
  UserPage,
  UserPageBody,
  UserPagesOptions,
  UserRecord,
  UsersOptions,
  UsersQuery,
  ValidateSignatureOptions,
} from './types.js';
export type { SimulatedTestEvent, TestEventRequest, TestModeClient } from './test-mode.js';
