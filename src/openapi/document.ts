/**
 * The OpenAPI 3.1 document served at `/openapi.json` (docs/protocol.md), built
 * from the route table it is given (src/routes/table.ts) so that it names every route, and
 * written to say exactly what the handler and the runtime adapters answer:
 * every status an operation can give, with its body and headers.
 *
 * Paths, operation ids, summaries, authentication and the error shape come
 * from the route table; the parameters, successes and route-specific errors
 * of each operation from its `openapi` text, kept beside its handler in
 * src/routes/; the answers every route shares (malformed requests, 405, 431,
 * 500, ...) from shared-errors.ts. Each GET has an explicit HEAD twin with
 * the same answers and no body.
 */
import { allowedMethods } from '../http/methods.js';
import { ref } from './fragments.js';
import { headers } from './headers.js';
import type { DocumentedRoute, Json, OperationDoc } from './operation.js';
import { schemas } from './schemas.js';
import { SHARED_RESPONSES, sharedErrors } from './shared-errors.js';
import { webhookEvents } from './webhook-events.js';
import { envelopeError } from './error-codes.js';
import { response } from './fragments.js';
import { IDEMPOTENCY_KEY_RULE } from '../http/idempotency-key.js';
import { takesIdempotencyKey } from './operation.js';

/** The path item of a pattern: each route's operation (a GET with its HEAD twin). */
function pathItem(routes: readonly DocumentedRoute[]): Json {
  const allowed = allowedMethods(routes.map((route) => route.method));
  return Object.assign({}, ...routes.map((route) => (route.method === 'GET' ? readOperations(route, allowed) : { [route.method.toLowerCase()]: operationOf(route, allowed) })));
}

/**
 * Who may call a route: HTTP Basic with the scope its key needs (OpenAPI 3.1 lets a requirement of
 * any scheme list roles: here the key's scope, docs/security.md#key-scopes-and-allowlists).
 */
function securityOf(route: DocumentedRoute): Json[] {
  return route.auth === 'basic' ? [{ merchantBasic: [route.scope ?? 'users:read'] }] : [];
}

/**
 * A route's own answers come from its handler, through the pipeline, which puts `Cache-Control` and
 * `X-Request-Id` on every one, a body-less 204 too: said here once, so a route's text cannot leave them out.
 */
function ownResponses(operation: OperationDoc): Record<string, Json> {
  const every = { 'Cache-Control': ref('headers', 'Cache-Control'), 'X-Request-Id': ref('headers', 'X-Request-Id') };
  return Object.fromEntries(
    Object.entries(operation.responses).map(([status, answer]) => [status, answer.$ref !== undefined ? answer : { ...answer, headers: { ...every, ...(answer.headers as Json | undefined) } }]),
  );
}

/** The operation object of a route: what the table says, its own text, and the answers every route shares. */
function operationOf(route: DocumentedRoute, allowed: string): Json {
  const operation = route.openapi;
  const idempotent = takesIdempotencyKey(route);
  const own = { ...sharedErrors(route, operation, allowed), ...ownResponses(operation) };
  const responses = sortByStatus(idempotent ? idempotentResponses(own) : own);
  return {
    operationId: route.id,
    summary: route.summary,
    description: operation.description,
    tags: [operation.tag],
    security: securityOf(route),
    parameters: [...(operation.parameters ?? []), ...(idempotent ? [ref('parameters', 'Idempotency-Key')] : []), ref('parameters', 'X-Request-Id')],
    ...(operation.requestBody ? { requestBody: operation.requestBody } : {}),
    responses,
  };
}

/**
 * A route that takes `Idempotency-Key` (src/pipeline/idempotency.ts): its successes may be replays
 * (`Idempotent-Replayed`), and it answers 400 for a bad key, 409 while the key's request runs, 422
 * for the key of another request, 501 on a storage that keeps no keys.
 */
/** The handler's own refusals, which a key keeps (before it: authentication, the scope, a limit, which it does not). */
const REPLAYED_ERRORS = new Set(['400', '404', '409', '410', '413', '415']);

