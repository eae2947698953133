/** The OpenAPI operations of `/merchant/webhooks` (src/routes/webhooks.ts), besides what the route table and every route share. */
import { envelopeError } from '../openapi/error-codes.js';
import { MALFORMED_QUERY, response } from '../openapi/fragments.js';
import { JSON_BODY_ERRORS } from '../openapi/json-body-errors.js';
import type { Json, OperationDoc } from '../openapi/operation.js';
import { DEFAULT_SUBSCRIBED_EVENTS } from '../webhooks/events.js';
import { MAX_WEBHOOK_URL_LENGTH } from './webhooks.js';

const time = { type: 'string', format: 'date-time', description: 'UTC, six fraction digits, the offset written out' };
const eventTypes = { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', enum: [...DEFAULT_SUBSCRIBED_EVENTS] } };

const endpoint: Json = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'url', 'events', 'status', 'disabled_reason', 'created_at'],
  properties: {
    id: { type: 'string', description: '`we_` and 22 characters' },
    url: { type: 'string', format: 'uri' },
    events: eventTypes,
    status: { type: 'string', enum: ['enabled', 'disabled'] },
    disabled_reason: { type: ['string', 'null'], enum: ['gone', 'failing', 'operator', null], description: '`gone`: it answered 410; `failing`: every attempt failed for days' },
    created_at: time,
  },
};

/** The success envelope holding `items`. */
function ok(description: string, items: Json, count?: number): Json {
  const data: Json = { type: 'array', items, ...(count === undefined ? {} : { minItems: count, maxItems: count }) };
  return { type: 'object', description, additionalProperties: false, required: ['status', 'data', 'errors'], properties: { status: { const: 'ok' }, data, errors: { type: 'array', maxItems: 0 } } };
}

const idParameter: Json = { name: 'id', in: 'path', required: true, description: 'The endpoint id (`we_...`).', schema: { type: 'string', minLength: 1 } };

const notFound = response('This merchant has no endpoint with this id: one of another merchant is the same answer.', envelopeError(['not_found']));
const notImplemented = response('The storage behind this server keeps no webhooks (a storage of its own without the optional webhook operations; the memory and MySQL storages have them).', envelopeError(['not_implemented']));
const JSON_400 = 'a body that is not a JSON object (`malformed_request`), a member it does not take (`unknown_parameter`), a bad value (`invalid_parameter`), a query parameter (it takes none), or';

export const listWebhooksDoc: OperationDoc = {
  tag: 'Webhooks',
  description: "The merchant's webhook endpoints of the key's mode, oldest first: a live key's live endpoints, a test key's test endpoints (docs/test-mode.md#webhooks). Never a secret. Takes no query parameters.",
  readsQuery: true,
  badRequest: `A query parameter (this endpoint takes none; \`unknown_parameter\` per name), or ${MALFORMED_QUERY}`,
  badRequestCodes: ['unknown_parameter', 'malformed_request'],
  responses: { '200': response('The endpoints.', ok('The endpoints.', endpoint)), '501': notImplemented },
};

export const createWebhookDoc: OperationDoc = {
  tag: 'Webhooks',
  description:
    'Adds an endpoint. Its URL must be `https` and resolve to public addresses only (checked now and at every attempt). ' +
    'The answer holds its signing secret, shown only this once (docs/webhooks.md#verifying). Added with a test key, it is a test endpoint: it receives the test simulator\'s events only, and only a test key manages it (docs/test-mode.md#webhooks).',
  readsQuery: true,
  requestBody: {
    required: true,
    content: {
      'application/json': {
        schema: {
          type: 'object',
          additionalProperties: false,
          required: ['url'],
          properties: { url: { type: 'string', minLength: 1, maxLength: MAX_WEBHOOK_URL_LENGTH, format: 'uri' }, events: { ...eventTypes, description: 'Default: every user event.' } },
        },
      },
    },
  },
  badRequest: `${JSON_400} ${MALFORMED_QUERY} A URL the address rules refuse is \`invalid_parameter\` with \`param: "url"\`, as is one longer than ${MAX_WEBHOOK_URL_LENGTH} characters once normalized and percent-encoded (as stored).`,
  badRequestCodes: ['malformed_request', 'unknown_parameter', 'invalid_parameter'],
  responses: {
    '201': response('The endpoint, with its secret.', ok('The endpoint added.', { ...endpoint, required: [...(endpoint.required as string[]), 'secret'], properties: { ...(endpoint.properties as Json), secret: { type: 'string', pattern: '^whsec_' } } }, 1)),
    '409': response('The merchant has the most endpoints it may have (default 10).', envelopeError(['conflict'])),
    ...JSON_BODY_ERRORS,
    '501': notImplemented,
  },
};

