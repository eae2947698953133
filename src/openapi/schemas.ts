/** `components.schemas`: the bodies of every answer, success and error. */
import { MAX_ID_LENGTH, USER_RECORD_KEYS } from '../storage/contract.js';
import { KEY_SCOPES, MAX_ALLOW_FROM, MAX_KEY_NAME_LENGTH } from '../storage/key-limits.js';
import { ALL_CODES, ERROR_CODES, statusOf } from './error-codes.js';
import { schemaRef } from './fragments.js';
import type { Json } from './operation.js';

const timestamp = {
  type: 'string',
  format: 'date-time',
  pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}\\+00:00$',
  description: 'UTC, exactly six fraction digits, the offset written out',
  examples: ['2019-12-12T12:19:17.193961+00:00'],
};
const nullable = (schema: Json, description: string) => ({ ...schema, type: ['string', 'null'], description });
const noErrors = { type: 'array', maxItems: 0 };

/** A record of a listing in `order=updated_at`: the 14 keys, then `updated_at`. */
function changedUserSchema(): Json {
  const user = userSchema();
  return {
    ...user,
    description: `A user record of a listing in \`order=updated_at\`: the ${USER_RECORD_KEYS.length} keys, then \`updated_at\`, in this order.`,
    required: [...USER_RECORD_KEYS, 'updated_at'],
    properties: { ...(user.properties as Record<string, Json>), updated_at: { ...timestamp, description: 'when the record or its share with this merchant last changed (UTC)' } },
  };
}

function userSchema(): Json {
  const properties: Json = {};
  for (const key of USER_RECORD_KEYS) properties[key] = { type: 'string' };
  Object.assign(properties, {
    shared_user_id: { type: 'string', minLength: 1, maxLength: MAX_ID_LENGTH, description: 'the id as shared with this merchant' },
    state: { type: ['string', 'null'] },
    country: { type: 'string', description: 'lower-case country code', examples: ['de'] },
    preferred_language: { type: 'string', description: 'lower-case language code', examples: ['en'] },
    date_joined: timestamp,
    deactivated_at: nullable(timestamp, 'null while the user is active'),
    agreed_to_terms_and_conditions: nullable(timestamp, 'null if never'),
    agreed_to_marketing: nullable(timestamp, 'null if never'),
  });
  return {
    type: 'object',
    description: `A user record: always these ${USER_RECORD_KEYS.length} keys, in this order.`,
    required: [...USER_RECORD_KEYS],
    additionalProperties: false,
    properties,
  };
}

/** One key's metadata as `GET /merchant/keys` answers it: never its secret. */
function keySchema(): Json {
  return {
    type: 'object',
    description: 'One of the merchant\'s keys that still work (not revoked, not expired): these 8 keys, in this order; never the secret.',
    required: ['key_id', 'name', 'scopes', 'created_at', 'expires_at', 'last_used_at', 'allow_from', 'mode'],
    additionalProperties: false,
    properties: {
      key_id: { type: 'string', pattern: '^key_[0-9a-hjkmnp-tv-z]{12}$', description: 'the public id of the key' },
      name: { type: ['string', 'null'], maxLength: MAX_KEY_NAME_LENGTH, description: 'what the operator or the merchant called the key; null if unnamed' },
      scopes: { type: 'array', items: { type: 'string', enum: [...KEY_SCOPES] }, minItems: 1, uniqueItems: true, description: '`signature`: `/validatesignature`; `users:read`: the users and keys; `webhooks:manage`: `/merchant/webhooks`; `keys:manage`: adding, rotating, changing and revoking keys' },
      created_at: nullable(timestamp, 'when the key was made; null if the storage does not know (a seed key without it)'),
      expires_at: nullable(timestamp, 'when the key stops working; null: never'),
      last_used_at: nullable(timestamp, 'when the key was last used, to within about a minute; null if not seen in use'),
      allow_from: { type: 'array', maxItems: MAX_ALLOW_FROM, items: { type: 'string' }, description: 'the networks (CIDR) the key may be used from; empty: anywhere' },
      mode: { type: 'string', enum: ['live', 'test'], description: '`test`: the key reaches the test dataset only, its secret starts with `test_` (docs/test-mode.md); `live`: the live data' },
    },
  };
}

/** A success envelope: `status` ok, `data` as given, `errors` empty, and `extra` properties. */
function okEnvelope(description: string, data: Json, extra: Json = {}): Json {
  return {
    type: 'object',
    description,
    required: ['status', 'data', ...Object.keys(extra), 'errors'],
    additionalProperties: false,
    properties: { status: { const: 'ok' }, data, ...extra, errors: noErrors },
  };
}