function idempotentResponses(responses: Record<string, Json>): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const [status, answer] of Object.entries(responses)) {
    out[status] = status.startsWith('2') || REPLAYED_ERRORS.has(status) ? { ...answer, headers: { ...(answer.headers as Json), 'Idempotent-Replayed': ref('headers', 'Idempotent-Replayed') } } : answer;
  }
  const running = 'A request with the same `Idempotency-Key` is still running (`idempotency_in_progress`): retry after `Retry-After` seconds to get its answer.';
  const earlier = responses['409'];
  out['409'] = earlier
    ? { ...earlier, description: `${earlier.description as string} Or: ${running}`, headers: { ...(earlier.headers as Json), 'Retry-After': ref('headers', 'Retry-After') }, content: withCode(earlier, 'idempotency_in_progress') }
    : response(running, envelopeError(['idempotency_in_progress']), ['Retry-After']);
  out['422'] = response('This `Idempotency-Key` was used within 24 hours for another request: another method, path or body (`idempotency_mismatch`). Use a new key for a new request.', envelopeError(['idempotency_mismatch']));
  const bad = responses['400'];
  if (bad) out['400'] = { ...bad, description: `${bad.description as string} Or an \`Idempotency-Key\` that is not ${IDEMPOTENCY_KEY_RULE} (\`invalid_parameter\`, param \`Idempotency-Key\`).`, content: withCode(bad, 'invalid_parameter') };
  if (!responses['501']) out['501'] = response('The storage behind this server keeps no idempotency keys (`not_implemented`): send the request without `Idempotency-Key`.', envelopeError(['not_implemented']));
  return out;
}

/** The JSON content of an envelope error response with `code` among its codes. */
function withCode(answer: Json, code: string): Json {
  const content = answer.content as { 'application/json': { schema: Json } };
  const schema = content['application/json'].schema;
  const errors = (schema.properties as { errors?: { items: { properties: { code: { enum: string[] } } } } } | undefined)?.errors;
  if (errors === undefined) return content;
  const codes = errors.items.properties.code.enum;
  if (codes.includes(code)) return content;
  const widened = { ...schema, properties: { ...(schema.properties as Json), errors: { ...errors, items: { ...errors.items, properties: { ...errors.items.properties, code: { ...errors.items.properties.code, enum: [...codes, code] } } } } } };
  return { 'application/json': { schema: widened } };
}

