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
import type { DocumentedRoute, Json } from './operation.js';
import { schemas } from './schemas.js';
import { SHARED_RESPONSES, sharedErrors } from './shared-errors.js';
import { webhookEvents } from './webhook-events.js';

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

/** The operation object of a route: what the table says, its own text, and the answers every route shares. */
function operationOf(route: DocumentedRoute, allowed: string): Json {
  const operation = route.openapi;
  const responses = sortByStatus({ ...sharedErrors(route, operation, allowed), ...operation.responses });
  return {
    operationId: route.id,
    summary: route.summary,
    description: operation.description,
    tags: [operation.tag],
    security: securityOf(route),
    parameters: [...(operation.parameters ?? []), ref('parameters', 'X-Request-Id')],
    ...(operation.requestBody ? { requestBody: operation.requestBody } : {}),
    responses,
  };
}

/** The GET operation of a route, and its HEAD twin. */
function readOperations(route: DocumentedRoute, allowed: string): Json {
  const operation = route.openapi;
  const responses = sortByStatus(limitedResponses(route, conditionalResponses(route, { ...sharedErrors(route, operation, allowed), ...operation.responses })));
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
      securitySchemes: { merchantBasic: { type: 'http', scheme: 'basic', description: 'User name: the merchant id; password: one of its active API keys. Each operation names the scope the key needs (`users:read`, `webhooks:manage`); a key without it is 403 `insufficient_scope`.' } },
      parameters: {
        'If-None-Match': {
          name: 'If-None-Match',
          in: 'header',
          description: 'One or more `ETag`s of bodies the client holds (or `*`): when one is what this request would get now, the answer is 304 with no body.',
          schema: { type: 'string', minLength: 1, examples: ['"3q2-7wD2pQ4yk1Qf0ZlLq3mFJ4m3V6LtoHnW7yZt1Ws"'] },
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
