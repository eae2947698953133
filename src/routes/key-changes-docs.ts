/** The OpenAPI operations of the `/merchant/keys` changes (src/routes/key-changes.ts), besides what the route table and every route share. */
import { envelopeError } from '../openapi/error-codes.js';
import { MALFORMED_QUERY, response, schemaRef } from '../openapi/fragments.js';
import { JSON_BODY_ERRORS } from '../openapi/json-body-errors.js';
import type { Json, OperationDoc } from '../openapi/operation.js';
import { MAX_ACTIVE_KEYS, MAX_KEY_OVERLAP_MS } from '../storage/key-changes.js';
import { KEY_SCOPES, MAX_ALLOW_FROM, MAX_KEY_NAME_LENGTH } from '../storage/key-limits.js';

const time = { type: 'string', format: 'date-time', description: 'UTC, six fraction digits, the offset written out' };
const duration = (what: string, examples: string[]): Json => ({ type: 'string', pattern: '^[0-9]{1,9}(ms|s|m|h|d)$', description: what, examples });
const name: Json = { type: ['string', 'null'], minLength: 1, maxLength: MAX_KEY_NAME_LENGTH, description: 'What the merchant calls the key (no control character); null: unnamed.' };
const allowFrom = (empty: string): Json => ({ type: 'array', maxItems: MAX_ALLOW_FROM, items: { type: 'string', examples: ['203.0.113.0/24'] }, description: `Networks in CIDR notation (IPv4 or IPv6) the key may be used from, stored canonical; ${empty}` });
const ends: Json = {
  expires_at: { ...time, description: 'When the key stops working (RFC 3339, later than now). Give this or `expires_in`; neither: never.' },
  expires_in: duration('How long from now the key works: `1h`, `30d`, `90d`; from 1 s to 366 days.', ['90d']),
};

/** A key with its secret: the 7 fields of `GET /merchant/keys`, then `secret` (and `extra`). */
function withSecret(extra: Json = {}): Json {
  return {
    allOf: [schemaRef('Key')],
    type: 'object',
    required: ['secret', ...Object.keys(extra)],
    properties: { secret: { type: 'string', minLength: 43, description: 'The key itself: shown only in this answer, stored only sealed. Use it as the HTTP Basic password.' }, ...extra },
  };
}

function ok(description: string, item: Json): Json {
  return { type: 'object', description, additionalProperties: false, required: ['status', 'data', 'errors'], properties: { status: { const: 'ok' }, data: { type: 'array', items: item, minItems: 1, maxItems: 1 }, errors: { type: 'array', maxItems: 0 } } };
}

const keyIdParameter: Json = { name: 'key_id', in: 'path', required: true, description: 'The key\'s public id (`key_...`, as `GET /merchant/keys` lists it).', schema: { type: 'string', minLength: 1 } };
const notFound = response('This merchant has no working key with this id (revoked, past its end, never made, or another merchant\'s: the same answer).', envelopeError(['not_found']));
const notImplemented = response('The calling key is a test key, which changes no key (docs/test-mode.md#test-keys), or the storage behind this server cannot change keys (a storage of its own without the optional key operations; the memory and MySQL storages have them).', envelopeError(['not_implemented']));
const giving = (what: string): Json =>
  response(
    `The merchant is disabled (its key is right), the key lacks the scope \`keys:manage\` or may not be used from this address (\`address_not_allowed\`), or ${what} a scope the calling key lacks itself (\`insufficient_scope\`; the message names the scope): a key gives only scopes it has.`,
    envelopeError(['merchant_disabled', 'insufficient_scope', 'address_not_allowed']),
  );
const JSON_400 = 'A body that is not a JSON object (`malformed_request`), a member it does not take (`unknown_parameter`), a bad value (`invalid_parameter`, `param` names it), a query parameter (it takes none), or';
const MANAGE = 'Needs a key with the scope `keys:manage` (docs/protocol.md#managing-keys); audited with the key that made the change.';