/** The GET operation of a route, and its HEAD twin. */
function readOperations(route: DocumentedRoute, allowed: string): Json {
  const operation = route.openapi;
  const responses = sortByStatus(limitedResponses(route, conditionalResponses(route, { ...sharedErrors(route, operation, allowed), ...ownResponses(operation) })));
  const get = {
    operationId: route.id,
    summary: route.summary,
    description: operation.description,
    tags: [operation.tag],
    security: securityOf(route),
    parameters: [...(operation.parameters ?? []), ...(route.etag ? [ref('parameters', 'If-None-Match')] : []), ref('parameters', 'X-Request-Id')],
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

/**
 * A route with `etag` (src/pipeline/conditional.ts): its 200 carries `ETag`
 * (whole bodies; not the streamed list), and `If-None-Match` naming it is 304.
 */
function conditionalResponses(route: DocumentedRoute, responses: Record<string, Json>): Record<string, Json> {
  if (!route.etag) return responses;
  const ok = responses['200']!;
  return {
    ...responses,
    '200': { ...ok, headers: { ...(ok.headers as Json), ETag: ref('headers', 'ETag') } },
    '304': {
      description:
        "Not modified: `If-None-Match` names the `ETag` of the body this request would get now (or is `*`). No body; the 200's headers " +
        'but its `Content-Type` and `Content-Length` (docs/protocol.md#conditional-requests).',
      headers: { 'Cache-Control': ref('headers', 'Cache-Control'), 'X-Request-Id': ref('headers', 'X-Request-Id'), ETag: ref('headers', 'ETag') },
    },
  };
}

/**
 * A route with a limit of its own (`listings`): its successes say what is left
 * of it in the RateLimit fields (docs/protocol.md#ratelimit-fields).
 */
function limitedResponses(route: DocumentedRoute, responses: Record<string, Json>): Record<string, Json> {
  if (route.limit === undefined) return responses;
  const fields = { 'RateLimit-Policy': ref('headers', 'RateLimit-Policy'), RateLimit: ref('headers', 'RateLimit') };
  return Object.fromEntries(Object.entries(responses).map(([status, r]) => [status, status === '200' || status === '304' ? { ...r, headers: { ...(r.headers as Json), ...fields } } : r]));
}

/** A response as HEAD gets it: the same headers and `Content-Length`, no body (a 304 has none to measure). */
function withoutBody(answer: Json): Json {
  if (answer.content === undefined && answer.$ref === undefined) return answer;
  const name = typeof answer.$ref === 'string' ? answer.$ref.replace('#/components/responses/', '') : undefined;
  const resolved = name === undefined ? answer : SHARED_RESPONSES[name]!;
  const { content: _content, headers, ...rest } = resolved as { content?: unknown; headers: Json };
  return { ...rest, headers: { ...headers, 'Content-Length': ref('headers', 'Content-Length') } };
}

/** The routes of each pattern, in table order (one per method). */
function byPattern(routes: readonly DocumentedRoute[]): Map<string, DocumentedRoute[]> {
  const patterns = new Map<string, DocumentedRoute[]>();
  for (const route of routes) patterns.set(route.pattern, [...(patterns.get(route.pattern) ?? []), route]);
  return patterns;
}

function sortByStatus(responses: Record<string, Json>): Record<string, Json> {
  return Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
}

/** The document of `routes` (the route table, `ROUTES`), served under `basePath`. */
export function openApiDocument(basePath: string, routes: readonly DocumentedRoute[]): Record<string, unknown> {
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
      { name: 'Keys', description: "The merchant's own keys' metadata, never a secret, with HTTP Basic authentication (docs/protocol.md#keys)." },
      { name: 'Webhooks', description: "The merchant's webhook endpoints, with HTTP Basic authentication (docs/webhooks.md#endpoints); the events they receive are under `webhooks`." },
      { name: 'Test mode', description: 'The simulator of a test key (`test_…`): changes to the merchant\'s test dataset, never to live data (docs/test-mode.md).' },
      { name: 'Service', description: 'Liveness, readiness and this document.' },
    ],
    paths: Object.fromEntries([...byPattern(routes)].map(([pattern, same]) => [pattern, pathItem(same)])),
    // What the server sends to a merchant's endpoints (docs/webhooks.md#events).
    webhooks: webhookEvents(),
    components: {
      securitySchemes: { merchantBasic: { type: 'http', scheme: 'basic', description: 'User name: the merchant id; password: one of its active API keys. Each operation names the scope the key needs (`users:read`, `webhooks:manage`, `keys:manage`); a key without it is 403 `insufficient_scope`.' } },
      parameters: {
        'If-None-Match': {
          name: 'If-None-Match',
          in: 'header',
          description: 'One or more `ETag`s of bodies the client holds (or `*`): when one is what this request would get now, the answer is 304 with no body.',
          schema: { type: 'string', minLength: 1, examples: ['"3q2-7wD2pQ4yk1Qf0ZlLq3mFJ4m3V6LtoHnW7yZt1Ws"'] },
        },
        'Idempotency-Key': {
          name: 'Idempotency-Key',
          in: 'header',
          description:
            `Makes a retry safe (docs/protocol.md#safe-retries): a new value per logical request, ${IDEMPOTENCY_KEY_RULE}, kept for this merchant 24 hours. ` +
            'The same key with the same method, path and body answers the stored answer again (status, body, `Content-Type`), marked `Idempotent-Replayed: true`, ' +
            'without running the request twice; with another request it is 422; while its request runs, 409. Answers of 500 and above, 408 and 429 are not kept: the retry runs.',
          schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$', examples: ['4f0c1b5e-8a0e-4e0e-9a53-2b8f3f1f6d8e'] },
        },
        'X-Request-Id': {
          name: 'X-Request-Id',
          in: 'header',
          description: 'Echoed in the answer and the access log when it is 1 to 128 visible ASCII characters; any other value is ignored (not refused).',
          schema: { type: 'string' },
        },
      },
      headers: headers(),
      responses: SHARED_RESPONSES,
      schemas: schemas(),
    },
  };
}
