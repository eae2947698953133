/** The OpenAPI operations of an endpoint's deliveries (src/routes/webhook-deliveries.ts), besides what the route table and every route share. */
import { envelopeError } from '../openapi/error-codes.js';
import { MALFORMED_QUERY, queryParameter, response } from '../openapi/fragments.js';
import { JSON_BODY_ERRORS } from '../openapi/json-body-errors.js';
import type { Json, OperationDoc } from '../openapi/operation.js';
import { DEFAULT_DELIVERY_PAGE, DELIVERY_SCAN, DELIVERY_STATES, MAX_DELIVERY_PAGE, MAX_REDELIVERIES } from '../storage/webhook-deliveries.js';
import { WEBHOOK_EVENT_TYPES } from '../webhooks/events.js';

const time = { type: 'string', format: 'date-time', description: 'UTC, six fraction digits, the offset written out' };
const timeOrNull = { ...time, type: ['string', 'null'] };

const delivery: Json = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'event_id', 'endpoint_id', 'merchant_id', 'type', 'state', 'attempts', 'next_attempt_at', 'last_attempt_at', 'last_status', 'last_error', 'created_at'],
  properties: {
    id: { type: 'string', description: "The delivery's id (decimal)." },
    event_id: { type: 'string', pattern: '^evt_', description: 'The `webhook-id` the receiver got: the same on every attempt and redelivery.' },
    endpoint_id: { type: 'string' },
    merchant_id: { type: 'string' },
    type: { type: 'string', enum: [...WEBHOOK_EVENT_TYPES] },
    state: { type: 'string', enum: [...DELIVERY_STATES], description: '`pending`: waiting for its next attempt (or being sent); `delivered`: a 2xx; `failed`: every attempt of the retry schedule failed; `cancelled`: its endpoint was disabled.' },
    attempts: { type: 'integer', minimum: 0 },
    next_attempt_at: { ...timeOrNull, description: 'While `pending`: when it is tried next. Else null.' },
    last_attempt_at: timeOrNull,
    last_status: { type: ['integer', 'null'], description: 'The HTTP status the receiver answered the last attempt with; null before any, or without an answer.' },
    last_error: { type: ['string', 'null'], description: 'Why the last attempt got no answer: `timeout`, `connection`, `connection_refused`, `tls`, `address_refused`, `dns_timeout`, `dns_failed`, ...; null when it got one (`last_status`).' },
    created_at: time,
  },
};

const idParameter: Json = { name: 'id', in: 'path', required: true, description: 'The endpoint id (`we_...`).', schema: { type: 'string', minLength: 1 } };
const notFound = (what: string) => response(what, envelopeError(['not_found']));
const notImplemented = response('The storage behind this server keeps no webhooks (a storage of its own without the optional webhook operations; the memory and MySQL storages have them).', envelopeError(['not_implemented']));

export const listWebhookDeliveriesDoc: OperationDoc = {
  tag: 'Webhooks',
  description:
    "One page of the endpoint's deliveries, newest first (by `created_at`, then `id`): those pending and those finished within the retention (default 7 days). " +
    `A page holds at most \`limit\` and looks at most ${DELIVERY_SCAN} deliveries: with \`state\` it may come back short, or empty, with a \`next_cursor\` to go on from. ` +
    '`next_cursor` is null on the last page; when there is a next page, a `Link: <…>; rel="next"` header holds its URL. Never a body or an answer of the receiver.',
  readsQuery: true,
  parameters: [
    idParameter,
    queryParameter('limit', `Page size, 1 to ${MAX_DELIVERY_PAGE} (default ${DEFAULT_DELIVERY_PAGE}).`, { type: 'integer', minimum: 1, maximum: MAX_DELIVERY_PAGE, default: DEFAULT_DELIVERY_PAGE }),
    queryParameter('cursor', 'The `next_cursor` of the previous page (give the same `state`).', { type: 'string', minLength: 1 }),
    queryParameter('state', 'Only deliveries in this state.', { type: 'string', enum: [...DELIVERY_STATES] }),
  ],
  badRequest: `One error object per problem, \`param\` naming it: an unknown or repeated parameter, a bad \`limit\` or \`state\`, a cursor that is not one (\`invalid_cursor\`), or ${MALFORMED_QUERY}`,
  badRequestCodes: ['unknown_parameter', 'invalid_parameter', 'invalid_cursor', 'malformed_request'],
  responses: {
    '200': response(
      'A page of deliveries.',
      {
        type: 'object',
        additionalProperties: false,
        required: ['status', 'data', 'next_cursor', 'errors'],
        properties: { status: { const: 'ok' }, data: { type: 'array', maxItems: MAX_DELIVERY_PAGE, items: delivery }, next_cursor: { type: ['string', 'null'] }, errors: { type: 'array', maxItems: 0 } },
      },
      ['Link'],
    ),
    '404': notFound('This merchant has no endpoint with this id: one of another merchant is the same answer.'),
    '501': notImplemented,
  },
};

