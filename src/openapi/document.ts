/**
 * The OpenAPI 3.1 document served at `/openapi.json` (docs/protocol.md), built
 * from the route table (src/routes/table.ts) so that it names every route, and
 * written to say exactly what the handler and the runtime adapters answer:
 * every status an operation can give, with its body and headers.
 *
 * Paths, operation ids, summaries, authentication and the error shape come
 * from the route table; the parameters, successes and route-specific errors
 * of each operation from `OPERATIONS` below; the answers every route shares
 * (malformed requests, 405, 431, 500, ...) from `sharedErrors`. Each GET has an
 * explicit HEAD twin with the same answers and no body.
 */
import { MerchantApiError, type MerchantApiErrorCode } from '../errors.js';
import { MAX_PAGE_SIZE } from '../listing/list-params.js';
import { MAX_QUERY_LENGTH, MAX_QUERY_PAIRS } from '../http/query.js';
import type { Route } from '../routes/route.js';
import { allowedMethods, ROUTES } from '../routes/table.js';
import { MAX_ID_LENGTH, USER_RECORD_KEYS } from '../storage/contract.js';

type Json = Record<string, unknown>;

/**
 * Every error code, with what it means. Typed against `MerchantApiErrorCode`
 * (src/errors.ts), so the compiler refuses a code missing here or one that
 * does not exist there; the HTTP status of each is asked of `MerchantApiError`.
 */
const ERROR_CODES: Record<MerchantApiErrorCode, string> = {
  not_found: 'an unknown path, or a user this merchant cannot see',
  method_not_allowed: 'a method other than GET and HEAD',
  unauthorized: 'missing, malformed or wrong credentials, or an unknown merchant (always the same answer)',
  merchant_disabled: 'a disabled merchant with a valid key',
  unknown_parameter: 'a parameter the endpoint does not take, one error per name',
  invalid_parameter: 'a bad or repeated value',
  invalid_cursor: 'a cursor this server did not issue for this merchant and these filters',
  malformed_request: 'a request that cannot be read honestly: bad percent-encoding, invalid UTF-8, a NUL, too many parameters, a bad or repeated Host',
  uri_too_long: `a query string longer than ${MAX_QUERY_LENGTH} characters`,
  request_timeout: 'the request did not arrive within the server\'s header or request timeout (the Node adapter)',
  headers_too_large: 'the request line and headers are larger than the runtime accepts (the Node adapter)',
  storage_unavailable: 'the storage failed or missed its deadline',
  too_many_requests: 'throttled after failed authentications, or too many listings of one merchant at once',
  internal_error: 'an unexpected failure (a bug); the answer says nothing about it',
};

const ALL_CODES = Object.keys(ERROR_CODES) as MerchantApiErrorCode[];

/** The codes answered with `status` (src/errors.ts decides, not this file). */
function codesWithStatus(status: number): MerchantApiErrorCode[] {
  return ALL_CODES.filter((code) => new MerchantApiError(code, '').status === status);
}

const ref = (kind: 'schemas' | 'headers' | 'parameters' | 'responses', name: string) => ({ $ref: `#/components/${kind}/${name}` });
const schemaRef = (name: string) => ref('schemas', name);
const jsonContent = (schema: Json) => ({ 'application/json': { schema } });
const header = (description: string, schema: Json, required = false) => ({ description, ...(required ? { required } : {}), schema });

/**
 * A response of the handler, with a JSON body. `headers` are names of
 * `components.headers` (`Cache-Control` and `X-Request-Id` always among
 * them), `inline` headers of this response only.
 */
function response(description: string, schema: Json, headers: readonly string[] = [], inline: Json = {}): Json {
  return { description, headers: { ...headerRefs(['Cache-Control', 'X-Request-Id', ...headers]), ...inline }, content: jsonContent(schema) };
}

/** A response only a runtime adapter gives, before the handler runs: no `X-Request-Id`. */
function adapterResponse(description: string, schema: Json): Json {
  return { description, headers: headerRefs(['Cache-Control']), content: jsonContent(schema) };
}

