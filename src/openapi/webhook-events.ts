/**
 * The events a merchant's endpoints receive, as OpenAPI 3.1 `webhooks` (docs/webhooks.md#events):
 * one `POST` per event type, with the Standard Webhooks headers and the body
 * `{"type","timestamp","data"}`. The server sends them; the receiver answers any 2xx.
 */
import { schemaRef } from './fragments.js';
import type { Json } from './operation.js';

const time = { type: 'string', format: 'date-time', description: 'UTC, six fraction digits, the offset written out' };

const signatureHeaders: Json[] = [
  { name: 'webhook-id', in: 'header', required: true, description: 'The event id (`evt_...`), the same on every attempt: deduplicate on it.', schema: { type: 'string', pattern: '^evt_' } },
  { name: 'webhook-timestamp', in: 'header', required: true, description: 'When this attempt was signed, Unix seconds: refuse one too far from now (default 300 s).', schema: { type: 'string', pattern: '^[0-9]+$' } },
  {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    description: '`v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` under the secret; during a rotation two, separated by a space.',
    schema: { type: 'string', pattern: '^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)?$' },
  },
];

function event(type: string, summary: string, data: Json): Json {
  return {
    post: {
      operationId: `webhook_${type.replace('.', '_')}`,
      summary,
      tags: ['Webhooks'],
      // Signed by the headers below, not by an HTTP authentication scheme.
      security: [],
      parameters: signatureHeaders,
      requestBody: {
        required: true,
        content: {
          'application/json': {
            schema: { type: 'object', additionalProperties: false, required: ['type', 'timestamp', 'data'], properties: { type: { const: type }, timestamp: time, data } },
          },
        },
      },
      responses: {
        '2XX': { description: 'Received. Any other answer (or none within `WEBHOOK_TIMEOUT`) is retried on the schedule; `410 Gone` disables the endpoint.' },
      },
    },
  };
}

/** `webhooks` of the OpenAPI document. */
export function webhookEvents(): Json {
  const record = schemaRef('ChangedUser');
  return {
    'user.shared': event('user.shared', 'A user newly shared with the merchant: its record, in this merchant\'s view.', record),
    'user.updated': event('user.updated', "A field of the merchant's record of the user changed.", record),
    'user.deactivated': event('user.deactivated', 'The user was deactivated (`deactivated_at` set).', record),
    'user.unshared': event('user.unshared', 'A share was removed: only the id and the time.', {
      type: 'object',
      additionalProperties: false,
      required: ['shared_user_id', 'unshared_at'],
      properties: { shared_user_id: { type: 'string' }, unshared_at: time },
    }),
    'webhook.test': event('webhook.test', 'Sent on request (`POST /merchant/webhooks/{id}/test`).', {
      type: 'object',
      additionalProperties: false,
      required: ['endpoint_id'],
      properties: { endpoint_id: { type: 'string' } },
    }),
  };
}