export const removeWebhookDoc: OperationDoc = {
  tag: 'Webhooks',
  description: 'Removes an endpoint, with its deliveries. Answers 204 with no body.',
  readsQuery: true,
  parameters: [idParameter],
  badRequest: `A query parameter (it takes none), or ${MALFORMED_QUERY}`,
  badRequestCodes: ['unknown_parameter', 'malformed_request'],
  responses: { '204': { description: 'Removed.' }, '404': notFound, '501': notImplemented },
};

export const rotateWebhookSecretDoc: OperationDoc = {
  tag: 'Webhooks',
  description:
    'Gives the endpoint a new secret, shown only in this answer. With `expire_old_in` the old one keeps signing beside it until then ' +
    '(both signatures are sent), so a receiver can switch without losing a delivery; without it the old one stops at once. The body may be left out. ' +
    "An endpoint signs with at most two secrets: while an earlier rotation's overlap runs, a rotation with `expire_old_in` is 409 (one without is taken, the earlier old secret signing on to its end).",
  readsQuery: true,
  parameters: [idParameter],
  requestBody: {
    required: false,
    content: { 'application/json': { schema: { type: 'object', additionalProperties: false, properties: { expire_old_in: { type: 'string', description: 'A duration: `30s`, `15m`, `24h`, `7d`; at most 366 days.', examples: ['24h'] } } } } },
  },
  badRequest: `${JSON_400} ${MALFORMED_QUERY}`,
  badRequestCodes: ['malformed_request', 'unknown_parameter', 'invalid_parameter'],
  responses: {
    '200': response(
      'The new secret.',
      ok(
        'The new secret.',
        { type: 'object', additionalProperties: false, required: ['id', 'secret', 'old_secret_expires_at'], properties: { id: { type: 'string' }, secret: { type: 'string', pattern: '^whsec_' }, old_secret_expires_at: { ...time, type: ['string', 'null'] } } },
        1,
      ),
    ),
    '404': notFound,
    '409': response("An earlier rotation's overlap is still running (the message names its end): rotate with an overlap after then, or now without one.", envelopeError(['conflict'])),
    ...JSON_BODY_ERRORS,
    '501': notImplemented,
  },
};

export const testWebhookDoc: OperationDoc = {
  tag: 'Webhooks',
  description: 'Queues a `webhook.test` event for the endpoint, sent at once by the dispatcher like any event. Reads no body.',
  readsQuery: true,
  tooManyRequests:
    'The endpoint was sent 10 test events within 60 s, its budget on every storage (`RateLimit-Policy: "webhook_tests";q=10;w=60`; one more fits every 6 s, `Retry-After` says when). ' +
    'On the memory storage, also: the merchant holds half of the webhook queue (`RateLimit-Policy: "webhook_queue"`); a full queue is 503 (docs/webhooks.md#on-the-memory-storage).',
  parameters: [idParameter],
  badRequest: `A query parameter (it takes none), or ${MALFORMED_QUERY}`,
  badRequestCodes: ['unknown_parameter', 'malformed_request'],
  responses: {
    '202': response('Queued.', ok('The event queued.', { type: 'object', additionalProperties: false, required: ['event_id', 'endpoint_id'], properties: { event_id: { type: 'string', pattern: '^evt_' }, endpoint_id: { type: 'string' } } }, 1)),
    '404': notFound,
    '409': response('The endpoint is disabled (by a 410 or days of failures): an operator enables it again.', envelopeError(['conflict'])),
    '501': notImplemented,
  },
};