function headerRefs(names: readonly string[]): Json {
  return Object.fromEntries(names.map((name) => [name, ref('headers', name)]));
}

/** The envelope error with its codes narrowed to `codes` (all of them: the plain envelope). */
function envelopeError(codes: readonly MerchantApiErrorCode[]): Json {
  if (codes.length === ALL_CODES.length) return schemaRef('ErrorEnvelope');
  return {
    allOf: [schemaRef('ErrorEnvelope')],
    type: 'object',
    properties: { errors: { type: 'array', items: { type: 'object', properties: { code: { type: 'string', enum: [...codes] } } } } },
  };
}

/** The body of an error the handler answers on `route`, in the route's shape. */
function routeError(route: Route, codes: readonly MerchantApiErrorCode[]): Json {
  return route.errorShape === 'signature' ? schemaRef('SignatureError') : envelopeError(codes);
}

/**
 * The body of an error that the handler or, before it runs, the runtime
 * adapter may answer: the adapters know no route, so theirs is always the envelope.
 */
function routeOrAdapterError(route: Route, codes: readonly MerchantApiErrorCode[], adapterCodes: readonly MerchantApiErrorCode[]): Json {
  if (route.errorShape === 'envelope') return envelopeError([...new Set([...codes, ...adapterCodes])]);
  return { oneOf: [schemaRef('SignatureError'), envelopeError(adapterCodes)] };
}

const ADAPTER_400 =
  'the runtime adapter refused a request it cannot hand on: more than one Host line, a missing or bad Host, a bad request target, or ' +
  '(Node) a request its HTTP parser refuses. Adapter answers are in the envelope shape on every path. Bun and Deno answer some of ' +
  'these themselves with a bare status line and no body (docs/runtimes.md).';

function badRequestDescription(operation: Operation): string {
  return operation.badRequest ? `${operation.badRequest} Or, before the handler runs, ${ADAPTER_400}` : `Before the handler runs, ${ADAPTER_400}`;
}

/** What every route can answer besides its own outcomes. */
function sharedErrors(route: Route, operation: Operation): Record<string, Json> {
  const errors: Record<string, Json> = {
    '400': response(
      badRequestDescription(operation),
      routeOrAdapterError(route, operation.badRequestCodes ?? [], ['malformed_request']),
    ),
    '405': response(
      `Answered to every method other than ${allowedMethods(route).replace(', ', ' and ')} on this path. OpenAPI has no operation for ` +
        'such methods, so this answer is listed on each operation of the path.',
      routeError(route, codesWithStatus(405)),
      [],
      { Allow: header('The methods this path answers.', { type: 'string', const: allowedMethods(route) }, true) },
    ),
    '408': adapterResponse(
      'Node only: the request did not arrive within the server\'s header or request timeout. Answered by the adapter, in the envelope shape, code `request_timeout`.',
      envelopeError(['request_timeout']),
    ),
    '431': adapterResponse(
      'The request line and headers are larger than the runtime accepts (Node and Bun: 16 KiB; Deno answers 400). Node answers in the ' +
        'envelope shape, code `headers_too_large`; Bun answers a bare status line with no body.',
      envelopeError(['headers_too_large']),
    ),
    '500': response(
      'An unexpected failure (a bug). The body says nothing about it. Should the runtime itself fail, the Bun and Deno adapters answer in the envelope shape.',
      routeOrAdapterError(route, codesWithStatus(500), ['internal_error']),
    ),
  };
  if (operation.readsQuery) {
    errors['414'] = response(`The query string is longer than ${MAX_QUERY_LENGTH} characters, as sent (encoded).`, routeError(route, codesWithStatus(414)));
  }
  if (route.auth === 'basic') {
    errors['401'] = response(
      'Missing, malformed, unknown or wrong credentials: always the same answer, which does not tell which. Checked before the parameters.',
      routeError(route, codesWithStatus(401)),
      ['WWW-Authenticate'],
    );
    errors['403'] = response('The merchant is disabled (its key is right).', routeError(route, codesWithStatus(403)));
  }
  if (route.auth !== 'none') {
    errors['429'] = response(
      [
        'Too many failed authentications from this address, or for this merchant from this address (docs/security.md#throttling): ' +
          'refused before any key is compared or any storage read, until `Retry-After` seconds have passed.',
        operation.tooManyRequests,
        'Also, while the instance is busy: the merchant used more than its share of it lately (docs/security.md#fair-sharing, ' +
          '`RateLimit-Policy: "fair-share"`); retry after `Retry-After` seconds.',
      ]
        .filter(Boolean)
        .join(' '),
      routeError(route, codesWithStatus(429)),
      ['Retry-After', 'RateLimit-Policy', 'RateLimit'],
    );
  }
  if (operation.usesStorage || route.auth !== 'none') {
    errors['503'] = response(
      'The storage failed or missed its deadline (`storageTimeout`, default 5000 ms). Try again after `Retry-After` seconds.',
      routeError(route, codesWithStatus(503)),
      ['Retry-After'],
    );
  }
  return errors;
}