export function schemas(): Json {
  const users = { type: 'array', items: schemaRef('User') };
  // A listing in order=updated_at carries `updated_at`; every other answer the 14 keys.
  const listed = { type: 'array', items: { oneOf: [schemaRef('User'), schemaRef('ChangedUser')] } };
  // The change feed (include_removed=true): its records and tombstones. A feed answer without a tombstone
  // is a `UserPage`/`UserList` of `ChangedUser` records; one with a tombstone (`contains`) is a `Change…`, never both.
  const changes = { type: 'array', items: { oneOf: [schemaRef('ChangedUser'), schemaRef('Removal')] }, contains: schemaRef('Removal') };
  return {
    User: userSchema(),
    ChangedUser: changedUserSchema(),
    Removal: {
      type: 'object',
      description:
        'A share removed from this merchant (unshared or erased), in the change feed (`include_removed=true`) only: drop the record you hold under ' +
        'this `shared_user_id`. Listed by `removed_at` among the records by `updated_at`; a user shared again is listed as its record instead.',
      required: ['shared_user_id', 'removed_at'],
      additionalProperties: false,
      properties: {
        shared_user_id: { type: 'string', minLength: 1, maxLength: 128 },
        removed_at: { type: 'string', format: 'date-time', description: 'when the share was removed, UTC with microseconds', examples: ['2026-12-06T08:30:00.123456+00:00'] },
      },
    },
    UserList: okEnvelope('The whole list (neither `limit` nor `cursor`): no `next_cursor`. Records are `ChangedUser` in `order=updated_at`.', listed),
    UserPage: okEnvelope('One page (`limit` or `cursor`). Records are `ChangedUser` in `order=updated_at`.', listed, {
      next_cursor: { type: ['string', 'null'], minLength: 1, description: 'the cursor of the next page; null on the last page' },
    }),
    ChangeList: okEnvelope('The whole change feed (`include_removed=true`, neither `limit` nor `cursor`) when it holds a tombstone.', changes),
    ChangePage: okEnvelope('One page of the change feed (`include_removed=true`, `limit` or `cursor`) when it holds a tombstone.', changes, {
      next_cursor: { type: ['string', 'null'], minLength: 1, description: 'the cursor of the next page; null on the last page' },
    }),
    UserOne: okEnvelope('One user.', { ...users, minItems: 1, maxItems: 1 }),
    Key: keySchema(),
    KeyList: okEnvelope("The merchant's keys that still work, oldest first.", { type: 'array', items: schemaRef('Key') }),
    Error: {
      type: 'object',
      description: 'One problem.',
      required: ['code', 'message'],
      additionalProperties: false,
      properties: {
        code: {
          type: 'string',
          enum: ALL_CODES,
          description: ALL_CODES.map((code) => `\`${code}\` (${statusOf(code)}): ${ERROR_CODES[code]}`).join('; '),
        },
        message: { type: 'string' },
        param: { type: 'string', description: 'the parameter concerned, as sent' },
      },
    },
    ErrorEnvelope: {
      type: 'object',
      description: 'An error of every path but `/validatesignature` (and of the runtime adapters on every path).',
      required: ['status', 'data', 'errors'],
      additionalProperties: false,
      properties: {
        status: { const: 'error' },
        data: { type: 'array', maxItems: 0 },
        errors: { type: 'array', minItems: 1, items: schemaRef('Error') },
      },
    },
    SignatureValid: {
      type: 'object',
      required: ['status', 'is_valid'],
      additionalProperties: false,
      properties: { status: { const: 'ok' }, is_valid: { const: true } },
    },
    SignatureError: {
      type: 'object',
      description: 'An error of `/validatesignature`; several messages are joined by a space.',
      required: ['status', 'message', 'is_valid'],
      additionalProperties: false,
      properties: { status: { const: 'error' }, message: { type: 'string', minLength: 1 }, is_valid: { const: false } },
    },
    SignatureUnknownMerchant: {
      type: 'object',
      description: 'No merchant has this id; the one error body of `/validatesignature` without a message.',
      required: ['status', 'is_valid'],
      additionalProperties: false,
      properties: { status: { const: 'error' }, is_valid: { const: false } },
    },
    Health: {
      type: 'object',
      required: ['status'],
      additionalProperties: false,
      properties: {
        status: { const: 'ok' },
        details: {
          type: 'object',
          description: "How the storage's parts did at their last use, when the storage reports them; `serve` on MySQL adds `webhooks`, its dispatcher.",
          additionalProperties: {
            type: 'object',
            required: ['ok'],
            additionalProperties: false,
            properties: {
              ok: { type: 'boolean' },
              problem: { type: 'string' },
              running: { type: 'boolean', description: '`webhooks`: the dispatcher runs' },
              in_flight: { type: 'integer', minimum: 0, description: '`webhooks`: attempts this instance is sending' },
              pending: { type: 'integer', minimum: 0, description: '`webhooks`: deliveries waiting in the outbox (every instance), as of the last read (every 15 s)' },
              oldest_due_seconds: { type: 'number', minimum: 0, description: '`webhooks`: how long the oldest due delivery has waited past its time' },
              dropped: { type: 'integer', minimum: 0, description: '`webhooks` on the memory storage: deliveries dropped since start because its queue had no room (docs/webhooks.md#memory-storage)' },
            },
          },
        },
      },
    },
    OpenApiDocument: {
      type: 'object',
      description: 'An OpenAPI 3.1 document (this one).',
      required: ['openapi', 'info', 'paths'],
      properties: {
        openapi: { type: 'string', pattern: '^3\\.1\\.[0-9]+$' },
        info: { type: 'object', required: ['title', 'version'], properties: { title: { type: 'string' }, version: { type: 'string' } } },
        servers: { type: 'array', items: { type: 'object', required: ['url'], properties: { url: { type: 'string' } } } },
        tags: { type: 'array', items: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } } },
        paths: { type: 'object', additionalProperties: { type: 'object' } },
        components: { type: 'object' },
      },
    },
  };
}
