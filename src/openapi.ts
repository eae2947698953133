/**
 * The OpenAPI 3.1 document served at `/openapi.json` (SPEC section 1),
 * written by hand to describe exactly what the handler does.
 */
import { MAX_PAGE_SIZE } from './list-params.js';
import { USER_RECORD_KEYS } from './storage.js';

const timestamp = { type: 'string', description: 'UTC, six fractional digits, explicit offset', examples: ['2019-12-12T12:19:17.193961+00:00'] };
const nullableTimestamp = { ...timestamp, type: ['string', 'null'] };
const json = (schema: string) => ({ 'application/json': { schema: { $ref: `#/components/schemas/${schema}` } } });
const response = (description: string, schema: string, headers?: Record<string, unknown>) => ({ description, content: json(schema), ...(headers ? { headers } : {}) });
const envelopeErrors = {
  '400': response('Unknown, repeated or invalid parameter, or an invalid cursor; one error object per problem', 'Envelope'),
  '401': response('Missing, malformed or wrong credentials, or an unknown merchant', 'Envelope', {
    'WWW-Authenticate': { schema: { type: 'string', const: 'Basic realm="merchant", charset="UTF-8"' } },
  }),
  '403': response('The merchant is disabled', 'Envelope'),
  '405': response('Method other than GET or HEAD', 'Envelope'),
  '503': response('Storage unreachable or timing out', 'Envelope'),
};

export function openApiDocument(basePath: string): Record<string, unknown> {
  const userProperties: Record<string, unknown> = {};
  for (const key of USER_RECORD_KEYS) userProperties[key] = { type: 'string' };
  Object.assign(userProperties, {
    state: { type: ['string', 'null'] },
    country: { type: 'string', description: 'lower-case country code', examples: ['de'] },
    preferred_language: { type: 'string', description: 'lower-case language code', examples: ['en'] },
    date_joined: timestamp,
    deactivated_at: { ...nullableTimestamp, description: 'null while the user is active' },
    agreed_to_terms_and_conditions: { ...nullableTimestamp, description: 'null if never' },
    agreed_to_marketing: { ...nullableTimestamp, description: 'null if never' },
  });
  const status = { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Merchant API',
      version: '1',
      description: 'Request-signature validation and the records of users who share data with a merchant.',
    },
    servers: [{ url: basePath || '/' }],
    components: {
      securitySchemes: { merchantBasic: { type: 'http', scheme: 'basic', description: 'merchant id and API key' } },
      schemas: {
        SignatureResult: {
          type: 'object',
          required: ['status', 'is_valid'],
          properties: { status: { enum: ['ok', 'error'] }, message: { type: 'string' }, is_valid: { type: 'boolean' } },
        },
        Error: {
          type: 'object',
          required: ['code', 'message'],
          properties: {
            code: { enum: ['not_found', 'method_not_allowed', 'unauthorized', 'merchant_disabled', 'unknown_parameter', 'invalid_parameter', 'invalid_cursor', 'malformed_request', 'uri_too_long', 'storage_unavailable', 'internal_error'] },
            message: { type: 'string' },
            param: { type: 'string' },
          },
        },
        User: { type: 'object', required: [...USER_RECORD_KEYS], additionalProperties: false, properties: userProperties },
        Envelope: {
          type: 'object',
          required: ['status', 'data', 'errors'],
          properties: {
            status: { enum: ['ok', 'error'] },
            data: { type: 'array', items: { $ref: '#/components/schemas/User' } },
            next_cursor: { type: ['string', 'null'], description: 'only on paged lists; null on the last page' },
            errors: { type: 'array', items: { $ref: '#/components/schemas/Error' } },
          },
        },
        Health: status,
      },
    },
    paths: {
      '/validatesignature': {
        get: {
          summary: 'Check an API key and request signing',
          description:
            'Signature: lower-case hex HMAC-SHA224, keyed with the API key, of METHOD & pct(base_url) & pct(sorted pct(k)=pct(v) pairs), leaving out hmac and gettoken. Any other query parameters are allowed and signed.',
          parameters: [
            { name: 'cp', in: 'query', required: true, schema: { type: 'string', maxLength: 128 }, description: 'merchant id' },
            { name: 'ts', in: 'query', required: true, schema: { type: 'string', pattern: '^[0-9]+$' }, description: 'Unix time, whole seconds' },
            { name: 'salt', in: 'query', required: true, schema: { type: 'string', maxLength: 128 }, description: 'new on every request' },
            { name: 'hmac', in: 'query', required: true, schema: { type: 'string' }, description: 'the signature' },
          ],
          responses: {
            '200': response('Valid: {"status":"ok","is_valid":true}', 'SignatureResult'),
            '400': response('Missing or repeated parameter, signature mismatch, timestamp invalid or outside the window, salt already used, or a malformed query', 'SignatureResult'),
            '403': response('The merchant is disabled', 'SignatureResult'),
            '404': response('No merchant has this id: {"status":"error","is_valid":false}', 'SignatureResult'),
            '405': response('Method other than GET or HEAD', 'SignatureResult'),
            '414': response('Query string longer than 8192 characters', 'SignatureResult'),
            '503': response('Storage unreachable or timing out', 'SignatureResult'),
          },
        },
      },
      '/merchant/users': {
        get: {
          summary: "The merchant's users",
          description:
            `Ordered by shared_user_id in code-point order. Without limit and cursor: every user, streamed as one document. With limit: one page, next_cursor and a Link rel="next" header.`,
          security: [{ merchantBasic: [] }],
          parameters: [
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE } },
            { name: 'cursor', in: 'query', schema: { type: 'string' }, description: 'next_cursor of the previous page; same filters required; limit defaults to the previous page size' },
            { name: 'active', in: 'query', schema: { enum: ['true', 'false'] } },
            { name: 'joined_after', in: 'query', schema: { type: 'string', format: 'date-time' }, description: 'exclusive bound on date_joined' },
            { name: 'joined_before', in: 'query', schema: { type: 'string', format: 'date-time' }, description: 'exclusive bound on date_joined' },
          ],
          responses: {
            '200': response('The users', 'Envelope', { Link: { schema: { type: 'string' }, description: 'on paged lists with a next page' } }),
            ...envelopeErrors,
          },
        },
      },
      '/merchant/users/{shared_user_id}': {
        get: {
          summary: 'One user, as an array of one record',
          security: [{ merchantBasic: [] }],
          parameters: [{ name: 'shared_user_id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: {
            '200': response('The user', 'Envelope'),
            '404': response('No user with this id is shared with this merchant', 'Envelope'),
            ...envelopeErrors,
          },
        },
      },
      '/healthz': { get: { summary: 'The process is up', responses: { '200': response('Up', 'Health') } } },
      '/readyz': {
        get: { summary: 'The storage is reachable', responses: { '200': response('Ready', 'Health'), '503': response('Storage unreachable', 'Envelope') } },
      },
      '/openapi.json': { get: { summary: 'This document', responses: { '200': { description: 'OpenAPI 3.1' } } } },
    },
  };
}