export const createKeyDoc: OperationDoc = {
  tag: 'Keys',
  description:
    `Adds a random key. The answer holds the key itself (\`secret\`), shown only this once. A key gives only scopes it has itself. A merchant has at most ${MAX_ACTIVE_KEYS} working keys. ` +
    `The new key works at once on every instance. A rotated key keeps its mode. A test key cannot change keys (501). ${MANAGE}`,
  readsQuery: true,
  requestBody: {
    required: true,
    content: {
      'application/json': {
        schema: {
          type: 'object',
          additionalProperties: false,
          required: ['scopes'],
          properties: {
            name,
            scopes: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', enum: [...KEY_SCOPES] }, description: 'What the key may do; each one the calling key has.' },
            allow_from: { ...allowFrom('at least one when given; leave it out for anywhere.'), minItems: 1 },
            ...ends,
            mode: { type: 'string', enum: ['live', 'test'], default: 'live', description: '`test`: a test key (its secret starts with `test_`) that reaches only the merchant\'s test dataset (docs/test-mode.md); refused with `test_mode_disabled` where the operator turned test mode off.' },
          },
        },
      },
    },
  },
  badRequest: `${JSON_400} ${MALFORMED_QUERY} Both \`expires_at\` and \`expires_in\` is \`malformed_request\`.`,
  badRequestCodes: ['malformed_request', 'unknown_parameter', 'invalid_parameter'],
  responses: {
    '201': response('The key, with its secret.', ok('The key added.', withSecret())),
    '403': giving('the body asks for'),
    '409': response(`The merchant has ${MAX_ACTIVE_KEYS} working keys, the most it may have.`, envelopeError(['conflict'])),
    ...JSON_BODY_ERRORS,
    '501': notImplemented,
  },
};

export const rotateKeyDoc: OperationDoc = {
  tag: 'Keys',
  description:
    "Replaces a key by a new random one with the same name, scopes and networks, answered with its secret (shown only this once). With `expire_old_in` the old key keeps working beside it until then " +
    `(at most ${MAX_KEY_OVERLAP_MS / 86_400_000} days; an earlier end of the old key stays), so every client can switch without a failed request; without it the old key stops at once. ` +
    `The body may be left out. The new key has no end unless \`expires_at\` or \`expires_in\` gives one. ${MANAGE}`,
  readsQuery: true,
  parameters: [keyIdParameter],
  requestBody: {
    required: false,
    content: {
      'application/json': {
        schema: { type: 'object', additionalProperties: false, properties: { expire_old_in: duration(`How long the old key keeps working: \`0s\` (the default: it stops now) to \`${MAX_KEY_OVERLAP_MS / 86_400_000}d\`.`, ['24h']), ...ends } },
      },
    },
  },
  badRequest: `${JSON_400} ${MALFORMED_QUERY}`,
  badRequestCodes: ['malformed_request', 'unknown_parameter', 'invalid_parameter'],
  responses: {
    '200': response(
      'The new key, with its secret, and when the old one stops.',
      ok('The key rotated in.', withSecret({ old_key_id: { type: 'string', description: 'The key rotated out.' }, old_key_expires_at: { ...time, description: 'When the old key stops working (now, without `expire_old_in`).' } })),
    ),
    '403': giving('the key rotated has'),
    '404': notFound,
    '409': response(`With \`expire_old_in\`: the merchant has ${MAX_ACTIVE_KEYS} working keys, the most it may have (rotate without an overlap, or revoke a key first).`, envelopeError(['conflict'])),
    ...JSON_BODY_ERRORS,
    '501': notImplemented,
  },
};

export const updateKeyDoc: OperationDoc = {
  tag: 'Keys',
  description: `Changes a key's name or the networks it may be used from (its scopes and end are fixed: rotate for another key). Answers the key as \`GET /merchant/keys\` lists it. ${MANAGE}`,
  readsQuery: true,
  parameters: [keyIdParameter],
  requestBody: {
    required: true,
    content: { 'application/json': { schema: { type: 'object', additionalProperties: false, minProperties: 1, properties: { name, allow_from: allowFrom('`[]`: anywhere again.') } } } },
  },
  badRequest: `${JSON_400} ${MALFORMED_QUERY} A body with neither member is \`malformed_request\`.`,
  badRequestCodes: ['malformed_request', 'unknown_parameter', 'invalid_parameter'],
  responses: {
    '200': response('The key after the change.', ok('The key.', schemaRef('Key'))),
    '404': notFound,
    ...JSON_BODY_ERRORS,
    '501': notImplemented,
  },
};

export const revokeKeyDoc: OperationDoc = {
  tag: 'Keys',
  description:
    'Revokes a key now: its next request is 401 on this instance at once, on others within their key cache (`KEY_CACHE_TTL`, default 10 s). Answers 204 with no body. ' +
    `A key may revoke itself, but never the merchant's last working key with \`keys:manage\` (409). ${MANAGE}`,
  readsQuery: true,
  parameters: [keyIdParameter],
  badRequest: `A query parameter (it takes none), or ${MALFORMED_QUERY}`,
  badRequestCodes: ['unknown_parameter', 'malformed_request'],
  responses: {
    '204': { description: 'Revoked.' },
    '404': notFound,
    '409': response('The last working key with `keys:manage`: create another one first.', envelopeError(['conflict'])),
    '501': notImplemented,
  },
};