/** What the route table does not say about an operation. */
interface Operation {
  tag: 'Signatures' | 'Users' | 'Service';
  description: string;
  parameters?: Json[];
  /** The answers of this operation itself (successes and errors of its own). */
  responses: Record<string, Json>;
  /** Parses the query string: 414, and the 400 of a malformed query. */
  readsQuery: boolean;
  /** Calls the storage without authenticating first (authenticated routes always do): 503. */
  usesStorage?: boolean;
  /** Why this operation itself answers 400, before the adapter's reasons. */
  badRequest?: string;
  badRequestCodes?: MerchantApiErrorCode[];
  /** Why this operation itself answers 429, besides the throttling of failed authentication. */
  tooManyRequests?: string;
}

const MALFORMED_QUERY = `a malformed query string (bad percent-encoding, invalid UTF-8, a NUL, more than ${MAX_QUERY_PAIRS} parameters).`;
const STREAM_NOTE =
  'Without `limit` and `cursor`: every user, as one JSON document streamed in batches (no `Content-Length`, no `next_cursor`). ' +
  'The status is sent before the end is read: if the storage fails part-way, the connection is cut and the body is truncated, ' +
  'never a short list that looks complete.';

const OPERATIONS: Record<string, Operation> = {
  validateSignature: {
    tag: 'Signatures',
    description:
      'Checks an API key and request signing. The signature is the lower-case hex HMAC-SHA224, keyed with the API key, of ' +
      '`METHOD & pct(base_url) & pct(sorted pct(k)=pct(v) pairs)`, leaving out `hmac` and `gettoken` (docs/protocol.md#signing). ' +
      'Any other query parameters are allowed, and signed. The checks run in a fixed order and the first failing one decides: ' +
      'required parameters, merchant, disabled, signature, timestamp, salt.',
    readsQuery: true,
    parameters: [
      queryParameter('cp', 'The merchant id.', { type: 'string', minLength: 1, maxLength: MAX_ID_LENGTH }, true),
      queryParameter('ts', 'The time of signing in Unix seconds: up to 15 digits, with an optional leading `-`.', { type: 'string', minLength: 1, pattern: '^-?[0-9]{1,15}$' }, true),
      queryParameter('salt', 'A random string, new for every request; a salt is accepted once per merchant.', { type: 'string', minLength: 1, maxLength: MAX_ID_LENGTH }, true),
      queryParameter('hmac', 'The signature, hex (compared case-insensitively).', { type: 'string', minLength: 1 }, true),
      queryParameter('gettoken', 'Allowed and left out of the signature, like `hmac`.', { type: 'string' }, false),
    ],
    tooManyRequests: 'Also, with the memory storage: the merchant already holds half of the replay store (`MAX_SALTS`), until `Retry-After` seconds have passed.',
    badRequest:
      `A required parameter is absent, empty, repeated or (cp, salt) longer than ${MAX_ID_LENGTH} characters; the signature does not match; ` +
      `ts is not whole seconds or is outside the accepted window; the salt was already used; with the memory storage, ts is before the server started ` +
      `(salts seen before a restart are not known: docs/protocol.md#a-bounded-replay-store); or ${MALFORMED_QUERY}`,
    responses: {
      '200': response('The signature is valid: `{"status":"ok","is_valid":true}`.', schemaRef('SignatureValid')),
      '403': response('The merchant is disabled: `{"status":"error","message":"This account is disabled.","is_valid":false}`.', schemaRef('SignatureError')),
      '404': response('No merchant has the id `cp`: `{"status":"error","is_valid":false}`, the only body without a message.', schemaRef('SignatureUnknownMerchant')),
    },
  },
  listUsers: {
    tag: 'Users',
    description:
      "The merchant's users, in the order of `shared_user_id` by Unicode code point. " +
      `${STREAM_NOTE} With \`limit\` or \`cursor\`: one page, with \`next_cursor\` (null on the last page) and, when there is a next ` +
      'page, a `Link: <…>; rel="next"` header with its URL. Every parameter at most once. `/merchant/users/` is the same endpoint.',
    readsQuery: true,
    parameters: [
      queryParameter('limit', `Page size, 1 to ${MAX_PAGE_SIZE}.`, { type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE }),
      queryParameter('cursor', 'The `next_cursor` of the previous page, with the same filters. Without `limit` the page size stays what it was.', { type: 'string', minLength: 1 }),
      queryParameter('active', '`true`: users with `deactivated_at` null; `false`: deactivated users.', { type: 'string', enum: ['true', 'false'] }),
      timestampFilter('joined_after', 'later'),
      timestampFilter('joined_before', 'earlier'),
    ],
    badRequest: `One error object per problem, \`param\` naming it: an unknown, repeated or invalid parameter, an invalid cursor, or ${MALFORMED_QUERY}`,
    badRequestCodes: ['unknown_parameter', 'invalid_parameter', 'invalid_cursor', 'malformed_request'],
    tooManyRequests: 'Also: the merchant already has as many listings running on this instance as `merchantConcurrency` allows (default 4).',
    responses: {
      '200': response(
        'The users: a page (`limit` or `cursor` given) or the whole list (streamed).',
        { oneOf: [schemaRef('UserPage'), schemaRef('UserList')] },
        ['Link'],
      ),
    },
  },
  getUser: {
    tag: 'Users',
    description:
      'One user as shared with this merchant, as an array of one record. The id is one path segment, percent-decoded strictly. ' +
      'A user shared only with another merchant is 404, exactly like one that does not exist. Takes no query parameters.',
    readsQuery: true,
    parameters: [
      {
        name: 'shared_user_id',
        in: 'path',
        required: true,
        description: 'The id, percent-encoded (a `/` in it as `%2F`).',
        schema: { type: 'string', minLength: 1 },
      },
    ],
    badRequest: `A query parameter (this endpoint takes none; \`unknown_parameter\` per name), a path with bad percent-encoding, invalid UTF-8 or a NUL, or ${MALFORMED_QUERY}`,
    badRequestCodes: ['unknown_parameter', 'malformed_request'],
    responses: {
      '200': response('The user.', schemaRef('UserOne')),
      '404': ref('responses', 'NotFound'),
    },
  },
  health: {
    tag: 'Service',
    description: 'Liveness: answers while the process runs. Ignores the query string.',
    readsQuery: false,
    responses: { '200': response('The process is up: `{"status":"ok"}`.', schemaRef('Health')) },
  },
  ready: {
    tag: 'Service',
    description: 'Readiness: answers 200 when the storage answers a ping, else 503. Ignores the query string.',
    readsQuery: false,
    usesStorage: true,
    responses: { '200': response('The storage answers: `{"status":"ok"}`.', schemaRef('Health')) },
  },
  openApi: {
    tag: 'Service',
    description: 'This document. Ignores the query string.',
    readsQuery: false,
    responses: { '200': response('The OpenAPI 3.1 document.', schemaRef('OpenApiDocument')) },
  },
};

