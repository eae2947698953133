/**
 * The public surface, entry point by entry point, as the built package
 * exports it. A change here is a change to the API: it must be deliberate,
 * so this list changes with it, in the same review.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';

const EXPECTED: Record<string, string[]> = {
  '.': ['MAX_ID_LENGTH', 'MerchantApiError', 'StorageUnavailableError', 'USER_RECORD_KEYS', 'createJsonLogger', 'createMerchantApi', 'errorResponse', 'silentLogger', 'WebhookDispatcher'],
  './signing': ['canonicalMessage', 'pct', 'sign', 'signUrl', 'verify'],
  './metrics': ['answerScrape', 'createMetrics'],
  './node': ['answerClientErrors', 'answerExpectations', 'createRequestListener', 'serve'],
  './bun': ['serve'],
  './deno': ['serve'],
  './storage/memory': ['MEMORY_WEBHOOK_DEFAULTS', 'MemoryStorage', 'SeedError', 'SeedSyntaxError', 'createDemoStorage', 'createMemoryStorage', 'loadMemoryStorage', 'parseSeed'],
  './storage/mysql': [
    'DEFAULT_BATCH_SIZE', 'ImportValidationError', 'MasterKeyError', 'MerchantAdminError', 'MysqlStorage', 'addMerchant', 'createMigrator', 'createMysqlKysely',
    'generateApiKey', 'generateMasterKey', 'importSeed', 'importUserFile', 'listMerchants', 'migrateToLatest', 'openApiKey', 'parseMasterKey',
    'parseMysqlUrl', 'rotateMerchantKey', 'sealApiKey', 'setMerchantStatus',
    'DEFAULT_MAX_LAG_SECONDS', 'withReplicaReads',
    'MERCHANT_ID_RULE', 'addMerchantKey', 'deleteMerchant', 'keyFingerprint', 'liftThrottleBlocks', 'listMerchantKeys', 'listThrottleBlocks',
    'revokeMerchantKey', 'galeraProblems', 'writeConflictCounts',
    'addRandomMerchantKey', 'eraseShares', 'eraseUser', 'listAuditEvents', 'pruneAuditEvents', 'updateMerchantKey', 'writeAuditEvent',
    'MysqlWebhookOutbox', 'WebhookAdminError', 'addWebhookEndpoint', 'enableWebhookEndpoint', 'listWebhookDeliveries', 'listWebhookEndpoints', 'redeliverWebhooks', 'listEndpointDeliveryPage', 'redeliverEndpointDeliveries',
    'eraseWebhookEvents', 'removeWebhookEndpoint', 'rotateWebhookSecret', 'sendWebhookTest', 'writeUnsharedEvent', 'expandShareBatches', 'expandAllShareBatches',
    'pruneShareRemovals', 'pruneIdempotencyKeys',
    'durabilityFindings', 'durabilityReport', 'erasureReasonProblem', 'erasureSubject',
  ],
  './storage/redis': ['RedisSetupError', 'ScriptNotLoadedError', 'createRedisConnection', 'parseRedisUrl', 'redisConnectionFromClient', 'throttleFullCount', 'withRedisState'],
  './client': ['MerchantClientError', 'MerchantNetworkError', 'MerchantResponseError', 'MerchantTimeoutError', 'WebhookVerificationError', 'createMerchantClient', 'verifyWebhook'],
};

const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { exports: Record<string, { import: { default: string }; require: { default: string } } | string> };

describe('the public API', () => {
  it('has exactly the entry points listed here', () => {
    expect(Object.keys(pkg.exports).filter((k) => k !== './package.json').sort()).toEqual(Object.keys(EXPECTED).sort());
  });

  for (const [subpath, names] of Object.entries(EXPECTED)) {
    it(`${subpath} exports exactly ${names.length} names, the same from ESM and CJS`, async () => {
      const target = pkg.exports[subpath] as { import: { default: string }; require: { default: string } };
      const esm = await import(`${ROOT}${target.import.default}`);
      expect(Object.keys(esm).sort()).toEqual([...names].sort());
      const { createRequire } = await import('node:module');
      const cjs = createRequire(`${ROOT}package.json`)(`${ROOT}${target.require.default}`);
      expect(Object.keys(cjs).sort()).toEqual([...names].sort());
    });
  }
});
