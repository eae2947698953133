/**
 * The route table: every endpoint once. Dispatch, 404, 405 with `Allow`,
 * HEAD (answered from GET by the pipeline) and the OpenAPI `paths` all come
 * from it, so adding an endpoint is one entry here and one handler file.
 */
import { healthz, healthzDoc, readyz, readyzDoc } from './health.js';
import { openApiDocumentDoc, openApiDocumentRoute } from './openapi-document.js';
import { listKeys, listKeysDoc } from './keys.js';
import { createKey, revokeKey, rotateKey, updateKey } from './key-changes.js';
import { createKeyDoc, revokeKeyDoc, rotateKeyDoc, updateKeyDoc } from './key-changes-docs.js';
import type { Route } from './route.js';
import { resetTestData, resetTestDataDoc, simulateTestEvents, simulateTestEventsDoc } from './test-simulator.js';
import { getUser, getUserDoc } from './user.js';
import { listUsers, listUsersDoc } from './users.js';
import { validateSignature, validateSignatureDoc } from './validate-signature.js';
import { createWebhook, listWebhooks, removeWebhook, rotateWebhookSecret, testWebhook } from './webhooks.js';
import { listWebhookDeliveries, redeliverWebhook } from './webhook-deliveries.js';
import { listWebhookDeliveriesDoc, redeliverWebhookDoc } from './webhook-deliveries-docs.js';
import { createWebhookDoc, listWebhooksDoc, removeWebhookDoc, rotateWebhookSecretDoc, testWebhookDoc } from './webhooks-docs.js';

export const ROUTES: readonly Route[] = [
  {
    id: 'validateSignature',
    method: 'GET',
    pattern: '/validatesignature',
    auth: 'signature',
    errorShape: 'signature',
    summary: 'Check a signed request',
    handle: validateSignature,
    openapi: validateSignatureDoc,
  },
  {
    id: 'listUsers',
    method: 'GET',
    pattern: '/merchant/users',
    trailingSlash: true,
    limit: 'listings',
    etag: true,
    auth: 'basic',
    errorShape: 'envelope',
    summary: "List the merchant's users",
    handle: listUsers,
    openapi: listUsersDoc,
  },
  {
    id: 'getUser',
    method: 'GET',
    pattern: '/merchant/users/{shared_user_id}',
    auth: 'basic',
    etag: true,
    errorShape: 'envelope',
    summary: 'Read one user',
    handle: getUser,
    openapi: getUserDoc,
  },
  {
    id: 'listKeys',
    method: 'GET',
    pattern: '/merchant/keys',
    auth: 'basic',
    errorShape: 'envelope',
    summary: "List the merchant's keys",
    handle: listKeys,
    openapi: listKeysDoc,
  },
  // The merchant's changes to its own keys (docs/protocol.md#managing-keys): each needs `keys:manage`,
  // a scope of its own, as a key that may add keys may give itself any power it has. The listing
  // above stays `users:read` (metadata, never a secret).
  { id: 'createKey', method: 'POST', pattern: '/merchant/keys', auth: 'basic', scope: 'keys:manage', errorShape: 'envelope', summary: 'Add a key', handle: createKey, openapi: createKeyDoc },
  { id: 'updateKey', method: 'PATCH', pattern: '/merchant/keys/{key_id}', auth: 'basic', scope: 'keys:manage', errorShape: 'envelope', summary: "Change a key's name or networks", handle: updateKey, openapi: updateKeyDoc },
  { id: 'revokeKey', method: 'DELETE', pattern: '/merchant/keys/{key_id}', auth: 'basic', scope: 'keys:manage', errorShape: 'envelope', summary: 'Revoke a key', handle: revokeKey, openapi: revokeKeyDoc },
  { id: 'rotateKey', method: 'POST', pattern: '/merchant/keys/{key_id}/rotate', auth: 'basic', scope: 'keys:manage', errorShape: 'envelope', summary: 'Rotate a key', handle: rotateKey, openapi: rotateKeyDoc },
  // The merchant's webhook endpoints (docs/webhooks.md#endpoints): the only routes that change something.
  // Every one, the listing too, needs `webhooks:manage`: an endpoint sends users' records out, and a
  // key that may only read (`users:read`, a reporting job's) must not add one nor learn where they go
  // (a receiver's URL often carries a token).
  { id: 'listWebhooks', method: 'GET', pattern: '/merchant/webhooks', auth: 'basic', scope: 'webhooks:manage', errorShape: 'envelope', summary: "List the merchant's webhook endpoints", handle: listWebhooks, openapi: listWebhooksDoc },
  { id: 'createWebhook', method: 'POST', pattern: '/merchant/webhooks', auth: 'basic', scope: 'webhooks:manage', errorShape: 'envelope', summary: 'Add a webhook endpoint', handle: createWebhook, openapi: createWebhookDoc },
  { id: 'removeWebhook', method: 'DELETE', pattern: '/merchant/webhooks/{id}', auth: 'basic', scope: 'webhooks:manage', errorShape: 'envelope', summary: 'Remove a webhook endpoint', handle: removeWebhook, openapi: removeWebhookDoc },
  { id: 'rotateWebhookSecret', method: 'POST', pattern: '/merchant/webhooks/{id}/rotate-secret', auth: 'basic', scope: 'webhooks:manage', errorShape: 'envelope', summary: "Rotate a webhook endpoint's secret", handle: rotateWebhookSecret, openapi: rotateWebhookSecretDoc },
  { id: 'testWebhook', method: 'POST', pattern: '/merchant/webhooks/{id}/test', auth: 'basic', scope: 'webhooks:manage', errorShape: 'envelope', summary: 'Send a test event', handle: testWebhook, openapi: testWebhookDoc },
  // An endpoint's deliveries (docs/webhooks.md#deliveries): managing webhooks, scoped as the routes above.
  { id: 'listWebhookDeliveries', method: 'GET', pattern: '/merchant/webhooks/{id}/deliveries', auth: 'basic', scope: 'webhooks:manage', errorShape: 'envelope', summary: "List an endpoint's deliveries", handle: listWebhookDeliveries, openapi: listWebhookDeliveriesDoc },
  { id: 'redeliverWebhook', method: 'POST', pattern: '/merchant/webhooks/{id}/redeliver', auth: 'basic', scope: 'webhooks:manage', errorShape: 'envelope', summary: 'Send deliveries again', handle: redeliverWebhook, openapi: redeliverWebhookDoc },
  // Test mode's simulator (docs/test-mode.md#the-simulator): test keys only, changing the test dataset only.
  { id: 'simulateTestEvents', method: 'POST', pattern: '/merchant/test/events', auth: 'basic', errorShape: 'envelope', summary: 'Simulate changes to the test dataset', handle: simulateTestEvents, openapi: simulateTestEventsDoc },
  { id: 'resetTestData', method: 'POST', pattern: '/merchant/test/reset', auth: 'basic', errorShape: 'envelope', summary: 'Restore the generated test dataset', handle: resetTestData, openapi: resetTestDataDoc },
  { id: 'health', method: 'GET', pattern: '/healthz', auth: 'none', errorShape: 'envelope', summary: 'Liveness: the process answers', handle: healthz, openapi: healthzDoc },
  { id: 'ready', method: 'GET', pattern: '/readyz', auth: 'none', errorShape: 'envelope', summary: 'Readiness: the storage answers', handle: readyz, openapi: readyzDoc },
  { id: 'openApi', method: 'GET', pattern: '/openapi.json', auth: 'none', errorShape: 'envelope', summary: 'This OpenAPI document', handle: openApiDocumentRoute, openapi: openApiDocumentDoc },
];
