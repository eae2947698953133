/**
 * The OpenAPI document of /openapi.json (src/openapi/document.ts) tells the exact truth:
 * Redocly's recommended rules find nothing in it; it documents, for every
 * route, every status the handler and the adapters can answer; and answers
 * produced in process (the failures the HTTP suites cannot provoke: a storage
 * down, a bug, throttling) validate against it. The answers of the HTTP
 * conformance suite are checked against it in test/http-{node,bun,deno}.test.ts.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createMerchantApi, type MerchantApiOptions } from '../../src/api.js';
import { MerchantApiError } from '../../src/errors.js';
import { MAX_PAGE_SIZE } from '../../src/listing/list-params.js';
import { silentLogger } from '../../src/observe/logger.js';
import { openApiDocument } from '../../src/openapi/document.js';
import { MAX_QUERY_LENGTH } from '../../src/http/query.js';
import { allowedMethods } from '../../src/http/methods.js';
import { errorResponse } from '../../src/http/error-reply.js';
import { ROUTES } from '../../src/routes/table.js';
import type { Storage } from '../../src/storage/contract.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { basic, NOW_MS, ORIGIN, signedUrl } from '../support/api.js';
import { contractSeed } from '../support/seeds.js';
import { exchangeOf, OpenApiValidator, type Exchange } from '../support/openapi-validator.js';
import { ROOT } from '../support/processes.js';

type Json = Record<string, any>;

const work = mkdtempSync(join(tmpdir(), 'merchant-api-openapi-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface LintReport {
  totals: { errors: number; warnings: number };
  problems: Json[];
}

/** Runs `redocly lint` on the files; it prints one JSON report per file, merged here. */
function redoclyLint(files: string[]): Promise<LintReport> {
  const args = ['lint', ...files, '--config', join(ROOT, 'test/openapi/redocly.yaml'), '--format', 'json'];
  // No telemetry and no update check: the lint must work offline.
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
  return new Promise((resolve, reject) => {
    execFile(join(ROOT, 'node_modules/.bin/redocly'), args, { cwd: work, env, timeout: 60_000 }, (error, stdout, stderr) => {
      const start = stdout.indexOf('{');
      if (start === -1) return reject(new Error(`redocly printed no report (${error?.message}):\n${stdout}\n${stderr}`));
      const reports = stdout
        .slice(start)
        .split(/(?<=\})\s*(?=\{\s*"totals")/)
        .map((text) => JSON.parse(text) as LintReport);
      if (reports.length !== files.length) return reject(new Error(`redocly printed ${reports.length} reports for ${files.length} files:\n${stdout}`));
      resolve({
        totals: { errors: sum(reports.map((r) => r.totals.errors)), warnings: sum(reports.map((r) => r.totals.warnings)) },
        problems: reports.flatMap((r) => r.problems),
      });
    });
  });
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

const operationsOf = (document: Json) =>
  Object.entries(document.paths as Record<string, Json>).flatMap(([path, item]) =>
    ['get', 'head', 'post', 'put', 'patch', 'delete'].filter((m) => item[m]).map((method) => ({ path, method, operation: item[method] as Json })),
  );

describe('the OpenAPI document', () => {
  it("passes Redocly's recommended rules with no error and no warning, with and without a base path", async () => {
    const files = ['', '/merchant-api'].map((basePath, i) => {
      const file = join(work, `openapi-${i}.json`);
      writeFileSync(file, JSON.stringify(openApiDocument(basePath, ROUTES), null, 2));
      return file;
    });
    const report = await redoclyLint(files);
    const problems = report.problems.map((p) => `${p.severity} ${p.ruleId} ${p.location?.[0]?.pointer}: ${p.message}`);
    expect(problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  });

  it('lists exactly the error codes of src/errors.ts', () => {
    const source = readFileSync(join(ROOT, 'src/errors.ts'), 'utf8');
    const union = /export type MerchantApiErrorCode =([^;]+);/.exec(source)![1]!;
    const codes = [...union.matchAll(/'([a-z_]+)'/g)].map((m) => m[1]);
    const documented = openApiDocument('', ROUTES).components as Json;
    expect(documented.schemas.Error.properties.code.enum).toEqual(codes);
  });

  it('has an operation for every route, named after it, with its authentication; a GET with its HEAD twin', () => {
    const document = openApiDocument('', ROUTES);
    const paths = document.paths as Record<string, Json>;
    expect(Object.keys(paths)).toEqual([...new Set(ROUTES.map((r) => r.pattern))]);
    for (const route of ROUTES.filter((r) => r.method !== 'GET')) {
      const operation = paths[route.pattern]![route.method.toLowerCase()];
      expect(operation.operationId).toBe(route.id);
      expect(operation.security).toEqual(route.auth === 'basic' ? [{ merchantBasic: [route.scope ?? 'users:read'] }] : []);
    }
    for (const route of ROUTES.filter((r) => r.method === 'GET')) {
      const { get, head } = paths[route.pattern]!;
      expect([get.operationId, head.operationId]).toEqual([route.id, `${route.id}Head`]);
      const security = route.auth === 'basic' ? [{ merchantBasic: [route.scope ?? 'users:read'] }] : [];
      expect([get.security, head.security]).toEqual([security, security]);
      expect(Object.keys(head.responses)).toEqual(Object.keys(get.responses));
      for (const [status, response] of Object.entries(head.responses) as [string, Json][]) {
        expect(response.content).toBeUndefined();
        // A 304 has no body of its own, GET's or HEAD's, and so no length (RFC 9110 §15.4.5).
        if (status !== '304') expect(response.headers['Content-Length']).toBeDefined();
      }
      // A route with ETags: the tag on its 200, If-None-Match read, and the 304 with the tag.
      for (const operation of [get, head]) {
        expect(operation.responses['304'] !== undefined, route.id).toBe(route.etag === true);
        expect(operation.parameters.some((p: Json) => p.$ref === '#/components/parameters/If-None-Match'), route.id).toBe(route.etag === true);
        if (route.etag) expect([operation.responses['200'].headers.ETag, operation.responses['304'].headers.ETag]).toEqual([{ $ref: '#/components/headers/ETag' }, { $ref: '#/components/headers/ETag' }]);
      }
    }
    expect((document.info as Json).license).toEqual({ name: 'MIT', identifier: 'MIT' });
  });

  /**
   * Driven by the route table, not by a list of today's routes: a route added to src/routes/table.ts is held to
   * the same rules by what its entry says (auth, scope, etag, limit) and what its own text declares (readsQuery,
   * usesStorage, requestBody).
   */
  it('documents on every operation of the route table every answer its entry can give, with its codes and headers', () => {
    const document = openApiDocument('', ROUTES);
    const components = document.components as Json;
    const resolve = (r: Json): Json => (r.$ref ? components.responses[r.$ref.split('/').at(-1)] : r);
    const headers = (op: Json, status: string) => Object.keys(resolve(op.responses[status]).headers ?? {});
    /** The error codes a response's body may carry: every one for the plain envelope, the narrowed enum otherwise. */
    const codes = (op: Json, status: string): string[] => {
      const schema = resolve(op.responses[status]).content?.['application/json']?.schema as Json | undefined;
      const of = (s: Json): string[] =>
        s.$ref === '#/components/schemas/ErrorEnvelope' ? components.schemas.Error.properties.code.enum : s.oneOf ? s.oneOf.flatMap(of) : (s.properties?.errors?.items?.properties?.code?.enum ?? []);
      return schema ? of(schema) : [];
    };
    const operations = operationsOf(document);
    // Every operation is a route of the table, or the HEAD twin of a GET; and every route has its operation.
    const expected = ROUTES.flatMap((r) => (r.method === 'GET' ? [`get ${r.pattern}`, `head ${r.pattern}`] : [`${r.method.toLowerCase()} ${r.pattern}`]));
    expect(operations.map(({ method, path }) => `${method} ${path}`).sort()).toEqual(expected.sort());

    for (const { path, method, operation } of operations) {
      const route = ROUTES.find((r) => r.pattern === path && (r.method.toLowerCase() === method || (method === 'head' && r.method === 'GET')))!;
      const own = route.openapi;
      const statuses = Object.keys(operation.responses);
      const where = `${method} ${path}`;
      const envelope = route.errorShape === 'envelope';
      expect(statuses.some((s) => s.startsWith('2')), where).toBe(true);
      for (const status of ['400', '405', '408', '417', '431', '500']) expect(statuses, where).toContain(status);
      for (const status of statuses) expect(headers(operation, status), `${where} ${status}`).toContain('Cache-Control');
      expect(resolve(operation.responses['405']).headers.Allow.schema.const, where).toBe(allowedMethods(ROUTES.filter((r) => r.pattern === path).map((r) => r.method)));

      expect(statuses.includes('414'), where).toBe(own.readsQuery);
      const usesStorage = route.auth !== 'none' || own.usesStorage === true;
      expect(statuses.includes('503'), where).toBe(usesStorage);
      if (usesStorage) expect(headers(operation, '503'), where).toContain('Retry-After');
      // Every authenticated route is throttled and fair-shared: 429 with when to retry and which limit.
      expect(statuses.includes('429'), where).toBe(route.auth !== 'none');
      if (route.auth !== 'none') expect(headers(operation, '429'), where).toEqual(expect.arrayContaining(['Retry-After', 'RateLimit-Policy', 'RateLimit']));
      expect(statuses.includes('401') && statuses.includes('403'), where).toBe(route.auth === 'basic');
      if (route.auth === 'basic') {
        expect(headers(operation, '401'), where).toContain('WWW-Authenticate');
        expect(resolve(operation.responses['403']).description, where).toContain(`\`${route.scope ?? 'users:read'}\``);
        expect(operation.security, where).toEqual([{ merchantBasic: [route.scope ?? 'users:read'] }]);
      }
      // A route with ETags answers 304 with the tag; a route with a limit of its own says what is left of it.
      expect(statuses.includes('304'), where).toBe(route.etag === true);
      if (route.etag) {
        expect([headers(operation, '200'), headers(operation, '304')], where).toEqual([expect.arrayContaining(['ETag']), expect.arrayContaining(['ETag'])]);
        expect(operation.parameters, where).toContainEqual({ $ref: '#/components/parameters/If-None-Match' });
      }
      if (route.limit !== undefined) for (const status of statuses.filter((s) => s === '200' || s === '304')) expect(headers(operation, status), `${where} ${status}`).toEqual(expect.arrayContaining(['RateLimit-Policy', 'RateLimit']));
      // A JSON body read: too large and not JSON.
      if (own.requestBody) for (const status of ['413', '415']) expect(statuses, where).toContain(status);
      expect(operation.requestBody !== undefined, where).toBe(own.requestBody !== undefined && method !== 'head');

      // The codes of each status on an envelope route (a HEAD has no body, so its GET's say).
      if (envelope && method !== 'head') {
        const wanted: Record<string, string[]> = {
          '405': ['method_not_allowed'],
          '500': ['internal_error'],
          ...(own.readsQuery ? { '414': ['uri_too_long'] } : {}),
          ...(usesStorage ? { '503': ['storage_unavailable'] } : {}),
          ...(route.auth !== 'none' ? { '429': ['too_many_requests'] } : {}),
          ...(route.auth === 'basic' ? { '401': ['unauthorized'], '403': ['merchant_disabled', 'insufficient_scope', 'address_not_allowed'] } : {}),
          ...(own.requestBody ? { '413': ['payload_too_large'], '415': ['unsupported_media_type'] } : {}),
        };
        for (const [status, named] of Object.entries(wanted)) expect(codes(operation, status), `${where} ${status}`).toEqual(expect.arrayContaining(named));
      }
    }
  });

  it('states the constraints of the parameters', () => {
    const paths = openApiDocument('', ROUTES).paths as Record<string, Json>;
    const parameter = (path: string, name: string) => (paths[path]!.get.parameters as Json[]).find((p) => p.name === name)!;
    for (const name of ['cp', 'ts', 'salt', 'hmac']) expect(parameter('/validatesignature', name)).toMatchObject({ required: true, schema: { minLength: 1 } });
    for (const name of ['cp', 'salt']) expect(parameter('/validatesignature', name).schema.maxLength).toBe(128);
    expect(parameter('/validatesignature', 'ts').schema.pattern).toBe('^-?[0-9]{1,15}$');
    expect(parameter('/merchant/users', 'limit').schema).toEqual({ type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE });
    expect(parameter('/merchant/users', 'cursor').schema.minLength).toBe(1);
    expect(parameter('/merchant/users', 'active').schema.enum).toEqual(['true', 'false']);
    for (const name of ['joined_after', 'joined_before']) expect(parameter('/merchant/users', name).schema.format).toBe('date-time');
  });
});

describe('the validator of answers', () => {
  const validator = new OpenApiValidator(openApiDocument('', ROUTES));
  const health = { method: 'GET', target: '/healthz', status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'no-store' }, body: '{"status":"ok"}' };

  it('passes a documented answer and finds each kind of departure from the document', () => {
    expect(validator.check(health)).toEqual([]);
    // The change feed's answers: a tombstone among the records, paged and whole.
    const tombstone = '{"shared_user_id":"gone","removed_at":"2026-12-06T08:30:00.123456+00:00"}';
    const feed = { ...health, target: '/merchant/users?include_removed=true&limit=2', headers: { ...health.headers, 'ratelimit-policy': '"listings";q=4;qu="concurrent-requests"', ratelimit: '"listings";r=3' } };
    expect(validator.check({ ...feed, body: `{"status":"ok","data":[${tombstone}],"next_cursor":null,"errors":[]}` })).toEqual([]);
    expect(validator.check({ ...feed, target: '/merchant/users?include_removed=true', body: `{"status":"ok","data":[${tombstone}],"errors":[]}` })).toEqual([]);
    expect(validator.check({ ...feed, body: `{"status":"ok","data":[{"shared_user_id":"gone","removed_at":"x","extra":1}],"next_cursor":null,"errors":[]}` })).not.toEqual([]);
    const departures: [string, Exchange][] = [
      ['is not documented', { ...health, status: 404 }],
      ['is not documented', { ...health, status: 414 }],
      ['must NOT have additional properties', { ...health, body: '{"status":"ok","extra":1}' }],
      ['content type', { ...health, headers: { ...health.headers, 'content-type': 'text/html' } }],
      ['required header Cache-Control', { ...health, headers: { 'content-type': 'application/json' } }],
      ['a HEAD answer with a body', { ...health, method: 'HEAD' }],
      ['required header Allow', { ...health, method: 'POST', status: 405, body: '{"status":"error","data":[],"errors":[{"code":"method_not_allowed","message":"x"}]}' }],
      ['not 405', { ...health, method: 'POST' }],
      ['must be equal to one of the allowed values', { ...health, target: '/nope', status: 404, body: '{"status":"error","data":[],"errors":[{"code":"invalid_cursor","message":"x"}]}' }],
      ['must match a schema in anyOf', { ...health, target: '/merchant/users?limit=1', body: '{"status":"ok","data":[],"next_cursor":5,"errors":[]}' }],
      ['must match exactly one schema in oneOf', { ...health, target: '/merchant/users?limit=1', body: '{"status":"ok","data":[{"shared_user_id":"x"}],"next_cursor":null,"errors":[]}' }],
    ];
    for (const [problem, exchange] of departures) expect(validator.check(exchange).join('\n'), problem).toContain(problem);
  });
});

/** A storage that is down: every call fails. */
const downStorage: Storage = {
  getMerchant: () => Promise.reject(new Error('ECONNREFUSED')),
  recordSalt: () => Promise.reject(new Error('ECONNREFUSED')),
  listUsers: () => Promise.reject(new Error('ECONNREFUSED')),
  getUser: () => Promise.reject(new Error('ECONNREFUSED')),
  ping: () => Promise.reject(new Error('ECONNREFUSED')),
  listKeys: () => Promise.reject(new Error('ECONNREFUSED')),
  close: () => Promise.resolve(),
};

for (const basePath of ['', '/mapi']) {
  describe(`answers given in process${basePath ? `, mounted under ${basePath}` : ''}, against the document`, () => {
    const validator = new OpenApiValidator(openApiDocument(basePath, ROUTES));
    const base = ORIGIN + basePath;
    const auth = basic('m1', 'key-one');
    const api = (options: Partial<MerchantApiOptions> = {}) =>
      createMerchantApi({ storage: new MemoryStorage(contractSeed()), now: () => NOW_MS, logger: silentLogger, basePath, ...options });

    /** Sends a request and checks the answer; returns its status. */
    async function expectDocumented(handler: { fetch: ReturnType<typeof api>['fetch'] }, request: Request, address = '192.0.2.1'): Promise<number> {
      return (await documentedAnswer(handler, request, address)).status;
    }

    async function documentedAnswer(handler: { fetch: ReturnType<typeof api>['fetch'] }, request: Request, address = '192.0.2.1'): Promise<Exchange> {
      const response = await handler.fetch(request, { clientAddress: address });
      const exchange = await exchangeOf(request, response);
      expect(validator.check(exchange), `${request.method} ${exchange.target} -> ${exchange.status}`).toEqual([]);
      return exchange;
    }

    const everyPath = ['/validatesignature', '/merchant/users', '/merchant/users/a-001', '/healthz', '/readyz', '/openapi.json'];

    it('successes, client errors and 405 of every path, GET and HEAD', async () => {
      const handler = api();
      const sign = (method: string) => signedUrl({ base, method });
      const requests: [string, string, Record<string, string>?][] = [
        [sign('GET'), 'GET'],
        [sign('HEAD'), 'HEAD'],
        [`${base}/validatesignature?cp=nobody&ts=1&salt=s&hmac=h`, 'GET'],
        [`${base}/validatesignature?cp=off&ts=1&salt=s&hmac=h`, 'GET'],
        [`${base}/validatesignature?cp=m1&ts=1&salt=s&hmac=h`, 'GET'],
        [`${base}/validatesignature?cp=%zz`, 'GET'],
        [`${base}/merchant/users`, 'GET', auth],
        [`${base}/merchant/users/`, 'GET', auth],
        [`${base}/merchant/users?limit=2&active=true`, 'GET', auth],
        [`${base}/merchant/users?limit=2`, 'HEAD', auth],
        [`${base}/merchant/users?limit=0&foo=1&cursor=`, 'GET', auth],
        [`${base}/merchant/users?cursor=forged`, 'GET', auth],
        [`${base}/merchant/users`, 'GET'],
        [`${base}/merchant/users`, 'GET', basic('off', 'key-off')],
        [`${base}/merchant/users/a-001?x=1`, 'GET', auth],
        [`${base}/merchant/users/%E0%A4%A`, 'GET', auth],
        [`${base}/merchant/users/nobody`, 'HEAD', auth],
        [`${base}/nope`, 'GET'],
        [`${base}/nope`, 'HEAD'],
        ...['/healthz', '/readyz', '/openapi.json'].map((path): [string, string] => [base + path, 'GET']),
        ...everyPath.flatMap((path) => ['HEAD', 'POST', 'DELETE', 'OPTIONS'].map((method): [string, string, Record<string, string>] => [base + path, method, auth])),
      ];
      for (const [url, method, headers] of requests) await expectDocumented(handler, new Request(url, { method, headers }));
      // Conditional reads: the 304 of a tag sent back, on GET and HEAD (docs/protocol.md#conditional-requests).
      for (const url of [`${base}/merchant/users/a-001`, `${base}/merchant/users?limit=2`, `${base}/merchant/users?limit=100`]) {
        const etag = (await handler.fetch(new Request(url, { headers: auth }))).headers.get('etag')!;
        for (const method of ['GET', 'HEAD']) expect(await expectDocumented(handler, new Request(url, { method, headers: { ...auth, 'if-none-match': etag } }))).toBe(304);
      }
    });

    it(`414 where the query is read, and a query over ${MAX_QUERY_LENGTH} characters is no matter elsewhere`, async () => {
      const handler = api();
      const long = `x=${'a'.repeat(MAX_QUERY_LENGTH)}`;
      const statuses: Record<string, number> = {};
      for (const path of everyPath) statuses[path] = await expectDocumented(handler, new Request(`${base}${path}?${long}`, { headers: auth }));
      expect(statuses).toEqual({ '/validatesignature': 414, '/merchant/users': 414, '/merchant/users/a-001': 414, '/healthz': 200, '/readyz': 200, '/openapi.json': 200 });
    });

    it('503 with Retry-After where the storage is used, GET and HEAD', async () => {
      const handler = api({ storage: downStorage, storageTimeout: 200 });
      const statuses: number[] = [];
      for (const method of ['GET', 'HEAD']) {
        for (const path of everyPath) {
          const url = path === '/validatesignature' ? signedUrl({ base, method }) : base + path;
          statuses.push(await expectDocumented(handler, new Request(url, { method, headers: auth })));
        }
      }
      expect(statuses).toEqual([503, 503, 503, 200, 503, 200, 503, 503, 503, 200, 503, 200]);
    });

    it('500 in the shape of each endpoint, saying nothing of the failure', async () => {
      const handler = api({
        hooks: {
          onRequest() {
            throw new Error('secret internals');
          },
        },
      });
      for (const method of ['GET', 'HEAD']) {
        for (const path of everyPath) {
          const answer = await documentedAnswer(handler, new Request(base + path, { method, headers: auth }));
          expect([answer.status, answer.body.includes('secret')]).toEqual([500, false]);
        }
      }
    });

    it('429 with Retry-After and RateLimit fields: throttled failures, and too many listings at once', async () => {
      const handler = api({ merchantConcurrency: 1 });
      for (let i = 0; i < 10; i++) expect(await expectDocumented(handler, new Request(`${base}/merchant/users/a-001`, { headers: basic('m1', 'wrong') }))).toBe(401);
      for (const method of ['GET', 'HEAD']) {
        for (const path of ['/merchant/users', '/merchant/users/a-001']) expect(await expectDocumented(handler, new Request(base + path, { method, headers: auth }))).toBe(429);
        expect(await expectDocumented(handler, new Request(signedUrl({ base, method }), { method }))).toBe(429);
      }
      // One listing streaming (its body unread) holds the merchant's only slot.
      const streaming = await handler.fetch(new Request(`${base}/merchant/users`, { headers: auth }), { clientAddress: '192.0.2.2' });
      expect(await expectDocumented(handler, new Request(`${base}/merchant/users?limit=1`, { headers: auth }), '192.0.2.2')).toBe(429);
      await streaming.body!.cancel();
    });

    it("the adapters' own answers (a request they cannot hand on, a runtime failure) are documented on every operation", async () => {
      for (const method of ['GET', 'HEAD']) {
        const head = method === 'HEAD';
        const answers = [errorResponse(new MerchantApiError('malformed_request', 'The request has more than one Host header.'), { head }), errorResponse(new Error('boom'), { head })];
        for (const response of answers) {
          for (const path of everyPath) {
            const request = new Request(base + path, { method });
            expect(validator.check(await exchangeOf(request, response.clone())), `${method} ${path} ${response.status}`).toEqual([]);
          }
        }
      }
    });
  });
}
