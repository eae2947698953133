/**
 * The `merchant-api` command's own entry point into the library: what its
 * checks and messages share with the storages and limits, that no embedder
 * needs. Not a package export (package.json "exports" and tsup.config.ts do
 * not list it): the command is bundled with it, so these names stay out of
 * the public surface, and only src/cli/ may import it
 * (test/architecture/dependency-rules.cjs).
 */
export { DEFAULTS } from './defaults.js';
export { normaliseAllowedHost, normalisePublicUrl } from './http/public-url.js';
export { LOG_LEVELS } from './observe/logger.js';
export { addressKey, MAX_IPV6_PREFIX, MIN_IPV6_PREFIX } from './limits/address-key.js';
export type { ThrottleOptions } from './limits/throttle.js';
export { merchantIdProblem } from './storage/contract.js';
// The one time format every command prints (docs/cli.md#times).
export { canonicalTimestamp, formatEpochSeconds } from './storage/timestamps.js';
export { MAX_MAX_SALTS } from './storage/memory/salts.js';
export { redact } from './storage/mysql/admin/redact.js';
export { storageError } from './storage/mysql/storage-error.js';
export { writeConflictCounts } from './storage/mysql/write-conflicts.js';
export { throttleFullCount } from './storage/throttle-store.js';
export { isShareableAddress } from './storage/mysql/throttle/shareable-address.js';
export { DEFAULT_PREFIX } from './storage/redis/keys.js';

// Key limits as the CLI reads them from its options (docs/cli.md#keys).
export { KEY_SCOPES, keyModeProblem, keyNameProblem, parseAllowFrom, parseScopes } from './storage/key-limits.js';
export { checkWebhookUrl, resolveWebhookAddress, WebhookAddressError } from './webhooks/address-guard.js';
// An endpoint's deliveries as the API answers them (`webhook deliveries|redeliver`: the same items and bounds).
export { decodeDeliveryCursor, DELIVERY_STATES, deliveryJson, encodeDeliveryCursor, MAX_DELIVERY_PAGE, MAX_REDELIVERIES } from './storage/webhook-deliveries.js';
export type { DeliveryCursor, DeliveryState } from './storage/webhook-deliveries.js';
export { WebhookDispatcher } from './webhooks/dispatcher.js';
export type { AttemptEvent, DispatcherHealth } from './webhooks/dispatcher.js';
export { isWebhookEventType, DEFAULT_SUBSCRIBED_EVENTS, WEBHOOK_EVENT_TYPES } from './webhooks/events.js';
export { parseDurationMs, parseRetrySchedule } from './webhooks/retry-schedule.js';
export type { OutboxStats, WebhookOutbox } from './storage/webhook-outbox.js';
export { DEFAULT_TEST_USERS, MAX_TEST_USERS } from './testmode/dataset.js';