function queryParameter(name: string, description: string, schema: Json, required = false): Json {
  return { name, in: 'query', description, ...(required ? { required } : {}), schema };
}

function timestampFilter(name: string, side: 'later' | 'earlier'): Json {
  return queryParameter(
    name,
    `Keeps users whose \`date_joined\` is ${side} than this (not equal). Any RFC 3339 date-time, including a leap second (\`:60\`, read as ` +
      '`:59.999999`), any number of fraction digits (cut to microseconds) and year 0000. Also accepted: a date alone (midnight UTC), ' +
      'no seconds, `,` as the decimal sign, `t` or a space for `T`, an offset without `:`, no offset (UTC). Send a `+` as `%2B`.',
    { type: 'string', format: 'date-time', examples: ['2020-01-31T10:00:00Z'] },
  );
}

/** The GET operation of a route, and its HEAD twin. */
function pathItem(route: Route): Json {
  const operation = OPERATIONS[route.id];
  if (!operation) throw new TypeError(`openapi: route ${route.id} has no entry in OPERATIONS.`);
  const responses = sortByStatus({ ...sharedErrors(route, operation), ...operation.responses });
  const get = {
    operationId: route.id,
    summary: route.summary,
    description: operation.description,
    tags: [operation.tag],
    security: route.auth === 'basic' ? [{ merchantBasic: [] }] : [],
    parameters: [...(operation.parameters ?? []), ref('parameters', 'X-Request-Id')],
    responses,
  };
  const head = {
    ...get,
    operationId: `${route.id}Head`,
    summary: `${route.summary} (headers only)`,
    description:
      `The answer GET would give, status and headers, without a body; \`Content-Length\` is the length of the GET body wherever it is known ` +
      `(every answer but the streamed list).${route.auth === 'signature' ? ' Signed with the method `HEAD`; uses up its salt like a GET.' : ''}`,
    responses: Object.fromEntries(Object.entries(responses).map(([status, r]) => [status, withoutBody(r)])),
  };
  // The same path with a trailing slash is the same endpoint (said in prose too): for tools, such as test/support/openapi-validator.ts.
  return { ...(route.trailingSlash ? { 'x-trailing-slash': true } : {}), get, head };
}

