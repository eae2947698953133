/**
 * `merchant-api/storage/memory`: the in-memory storage, the embedded default
 * (docs/protocol.md#storage-and-secrets), and its loaders.
 */
export { createMemoryStorage, MemoryStorage, type IndexedSeed, type MemoryStorageOptions } from './memory-storage.js';
export { MEMORY_WEBHOOK_DEFAULTS, type MemoryDeliverySummary, type MemoryWebhookOptions } from './webhooks.js';
export { createDemoStorage } from './demo-storage.js';
export type { MemoryIdempotencyOptions } from './idempotency-keys.js';
export { loadMemoryStorage, type LoadMemoryStorageOptions } from './load.js';
export { parseSeed, SeedError, type Seed, type SeedMerchant, type SeedUser } from '../seed/seed.js';
export { SeedSyntaxError } from '../seed/seed-stream.js';