const redelivered: Json = {
  type: 'object',
  additionalProperties: false,
  required: ['endpoint_id', 'matched', 'queued', 'max', 'next_cursor'],
  properties: {
    endpoint_id: { type: 'string' },
    event_id: { type: 'string', description: 'As asked.' },
    since: { ...time, description: 'As asked, canonical.' },
    matched: { type: 'integer', minimum: 0, maximum: MAX_REDELIVERIES, description: 'Deliveries found (at most `max`).' },
    queued: { type: 'integer', minimum: 0, maximum: MAX_REDELIVERIES, description: 'Of those, made due now (one being sent right now is left to its attempt).' },
    max: { const: MAX_REDELIVERIES, description: 'The most deliveries one call requeues.' },
    next_cursor: { type: ['string', 'null'], description: 'When more than `max` matched `since`: send it back as `cursor`, with the same `since`, for the rest (the oldest went now). Else null.' },
  },
};

export const redeliverWebhookDoc: OperationDoc = {
  tag: 'Webhooks',
  description:
    'Sends deliveries of the endpoint again, due now, each with its event id (receivers deduplicate on `webhook-id`) and a new signature: ' +
    "with `event_id`, the endpoint's delivery of that event; with `since`, every delivery created at or after then, the oldest first, " +
    `at most ${MAX_REDELIVERIES} per call (\`next_cursor\`, sent back as \`cursor\` with the same \`since\`, goes on with the rest). \`since\` reaches back at most the retention (default 7 days). ` +
    'Whatever state they were in (delivered, failed, cancelled, pending), they are attempted again; the retry schedule goes on from the attempts made. Audited as `webhook_redelivered`.',
  readsQuery: true,
  parameters: [idParameter],
  requestBody: {
    required: true,
    content: {
      'application/json': {
        schema: {
          type: 'object',
          additionalProperties: false,
          oneOf: [{ required: ['event_id'] }, { required: ['since'] }],
          properties: {
            event_id: { type: 'string', minLength: 1, maxLength: 64, pattern: '^evt_' },
            since: { type: 'string', format: 'date-time', examples: ['2026-11-28T04:00:00Z'] },
            cursor: { type: 'string', minLength: 1, description: 'With `since`: the `next_cursor` of the previous answer, to go on with the rest.' },
          },
        },
      },
    },
  },
  badRequest:
    'A body that is not a JSON object, or with neither or both of `event_id` and `since`, or `cursor` without `since` (`malformed_request`), a member it does not take (`unknown_parameter`), a `cursor` that is not one (`invalid_cursor`), ' +
    `a bad value, or a \`since\` older than the retention or ahead of now (\`invalid_parameter\`, the message naming the retention), a query parameter (it takes none), or ${MALFORMED_QUERY}`,
  badRequestCodes: ['malformed_request', 'unknown_parameter', 'invalid_parameter', 'invalid_cursor'],
  tooManyRequests: 'On the memory storage, also: the merchant holds half of the webhook queue (`RateLimit-Policy: "webhook_queue"`); a full queue is 503 (docs/webhooks.md#on-the-memory-storage).',
  responses: {
    '202': response('Queued.', { type: 'object', additionalProperties: false, required: ['status', 'data', 'errors'], properties: { status: { const: 'ok' }, data: { type: 'array', minItems: 1, maxItems: 1, items: redelivered }, errors: { type: 'array', maxItems: 0 } } }),
    '404': notFound('This merchant has no endpoint with this id, or the endpoint has no delivery of this `event_id`: of another merchant is the same answer.'),
    '409': response('The endpoint is disabled (by a 410 or days of failures): an operator enables it again.', envelopeError(['conflict'])),
    ...JSON_BODY_ERRORS,
    '501': notImplemented,
  },
};