/** A response as HEAD gets it: the same headers and `Content-Length`, no body. */
function withoutBody(answer: Json): Json {
  const name = typeof answer.$ref === 'string' ? answer.$ref.replace('#/components/responses/', '') : undefined;
  const resolved = name === undefined ? answer : RESPONSES[name]!;
  const { content: _content, headers, ...rest } = resolved as { content?: unknown; headers: Json };
  return { ...rest, headers: { ...headers, 'Content-Length': ref('headers', 'Content-Length') } };
}

function sortByStatus(responses: Record<string, Json>): Record<string, Json> {
  return Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
}

/** `components.responses`. */
const RESPONSES: Record<string, Json> = {
  NotFound: response(
    'No user with this id is shared with this merchant. Any path that is not in this document answers the same shape, ' +
      'with the message `No such endpoint.`',
    envelopeError(codesWithStatus(404)),
  ),
};

const timestamp = {
  type: 'string',
  format: 'date-time',
  pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}\\+00:00$',
  description: 'UTC, exactly six fraction digits, the offset written out',
  examples: ['2019-12-12T12:19:17.193961+00:00'],
};
const nullable = (schema: Json, description: string) => ({ ...schema, type: ['string', 'null'], description });
const noErrors = { type: 'array', maxItems: 0 };

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

