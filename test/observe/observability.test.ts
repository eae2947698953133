/**
 * The route table, the pipeline's hooks, the access log, request ids,
 * metrics and traces, through api.fetch (docs/observability.md).
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import type { RequestContext } from '../../src/http/context.js';
import type { MerchantApiHooks, RequestSummary } from '../../src/http/hooks.js';
import { createJsonLogger, type Logger } from '../../src/observe/logger.js';
import { createMetrics } from '../../src/observe/metrics.js';
import { ROUTES } from '../../src/routes/table.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { basic, NOW_MS, ORIGIN, signedUrl } from '../support/api.js';
import { contractSeed } from '../support/seeds.js';
import { sleep } from '../support/sleep.js';
import { recordingLogger } from '../support/recording.js';

const M1 = basic('m1', 'key-one');

function apiWith(options: Parameters<typeof createMerchantApi>[0] extends infer O ? Partial<O> : never = {}) {
  const storage = new MemoryStorage(contractSeed());
  const log = recordingLogger();
  const api = createMerchantApi({ storage, now: () => NOW_MS, logger: log.logger, tracing: false, ...options });
  return { api, storage, ...log };
}

const get = (api: { fetch(r: Request): Promise<Response> }, url: string, headers: Record<string, string> = {}, method = 'GET') =>
  api.fetch(new Request(url.startsWith('http') ? url : `${ORIGIN}${url}`, { method, headers }));

describe('the route table', () => {
  it('dispatches every route it lists, and nothing else', async () => {
    const { api } = apiWith();
    for (const route of ROUTES) {
      const path = route.pattern.replace('{shared_user_id}', 'a-001').replace('{id}', 'we_1').replace('{key_id}', 'key_1');
      const url = route.auth === 'signature' ? signedUrl() : `${ORIGIN}${path}`;
      const response = await get(api, url, M1, route.method);
      // The webhook endpoints (docs/webhooks.md#endpoints) and key changes answer in their handler's own way: a
      // POST or PATCH that needs a body, without one, is 415; an id no endpoint or key has, 404 with the handler's message, not the router's.
      const needsBody = (route.method === 'POST' && (route.pattern === '/merchant/webhooks' || route.pattern === '/merchant/keys' || route.pattern.endsWith('/redeliver'))) || route.method === 'PATCH';
      // The test simulator (docs/test-mode.md) refuses a live key in its handler: 403 test_key_required.
      const simulator = route.pattern.startsWith('/merchant/test/');
      const byId = route.pattern.startsWith('/merchant/webhooks/') || route.pattern.startsWith('/merchant/keys/');
      const expected = needsBody ? 415 : simulator ? 403 : byId ? 404 : 200;
      expect([route.method, route.pattern, response.status]).toEqual([route.method, route.pattern, expected]);
      if (expected === 404) expect(JSON.parse(await response.text()).errors[0].message).toBe(route.pattern.startsWith('/merchant/keys/') ? 'This merchant has no working key with this id.' : 'This merchant has no webhook endpoint with this id.');
      if (simulator) expect(JSON.parse(await response.text()).errors[0].code).toBe('test_key_required');
    }
    for (const path of ['/', '/merchant', '/merchant/users/a/b', '/healthz/', '/validatesignature/']) {
      expect((await get(api, path, M1)).status).toBe(404);
    }
  });

  it('answers 405 with the Allow header of the route, and HEAD wherever GET is', async () => {
    const { api } = apiWith();
    for (const route of ROUTES) {
      const path = route.pattern.replace('{shared_user_id}', 'a-001').replace('{id}', 'we_1');
      const response = await get(api, path, M1, 'PUT');
      expect(response.status).toBe(405);
      // Every method of the path: GET, HEAD on all but the webhook paths (GET, HEAD, POST; DELETE; POST).
      const methods = ROUTES.filter((r) => r.pattern === route.pattern).flatMap((r) => (r.method === 'GET' ? ['GET', 'HEAD'] : [r.method]));
      expect(response.headers.get('allow')).toBe(methods.join(', '));
    }
    expect((await get(api, '/merchant/users', M1, 'DELETE')).headers.get('allow')).toBe('GET, HEAD');
  });

  it('gives every route a unique id and pattern', () => {
    expect(new Set(ROUTES.map((r) => r.id)).size).toBe(ROUTES.length);
    expect(new Set(ROUTES.map((r) => `${r.method} ${r.pattern}`)).size).toBe(ROUTES.length);
  });
});

describe('request ids', () => {
  it('keeps a valid X-Request-Id and echoes it in the answer and the log', async () => {
    const { api, access } = apiWith();
    const response = await get(api, '/healthz', { 'x-request-id': 'abc-123_XYZ.~!' });
    expect(response.headers.get('x-request-id')).toBe('abc-123_XYZ.~!');
    expect(access()[0]!.request_id).toBe('abc-123_XYZ.~!');
  });

  it('replaces a missing, empty, too long or non-visible one with a UUID', async () => {
    const { api } = apiWith();
    for (const given of [undefined, 'has space', 'x'.repeat(129), 'tab\there', 'é']) {
      const headers: Record<string, string> = given === undefined ? {} : { 'x-request-id': given };
      const id = (await get(api, '/healthz', headers)).headers.get('x-request-id');
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
  });

  it('answers errors with a request id too', async () => {
    const { api } = apiWith();
    expect((await get(api, '/nope')).headers.get('x-request-id')).toBeTruthy();
    expect((await get(api, '/merchant/users')).headers.get('x-request-id')).toBeTruthy();
  });
});

describe('the access log', () => {
  it('writes one line per request with the route pattern, never the path or query', async () => {
    const { api, access } = apiWith();
    await get(api, '/merchant/users/a-001', M1);
    await get(api, '/merchant/users?limit=2&active=true', M1);
    await get(api, signedUrl({ salt: 'the-salt-value' }));
    await get(api, '/no/such/thing');
    await get(api, '/healthz');
    const lines = access();
    expect(lines.map((l) => [l.route, l.status, l.merchant_id ?? null, l.code ?? null])).toEqual([
      ['/merchant/users/{shared_user_id}', 200, 'm1', null],
      ['/merchant/users', 200, 'm1', null],
      ['/validatesignature', 200, 'm1', null],
      [null, 404, null, 'not_found'],
      ['/healthz', 200, null, null],
    ]);
    for (const line of lines) {
      expect(Object.keys(line).sort()).toEqual(
        ['level', 'event', 'request_id', 'method', 'route', 'status', 'duration_ms', 'bytes', ...(line.merchant_id ? ['merchant_id'] : []), ...(line.code ? ['code'] : [])].sort(),
      );
      expect(line.level).toBe('info');
      expect(typeof line.duration_ms).toBe('number');
      expect(JSON.stringify(line)).not.toMatch(/a-001|limit=|the-salt-value|hmac|key-one/);
    }
    const ok = await get(api, '/merchant/users/a-001', M1);
    expect(access().at(-1)!.bytes).toBe(new TextEncoder().encode(await ok.text()).byteLength);
  });

  it('logs a failed authentication as an event with its reason, and nothing of the credentials', async () => {
    const { api, lines } = apiWith();
    await get(api, '/merchant/users', {});
    await get(api, '/merchant/users', { authorization: 'Basic !!!' });
    await get(api, '/merchant/users', basic('nobody', 'key-one'));
    await get(api, '/merchant/users', basic('m1', 'wrong-key'));
    await get(api, signedUrl({ key: 'wrong-key' }));
    await get(api, signedUrl({ cp: 'nobody' }));
    const events = lines.filter((l) => l.event === 'auth_failed');
    expect(events.map((e) => [e.level, e.reason, e.route])).toEqual([
      ['warn', 'missing_credentials', '/merchant/users'],
      ['warn', 'malformed_credentials', '/merchant/users'],
      ['warn', 'unknown_merchant', '/merchant/users'],
      ['warn', 'wrong_key', '/merchant/users'],
      ['warn', 'bad_signature', '/validatesignature'],
      ['warn', 'unknown_merchant', '/validatesignature'],
    ]);
    expect(JSON.stringify(lines)).not.toMatch(/wrong-key|key-one|nobody|Basic/);
  });

  it('writes the same line through the built-in logger, escaping what needs it', async () => {
    const written: string[] = [];
    const logger = createJsonLogger({ write: (text) => written.push(text) });
    const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), logger, tracing: false });
    await get(api, '/merchant/users/a-001', { ...M1, 'x-request-id': 'quote"and\\back' });
    await get(api, '/nope', {}, 'PURGE');
    logger.flush();
    const lines = written.join('').trim().split('\n').map((line) => JSON.parse(line));
    expect(lines).toEqual([
      { time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/), level: 'info', event: 'request', request_id: 'quote"and\\back', method: 'GET', route: '/merchant/users/{shared_user_id}', status: 200, duration_ms: expect.any(Number), bytes: expect.any(Number), merchant_id: 'm1' },
      { time: expect.any(String), level: 'info', event: 'request', request_id: expect.any(String), method: 'PURGE', route: null, status: 404, duration_ms: expect.any(Number), bytes: expect.any(Number), code: 'not_found' },
    ]);
  });

  it('is off with accessLog: false; events stay', async () => {
    const { api, lines } = apiWith({ accessLog: false });
    await get(api, '/healthz');
    await get(api, '/merchant/users', basic('m1', 'wrong'));
    expect(lines.map((l) => l.event)).toEqual(['auth_failed']);
  });

  it('the built-in logger writes JSON lines at or above its level, gathered into one write within a few milliseconds', async () => {
    const writes: string[] = [];
    const logger = createJsonLogger({ level: 'warn', write: (text) => writes.push(text) });
    logger.info({ event: 'quiet' });
    logger.warn({ event: 'loud', n: 1 }, 'message');
    logger.error({ event: 'louder' });
    expect(writes).toEqual([]);
    await sleep(25);
    expect(writes).toHaveLength(1);
    const parsed = writes[0]!.trim().split('\n').map((line) => JSON.parse(line));
    expect(parsed.map((l) => [l.level, l.event, l.msg])).toEqual([['warn', 'loud', 'message'], ['error', 'louder', undefined]]);
    expect(Object.keys(parsed[0])).toEqual(['time', 'level', 'event', 'n', 'msg']);
    const silent: string[] = [];
    const none = createJsonLogger({ level: 'silent', write: (text) => silent.push(text) });
    none.error({ event: 'x' });
    none.flush();
    expect(silent).toEqual([]);
  });
});

describe('hooks', () => {
  it('run at each point with the context as it grows', async () => {
    const seen: string[] = [];
    const summaries: RequestSummary[] = [];
    const hooks: MerchantApiHooks = {
      onRequest: (ctx) => void seen.push(`request ${ctx.route} ${ctx.merchantId}`),
      onAuthenticated: (ctx) => void seen.push(`authenticated ${ctx.merchantId}`),
      onStorageCall: (_ctx, operation) => {
        seen.push(`storage ${operation}`);
        return (error) => void seen.push(`storage ${operation} done ${error === undefined ? 'ok' : 'failed'}`);
      },
      onResponse: (ctx, response) => {
        seen.push(`response ${response.status}`);
        response.headers.set('x-quota-left', '41');
      },
      onFinish: (_ctx, summary) => void summaries.push(summary),
    };
    const { api } = apiWith({ hooks, accessLog: false });
    const response = await get(api, '/merchant/users/a-001', { ...M1, 'x-forwarded-for': '10.0.0.1' });
    expect(response.headers.get('x-quota-left')).toBe('41');
    expect(seen).toEqual([
      'request /merchant/users/{shared_user_id} undefined',
      'storage getMerchant',
      'storage getMerchant done ok',
      'authenticated m1',
      'storage getUser',
      'storage getUser done ok',
      'response 200',
    ]);
    const body = await response.text();
    expect(summaries).toEqual([{ status: 200, bytes: new TextEncoder().encode(body).byteLength, durationMs: expect.any(Number), aborted: false }]);
    seen.length = 0;
    await get(api, signedUrl());
    expect(seen).toContain('authenticated m1');
    expect(seen.indexOf('authenticated m1')).toBeLessThan(seen.indexOf('storage recordSalt'));
  });

  it('onRequest may answer instead, before any storage call: an embedder quota', async () => {
    let storageCalls = 0;
    const quota: MerchantApiHooks = {
      onRequest: (ctx) => (ctx.route === '/merchant/users' ? new Response('{"status":"error","data":[],"errors":[{"code":"quota","message":"slow down"}]}', { status: 429, headers: { 'retry-after': '7' } }) : undefined),
      onStorageCall: () => void storageCalls++,
    };
    const { api, access } = apiWith({ hooks: quota });
    const refused = await get(api, '/merchant/users', M1);
    expect([refused.status, refused.headers.get('retry-after')]).toEqual([429, '7']);
    expect(storageCalls).toBe(0);
    expect(access().at(-1)).toMatchObject({ route: '/merchant/users', status: 429 });
    expect((await get(api, '/merchant/users/a-001', M1)).status).toBe(200);
  });

  it('onAuthenticated may answer instead, knowing the merchant, on both kinds of authentication', async () => {
    const perMerchant: MerchantApiHooks = {
      onAuthenticated: async (ctx) => (ctx.merchantId === 'm1' ? new Response(null, { status: 429 }) : undefined),
    };
    const { api, storage } = apiWith({ hooks: perMerchant });
    expect((await get(api, '/merchant/users', M1)).status).toBe(429);
    const salt = 'not-recorded-when-refused';
    expect((await get(api, signedUrl({ salt }))).status).toBe(429);
    expect(await storage.recordSalt({ merchantId: 'm1', salt, expiresAt: NOW_MS / 1000 + 300, now: NOW_MS / 1000 })).toBe(true);
  });

  it('onError sees every error answer; a hook that throws is logged, not fatal', async () => {
    const errors: unknown[] = [];
    const { api, lines } = apiWith({
      hooks: [{ onError: (_ctx, error) => void errors.push(error) }, { onFinish: () => { throw new Error('broken hook'); } }],
    });
    const response = await get(api, '/merchant/users', basic('m1', 'wrong'));
    expect(response.status).toBe(401);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: 'unauthorized', status: 401 });
    expect(lines.filter((l) => l.event === 'hook_failed')).toEqual([{ level: 'error', event: 'hook_failed', hook: 'onFinish', error: 'Error' }]);
  });

  it('onFinish of a streamed list comes after the last byte, with its length', async () => {
    const summaries: [RequestContext, RequestSummary][] = [];
    const { api } = apiWith({ hooks: { onFinish: (ctx, summary) => void summaries.push([ctx, summary]) }, streamBatchSize: 2 });
    const response = await get(api, '/merchant/users', M1);
    expect(summaries).toEqual([]);
    const bytes = (await response.arrayBuffer()).byteLength;
    expect(summaries.map(([ctx, s]) => [ctx.route, ctx.merchantId, s.status, s.bytes, s.aborted])).toEqual([['/merchant/users', 'm1', 200, bytes, false]]);
  });
});

describe('metrics', () => {
  const parse = async (metrics: ReturnType<typeof createMetrics>) => {
    const scrape = await metrics.fetch(new Request('http://metrics/metrics'));
    expect(scrape.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const families = parsePrometheusTextFormat(await scrape.text());
    return (name: string, labels: Record<string, string> = {}) =>
      families
        .find((f) => f.name === name)
        ?.metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
        .reduce((sum, m) => sum + Number(m.value ?? m.count ?? 0), 0) ?? 0;
  };

  it('counts requests, durations, auth failures and storage calls, with labels an outsider cannot choose', async () => {
    const storage = new MemoryStorage(contractSeed());
    const metrics = createMetrics({ saltCount: () => storage.saltCount, saltCapacity: storage.maxSalts });
    const api = createMerchantApi({ storage, now: () => NOW_MS, accessLog: false, logger: recordingLogger().logger, hooks: metrics.hooks, tracing: false });
    for (let i = 0; i < 3; i++) await get(api, '/healthz');
    await get(api, '/merchant/users/a-001', M1);
    await get(api, '/merchant/users/a-001', basic('m1', 'nope'));
    await get(api, signedUrl());
    await get(api, signedUrl());
    await get(api, '/secret-path-a-001?hmac=abc');
    await get(api, '/healthz', {}, 'BREW');
    const value = await parse(metrics);
    expect(value('merchant_api_requests_total', { route: '/healthz', method: 'GET', status: '200' })).toBe(3);
    expect(value('merchant_api_requests_total', { route: '/healthz', method: 'OTHER', status: '405' })).toBe(1);
    expect(value('merchant_api_requests_total', { route: '/merchant/users/{shared_user_id}', status: '200' })).toBe(1);
    expect(value('merchant_api_requests_total', { route: '/merchant/users/{shared_user_id}', status: '401' })).toBe(1);
    expect(value('merchant_api_requests_total', { route: '/validatesignature', status: '200' })).toBe(2);
    expect(value('merchant_api_requests_total', { route: 'unmatched', status: '404' })).toBe(1);
    expect(value('merchant_api_requests_total')).toBe(9);
    // The parser keeps no labels of a histogram: those counts come from the registry itself.
    const histogram = async (name: string, labels: Record<string, string>) =>
      (await metrics.registry.getSingleMetric(name)!.get()).values.find((v) => (v as { metricName?: string }).metricName === `${name}_count` && Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value;
    expect(await histogram('merchant_api_request_duration_seconds', { route: '/healthz' })).toBe(4); // the 405 too
    expect(value('merchant_api_auth_failures_total', { reason: 'wrong_key' })).toBe(1);
    expect(await histogram('merchant_api_storage_operation_duration_seconds', { operation: 'recordSalt' })).toBe(2);
    // 4 requests that look a merchant up, and the wrong key's second look (`{ refresh: true }`, a re-read on a caching storage).
    expect(await histogram('merchant_api_storage_operation_duration_seconds', { operation: 'getMerchant' })).toBe(5);
    expect(value('merchant_api_errors_total', { code: 'unauthorized' })).toBe(1);
    expect(value('merchant_api_errors_total', { code: 'method_not_allowed' })).toBe(1);
    expect(value('merchant_api_errors_total', { code: 'not_found' })).toBe(1);
    expect(value('merchant_api_errors_total')).toBe(3);
    expect(value('merchant_api_salts_stored')).toBe(2);
    expect(value('merchant_api_salts_capacity')).toBe(1_000_000);
    expect(value('merchant_api_storage_errors_total')).toBe(0);
    expect(value('process_cpu_user_seconds_total')).toBeGreaterThan(0);
    const text = await (await metrics.fetch(new Request('http://metrics/metrics'))).text();
    expect(text).not.toMatch(/secret-path|a-001|hmac|m1/);
  });

  it('labels requests by merchant only when asked to', async () => {
    const metrics = createMetrics({ merchantLabel: true, processMetrics: false });
    const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), accessLog: false, hooks: metrics.hooks, tracing: false });
    await get(api, '/merchant/users/a-001', M1);
    const value = await parse(metrics);
    expect(value('merchant_api_requests_total', { merchant: 'm1' })).toBe(1);
    expect(value('process_cpu_user_seconds_total')).toBe(0);
    // Without saltCapacity (a storage with no bound) the capacity is 0, which the salt store alert leaves out.
    expect(value('merchant_api_salts_capacity')).toBe(0);
  });

  it('leaves merchant_api_salts_stored out where the storage cannot count its salts (MySQL, Redis): not a 0', async () => {
    const text = await (await createMetrics({ processMetrics: false }).fetch(new Request('http://metrics/metrics'))).text();
    expect(text).not.toContain('merchant_api_salts_stored');
  });

  it('counts write conflicts by outcome when the storage reports them (MySQL, Galera), and leaves the metric out otherwise', async () => {
    let counts = { retried: 3, failed: 0 };
    const metrics = createMetrics({ processMetrics: false, writeConflicts: () => counts });
    expect((await parse(metrics))('merchant_api_storage_write_conflicts_total', { outcome: 'retried' })).toBe(3);
    counts = { retried: 5, failed: 1 };
    const value = await parse(metrics);
    expect(value('merchant_api_storage_write_conflicts_total', { outcome: 'retried' })).toBe(5);
    expect(value('merchant_api_storage_write_conflicts_total', { outcome: 'failed' })).toBe(1);
    const text = await (await createMetrics({ processMetrics: false }).fetch(new Request('http://metrics/metrics'))).text();
    expect(text).not.toContain('merchant_api_storage_write_conflicts_total');
  });

  it('counts failures a full shared throttle store could not count, and leaves the metric out without one', async () => {
    let full = 2;
    const metrics = createMetrics({ processMetrics: false, throttleFull: () => full });
    expect((await parse(metrics))('merchant_api_throttle_full_total', {})).toBe(2);
    full = 7;
    expect((await parse(metrics))('merchant_api_throttle_full_total', {})).toBe(7);
    const text = await (await createMetrics({ processMetrics: false }).fetch(new Request('http://metrics/metrics'))).text();
    expect(text).not.toContain('merchant_api_throttle_full_total');
  });

  it('counts webhook deliveries the memory queue dropped, and leaves the metric out without a memory storage', async () => {
    let dropped = 0;
    const metrics = createMetrics({ processMetrics: false, webhookDropped: () => dropped });
    expect((await parse(metrics))('merchant_api_webhook_dropped_total', {})).toBe(0);
    dropped = 4;
    expect((await parse(metrics))('merchant_api_webhook_dropped_total', {})).toBe(4);
    const text = await (await createMetrics({ processMetrics: false }).fetch(new Request('http://metrics/metrics'))).text();
    expect(text).not.toContain('merchant_api_webhook_dropped_total');
  });

  it('answers 404 away from /metrics', async () => {
    const metrics = createMetrics({ processMetrics: false });
    expect((await metrics.fetch(new Request('http://metrics/'))).status).toBe(404);
  });
});

describe('traces', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  beforeAll(() => {
    trace.setGlobalTracerProvider(provider);
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  });
  afterAll(async () => {
    await provider.shutdown();
    trace.disable();
    propagation.disable();
    context.disable();
  });

  it('spans each request and storage call, continuing an incoming traceparent', async () => {
    exporter.reset();
    const { api } = apiWith({ tracing: true });
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parentId = '00f067aa0ba902b7';
    await get(api, '/merchant/users/a-001', { ...M1, traceparent: `00-${traceId}-${parentId}-01` });
    const spans = exporter.getFinishedSpans();
    const server = spans.find((s) => s.name === 'GET /merchant/users/{shared_user_id}')!;
    expect(server).toBeDefined();
    expect(server.spanContext().traceId).toBe(traceId);
    expect(server.parentSpanContext?.spanId).toBe(parentId);
    expect(server.attributes).toMatchObject({ 'http.route': '/merchant/users/{shared_user_id}', 'http.response.status_code': 200, 'merchant_api.merchant_id': 'm1' });
    const storageSpans = spans.filter((s) => s.name.startsWith('storage '));
    expect(storageSpans.map((s) => s.name)).toEqual(['storage getMerchant', 'storage getUser']);
    for (const span of storageSpans) {
      expect(span.spanContext().traceId).toBe(traceId);
      expect(span.parentSpanContext?.spanId).toBe(server.spanContext().spanId);
    }
  });

  it('spans a request the throttle refuses before any hook runs (docs/observability.md#traces: a span per request)', async () => {
    exporter.reset();
    const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), logger: recordingLogger().logger, accessLog: false, throttle: { addressFailures: 1 } });
    const wrongKey = () => new Request(`${ORIGIN}/merchant/users`, { headers: basic('m1', 'not-the-key') });
    const info = { clientAddress: '192.0.2.7' };
    expect((await api.fetch(wrongKey(), info)).status).toBe(401);
    expect((await api.fetch(wrongKey(), info)).status).toBe(429);
    const spans = exporter.getFinishedSpans().filter((s) => s.name === 'GET /merchant/users');
    expect(spans.map((s) => [s.attributes['http.response.status_code'], s.attributes['merchant_api.error_code']])).toEqual([
      [401, 'unauthorized'],
      [429, 'too_many_requests'],
    ]);
  });

  it('spans a 404 too, and marks a 5xx as an error', async () => {
    exporter.reset();
    const storage = new MemoryStorage(contractSeed());
    await storage.close();
    const api = createMerchantApi({ storage, logger: recordingLogger().logger, accessLog: false });
    await get(api, '/nope');
    await get(api, '/readyz');
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => [s.name, s.attributes['http.response.status_code'], s.status.code])).toEqual([
      ['GET', 404, 0],
      ['storage ping', undefined, 2],
      ['GET /readyz', 503, 2],
    ]);
  });
});