function schemas(): Json {
  const users = { type: 'array', items: schemaRef('User') };
  return {
    User: userSchema(),
    UserList: okEnvelope('The whole list (neither `limit` nor `cursor`): no `next_cursor`.', users),
    UserPage: okEnvelope('One page (`limit` or `cursor`).', users, {
      next_cursor: { type: ['string', 'null'], minLength: 1, description: 'the cursor of the next page; null on the last page' },
    }),
    UserOne: okEnvelope('One user.', { ...users, minItems: 1, maxItems: 1 }),
    Error: {
      type: 'object',
      description: 'One problem.',
      required: ['code', 'message'],
      additionalProperties: false,
      properties: {
        code: {
          type: 'string',
          enum: ALL_CODES,
          description: ALL_CODES.map((code) => `\`${code}\` (${new MerchantApiError(code, '').status}): ${ERROR_CODES[code]}`).join('; '),
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
    Health: { type: 'object', required: ['status'], additionalProperties: false, properties: { status: { const: 'ok' } } },
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


function headers(): Json {
  return {
    'Cache-Control': header('Every answer, errors included.', { type: 'string', const: 'no-store' }, true),
    'X-Request-Id': header(
      "The request's own `X-Request-Id` when valid, else a new UUID; on every answer of the handler (not on those the runtime adapters give before it runs).",
      { type: 'string', minLength: 1, maxLength: 128 },
    ),
    'WWW-Authenticate': header('The challenge of HTTP Basic.', { type: 'string', const: 'Basic realm="merchant", charset="UTF-8"' }, true),
    'Retry-After': header('Seconds to wait before trying again.', { type: 'string', pattern: '^[0-9]+$', examples: ['1'] }, true),
    'RateLimit-Policy': header('The limit that was passed (draft-ietf-httpapi-ratelimit-headers).', { type: 'string', minLength: 1, examples: ['"auth-merchant";q=10;w=300'] }, true),
    RateLimit: header('Nothing left of the limit until it resets (draft-ietf-httpapi-ratelimit-headers).', { type: 'string', minLength: 1, examples: ['"auth-merchant";r=0;t=300'] }, true),
    Link: header('Only when there is a next page: its URL, with the same limit and filters.', { type: 'string', pattern: '^<[^>]+>; rel="next"$' }),
    'Content-Length': header('HEAD: the length of the GET body, wherever it is known (not for the streamed list).', { type: 'string', pattern: '^[0-9]+$' }),
  };
}

export function openApiDocument(basePath: string): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Merchant API',
      version: '1',
      description:
        'Request-signature validation and the records of users who share data with a merchant (docs/protocol.md). Every answer is JSON ' +
        'with `Cache-Control: no-store`. `/validatesignature` answers errors as `{"status":"error","message":…,"is_valid":false}`; every ' +
        'other path, and the runtime adapters on every path, answer the envelope `{"status":"error","data":[],"errors":[{code,message,param?}]}`. ' +
        'A path not in this document answers 404 `not_found` (the `NotFound` response). Some requests are so broken that the runtime\'s ' +
        'HTTP parser answers them itself, before this API runs: on Bun and Deno with a bare status line and no body (docs/runtimes.md).',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: basePath || '/' }],
    tags: [
      { name: 'Signatures', description: 'Checking request signatures (docs/protocol.md#signing).' },
      { name: 'Users', description: "A merchant's users, with HTTP Basic authentication (docs/protocol.md#users)." },
      { name: 'Service', description: 'Liveness, readiness and this document.' },
    ],
    paths: Object.fromEntries(ROUTES.map((route) => [route.pattern, pathItem(route)])),
    components: {
      securitySchemes: { merchantBasic: { type: 'http', scheme: 'basic', description: 'User name: the merchant id; password: one of its active API keys.' } },
      parameters: {
        'X-Request-Id': {
          name: 'X-Request-Id',
          in: 'header',
          description: 'Echoed in the answer and the access log when it is 1 to 128 visible ASCII characters; any other value is ignored (not refused).',
          schema: { type: 'string' },
        },
      },
      headers: headers(),
      responses: RESPONSES,
      schemas: schemas(),
    },
  };
}
