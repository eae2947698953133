/**
 * `/merchant/webhooks` (docs/webhooks.md#endpoints): through Request objects on MySQL, and through a
 * real Node server, where an endpoint added by the API receives its test event, verified by the
 * `standardwebhooks` package. A merchant sees and changes only its own endpoints; the body's size,
 * type and JSON are checked; a storage without webhooks answers 501 (the memory storage has them:
 * memory-webhooks.test.ts).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { serve } from '../../adapters/node.js';
import { createMerchantClient, MerchantResponseError } from '../../src/client/index.js';
import { createMerchantApi, type MerchantApi } from '../../src/api.js';
import { silentLogger, type Logger } from '../../src/observe/logger.js';
import { importSeed, MysqlStorage, MysqlWebhookOutbox } from '../../src/storage/mysql/index.js';
import type { Storage } from '../../src/storage/contract.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { basic, call, testApi } from '../support/api.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

const available = await mysqlAvailable();
const ORIGIN = 'http://api.test';
const A = basic('wa', 'key-a');
const B = basic('wb', 'key-b');

function json(body: unknown, headers: Record<string, string> = {}): RequestInit {
  return { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) };
}

describe('/merchant/webhooks on a storage without webhooks (an embedder\'s own)', () => {
  it('answers 501 not_implemented, before anything else', async () => {
    // The memory storage's operations but none of the optional webhook ones.
    const memory = testApi().storage;
    const storage: Storage = {
      getMerchant: (id) => memory.getMerchant(id),
      recordSalt: (r) => memory.recordSalt(r),
      listUsers: (q) => memory.listUsers(q),
      getUser: (m, u) => memory.getUser(m, u),
      ping: () => memory.ping(),
      listKeys: (m) => memory.listKeys(m),
      close: () => memory.close(),
    };
    const { api } = testApi({ storage, webhooks: { allowPrivate: true, allowHttp: true } });
    const auth = basic('m1', 'key-one');
    const list = await call(api, `${ORIGIN}/merchant/webhooks`, { headers: auth });
    expect(list.status).toBe(501);
    expect(list.body).toEqual({ status: 'error', data: [], errors: [{ code: 'not_implemented', message: 'The storage behind this server keeps no webhooks.' }] });
    const add = await call(api, `${ORIGIN}/merchant/webhooks`, { ...json({ url: 'http://127.0.0.1:9/hook' }), headers: { ...auth, 'content-type': 'application/json' } });
    expect(add.status).toBe(501);
    // Before anything else: no body read, no name resolved (a name that cannot resolve would be a 400 otherwise).
    const unresolvable = await call(api, `${ORIGIN}/merchant/webhooks`, { ...json({ url: 'https://no-such-host.invalid/hook' }), headers: { ...auth, 'content-type': 'text/plain' } });
    expect(unresolvable.status).toBe(501);
    for (const [method, path] of [['DELETE', '/merchant/webhooks/we_1'], ['POST', '/merchant/webhooks/we_1/test'], ['POST', '/merchant/webhooks/we_1/rotate-secret']] as const) {
      expect((await call(api, `${ORIGIN}${path}`, { method, headers: auth })).status, path).toBe(501);
    }
  });
});

describe('/merchant/webhooks on the memory storage', () => {
  it('keeps 405 with Allow on every path, naming each method of the path', async () => {
    const { api } = testApi();
    const put = await call(api, `${ORIGIN}/merchant/webhooks`, { method: 'PUT', body: '{}' });
    expect(put.status).toBe(405);
    expect(put.response.headers.get('allow')).toBe('GET, HEAD, POST');
    expect(put.body.errors[0].message).toBe('Only GET, HEAD and POST are allowed here.');
    const getOne = await call(api, `${ORIGIN}/merchant/webhooks/we_1`);
    expect(getOne.response.headers.get('allow')).toBe('DELETE');
    expect(getOne.body.errors[0].message).toBe('Only DELETE is allowed here.');
    const postUsers = await call(api, `${ORIGIN}/merchant/users`, { method: 'POST', body: '{}' });
    expect(postUsers.status).toBe(405);
    expect(postUsers.response.headers.get('allow')).toBe('GET, HEAD');
    expect(postUsers.body.errors[0].message).toBe('Only GET and HEAD are allowed here.');
  });

  it('authenticates before it reads a body', async () => {
    const { api } = testApi();
    const answer = await call(api, `${ORIGIN}/merchant/webhooks`, json('not json'));
    expect(answer.status).toBe(401);
  });
});

describe.skipIf(!available)('/merchant/webhooks on MySQL', () => {
  let database: TestDatabase;
  let storage: MysqlStorage;
  let api: MerchantApi;
  const logged: Array<Record<string, unknown>> = [];
  const logger: Logger = { ...silentLogger, info: (fields) => void logged.push(fields as Record<string, unknown>) };
  const receivers: WebhookReceiver[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, {
      merchants: [
        { id: 'wa', status: 'active', keys: ['key-a'] },
        { id: 'wb', status: 'active', keys: ['key-b'] },
      ],
      users: [],
    });
    storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey });
    api = createMerchantApi({ storage, logger, accessLog: false, tracing: false, webhooks: { allowPrivate: true, allowHttp: true, maxEndpointsPerMerchant: 3 } });
  });
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  afterAll(async () => {
    await storage?.close();
    await database?.drop();
  });

  const add = (auth: Record<string, string>, body: unknown, target = api) => call(target, `${ORIGIN}/merchant/webhooks`, { ...json(body), headers: { ...auth, 'content-type': 'application/json' } });
  const list = async (auth: Record<string, string>) => (await call(api, `${ORIGIN}/merchant/webhooks`, { headers: auth })).body.data as Array<Record<string, unknown>>;

  it('adds (201 with the secret, once), lists without secrets, rotates, tests and removes', async () => {
    const added = await add(A, { url: 'http://127.0.0.1:9/a', events: ['user.updated', 'user.shared', 'user.updated'] });
    expect(added.status).toBe(201);
    const [endpoint] = added.body.data;
    expect(endpoint).toEqual({ id: expect.stringMatching(/^we_/), url: 'http://127.0.0.1:9/a', events: ['user.updated', 'user.shared'], status: 'enabled', disabled_reason: null, created_at: expect.stringMatching(/\+00:00$/), secret: expect.stringMatching(/^whsec_/) });
    const listed = await list(A);
    expect(listed).toEqual([{ ...endpoint, secret: undefined }].map(({ secret: _s, ...rest }) => rest));
    expect(JSON.stringify(listed)).not.toContain('whsec_');
    expect(logged.find((f) => f.event === 'webhook_endpoint_added')).toMatchObject({ merchant_id: 'wa', endpoint_id: endpoint.id });

    const rotated = await call(api, `${ORIGIN}/merchant/webhooks/${endpoint.id}/rotate-secret`, { ...json({ expire_old_in: '24h' }), headers: { ...A, 'content-type': 'application/json' } });
    expect(rotated.status).toBe(200);
    expect(rotated.body.data[0]).toEqual({ id: endpoint.id, secret: expect.stringMatching(/^whsec_/), old_secret_expires_at: expect.stringMatching(/\+00:00$/) });
    expect(rotated.body.data[0].secret).not.toBe(endpoint.secret);
    const expires = Date.parse(rotated.body.data[0].old_secret_expires_at);
    expect(Math.abs(expires - Date.now() - 86_400_000)).toBeLessThan(120_000);
    // Without a body, the old secret stops at once.
    const now = await call(api, `${ORIGIN}/merchant/webhooks/${endpoint.id}/rotate-secret`, { method: 'POST', headers: A });
    expect(now.status).toBe(200);
    expect(now.body.data[0].old_secret_expires_at).toBeNull();

    const tested = await call(api, `${ORIGIN}/merchant/webhooks/${endpoint.id}/test`, { method: 'POST', headers: A });
    expect(tested.status).toBe(202);
    expect(tested.body.data[0]).toEqual({ event_id: expect.stringMatching(/^evt_/), endpoint_id: endpoint.id });

    const removed = await api.fetch(new Request(`${ORIGIN}/merchant/webhooks/${endpoint.id}`, { method: 'DELETE', headers: A }));
    expect(removed.status).toBe(204);
    expect(await removed.text()).toBe('');
    expect(removed.headers.get('content-length')).toBeNull();
    expect(await list(A)).toEqual([]);
    const again = await call(api, `${ORIGIN}/merchant/webhooks/${endpoint.id}`, { method: 'DELETE', headers: A });
    expect(again.status).toBe(404);
    const events = logged.map((f) => f.event);
    expect(events).toEqual(expect.arrayContaining(['webhook_endpoint_added', 'webhook_secret_rotated', 'webhook_test_queued', 'webhook_endpoint_removed']));
    expect(JSON.stringify(logged)).not.toContain('whsec_');
  });

  it('a merchant cannot see, delete, rotate or test another merchant\'s endpoint: 404, as one that does not exist', async () => {
    const ofA = (await add(A, { url: 'http://127.0.0.1:9/iso' })).body.data[0];
    expect(await list(B)).toEqual([]);
    for (const id of [ofA.id, 'we_does_not_exist']) {
      const del = await call(api, `${ORIGIN}/merchant/webhooks/${id}`, { method: 'DELETE', headers: B });
      const rotate = await call(api, `${ORIGIN}/merchant/webhooks/${id}/rotate-secret`, { method: 'POST', headers: B });
      const test = await call(api, `${ORIGIN}/merchant/webhooks/${id}/test`, { method: 'POST', headers: B });
      for (const answer of [del, rotate, test]) {
        expect(answer.status).toBe(404);
        expect(answer.body).toEqual({ status: 'error', data: [], errors: [{ code: 'not_found', message: 'This merchant has no webhook endpoint with this id.' }] });
      }
    }
    // Untouched: still there, its secret not rotated (A's test is still accepted and B queued nothing).
    expect((await list(A)).map((e) => e.id)).toContain(ofA.id);
    expect((await call(api, `${ORIGIN}/merchant/webhooks/${ofA.id}`, { method: 'DELETE', headers: A })).status).toBe(204);
  });

  it('refuses a body too large (413), of another type (415), malformed (400), with unknown members or bad values (400)', async () => {
    const big = await add(A, { url: `https://example.com/${'x'.repeat(20_000)}` });
    expect(big.status).toBe(413);
    expect(big.body.errors[0].code).toBe('payload_too_large');
    // Announced by no Content-Length: a stream, cut as it passes the cap.
    const chunks = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 40; i++) c.enqueue(new TextEncoder().encode(' '.repeat(1024)));
        c.close();
      },
    });
    const streamed = await call(api, `${ORIGIN}/merchant/webhooks`, { method: 'POST', headers: { ...A, 'content-type': 'application/json' }, body: chunks, duplex: 'half' } as RequestInit);
    expect(streamed.status).toBe(413);
    const text = await call(api, `${ORIGIN}/merchant/webhooks`, { method: 'POST', headers: { ...A, 'content-type': 'text/plain' }, body: '{"url":"https://example.com"}' });
    expect(text.status).toBe(415);
    expect(text.body).toEqual({ status: 'error', data: [], errors: [{ code: 'unsupported_media_type', message: 'The body must be JSON, sent with Content-Type: application/json.' }] });
    const none = await call(api, `${ORIGIN}/merchant/webhooks`, { method: 'POST', headers: A, body: '{}' });
    expect(none.status).toBe(415);
    const withCharset = await call(api, `${ORIGIN}/merchant/webhooks`, { method: 'POST', headers: { ...A, 'content-type': 'Application/JSON; charset=utf-8' }, body: '{"url":"ftp://x"}' });
    expect(withCharset.status).toBe(400);
    for (const body of ['{', '', '[1]', 'null', '"x"', '\u00ff']) {
      const bad = await add(A, body);
      expect(bad.status, body).toBe(400);
      expect(bad.body.errors[0].code).toBe('malformed_request');
    }
    const unknown = await add(A, { url: 'https://example.com/h', secret: 'mine' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors[0]).toMatchObject({ code: 'unknown_parameter', param: 'secret' });
    for (const body of [{}, { url: 5 }, { url: 'https://example.com/h', events: [] }, { url: 'https://example.com/h', events: ['webhook.test'] }, { url: 'https://example.com/h', events: 'user.updated' }]) {
      const bad = await add(A, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(bad.body.errors[0].code).toBe('invalid_parameter');
    }
    const rotateBad = await call(api, `${ORIGIN}/merchant/webhooks/we_x/rotate-secret`, { ...json({ expire_old_in: 'soon' }), headers: { ...A, 'content-type': 'application/json' } });
    expect(rotateBad.body.errors[0]).toMatchObject({ code: 'invalid_parameter', param: 'expire_old_in' });
    expect(await list(A)).toEqual([]);
  });

  it('refuses a private or http URL without the settings, as the CLI does', async () => {
    const strict = createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false });
    for (const url of ['https://127.0.0.1/h', 'https://10.1.2.3/h', 'https://[::ffff:169.254.169.254]/h', 'https://localhost/h', 'http://example.com/h', 'https://user:pw@example.com/h']) {
      const refused = await add(A, { url }, strict);
      expect(refused.status, url).toBe(400);
      expect(refused.body.errors[0]).toMatchObject({ code: 'invalid_parameter', param: 'url' });
      // The merchant is told the rule, not the server setting that lifts it (the operator's CLI names that).
      expect(JSON.stringify(refused.body), url).not.toMatch(/WEBHOOK_ALLOW/);
    }
    expect(await list(A)).toEqual([]);
  });

  it('holds a merchant to its most endpoints (409 conflict)', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await add(B, { url: `http://127.0.0.1:9/max${i}` })).body.data[0].id);
    const over = await add(B, { url: 'http://127.0.0.1:9/max3' });
    expect(over.status).toBe(409);
    expect(over.body.errors[0]).toEqual({ code: 'conflict', message: 'A merchant has at most 3 webhook endpoints.' });
    // Another merchant is not held by B's count.
    const ofA = await add(A, { url: 'http://127.0.0.1:9/a-still' });
    expect(ofA.status).toBe(201);
    for (const id of [...ids, ofA.body.data[0].id]) await call(api, `${ORIGIN}/merchant/webhooks/${id}`, { method: 'DELETE', headers: id === ofA.body.data[0].id ? A : B });
  });

  it('the client SDK: client.webhooks.list, create, rotateSecret, test and remove, each merchant on its own', async () => {
    const served = await serve(api, { port: 0, hostname: '127.0.0.1' });
    try {
      const a = createMerchantClient({ baseUrl: served.url, merchantId: 'wa', apiKey: 'key-a' });
      const b = createMerchantClient({ baseUrl: served.url, merchantId: 'wb', apiKey: 'key-b' });
      const created = await a.webhooks.create('http://127.0.0.1:9/sdk', { events: ['user.unshared'] });
      expect(created).toMatchObject({ id: expect.stringMatching(/^we_/), url: 'http://127.0.0.1:9/sdk', events: ['user.unshared'], status: 'enabled', secret: expect.stringMatching(/^whsec_/) });
      expect(await a.webhooks.list()).toEqual([expect.objectContaining({ id: created.id })]);
      expect(await b.webhooks.list()).toEqual([]);
      const rotated = await a.webhooks.rotateSecret(created.id, { expireOldIn: '1h' });
      expect(rotated).toEqual({ id: created.id, secret: expect.stringMatching(/^whsec_/), old_secret_expires_at: expect.any(String) });
      expect(await a.webhooks.test(created.id)).toEqual({ event_id: expect.stringMatching(/^evt_/), endpoint_id: created.id });
      const refused = await b.webhooks.remove(created.id).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(MerchantResponseError);
      expect(refused).toMatchObject({ status: 404, code: 'not_found' });
      const invalid = await a.webhooks.create('ftp://example.com').catch((error: unknown) => error);
      expect(invalid).toMatchObject({ status: 400, code: 'invalid_parameter' });
      await a.webhooks.remove(created.id);
      expect(await a.webhooks.list()).toEqual([]);
    } finally {
      await served.close();
    }
  });

  it('through a real server: an endpoint added by the API receives its test event, verified by standardwebhooks', async () => {
    const receiver = await startWebhookReceiver();
    receivers.push(receiver);
    const served = await serve(api, { port: 0, hostname: '127.0.0.1' });
    const dispatcher = new WebhookDispatcher({ outbox: new MysqlWebhookOutbox({ db: database.db, masterKey: database.masterKey }), policy: { allowPrivate: true, allowHttp: true }, pollIntervalMs: 50, retrySchedule: [200] });
    dispatcher.start();
    try {
      const created = await fetch(`${served.url}/merchant/webhooks`, { method: 'POST', headers: { ...A, 'content-type': 'application/json' }, body: JSON.stringify({ url: receiver.url }) });
      expect(created.status).toBe(201);
      const endpoint = ((await created.json()) as { data: Array<{ id: string; secret: string }> }).data[0]!;
      receiver.secrets.push(endpoint.secret);
      const tested = await fetch(`${served.url}/merchant/webhooks/${endpoint.id}/test`, { method: 'POST', headers: A });
      expect(tested.status).toBe(202);
      const { event_id } = ((await tested.json()) as { data: Array<{ event_id: string }> }).data[0]!;
      await vi.waitFor(() => expect(receiver.received).toHaveLength(1), { timeout: 15_000 });
      expect(receiver.unverified).toEqual([]);
      expect(receiver.received[0]!.headers['webhook-id']).toBe(event_id);
      expect(receiver.received[0]!.event).toMatchObject({ type: 'webhook.test', data: { endpoint_id: endpoint.id } });
      const removed = await fetch(`${served.url}/merchant/webhooks/${endpoint.id}`, { method: 'DELETE', headers: A });
      expect(removed.status).toBe(204);
      expect(await removed.text()).toBe('');
    } finally {
      await dispatcher.stop();
      await served.close();
    }
  });
});

describe('the OpenAPI document', () => {
  it('describes every event type under webhooks, each a signed POST of {type, timestamp, data}', async () => {
    const { WEBHOOK_EVENT_TYPES } = await import('../../src/webhooks/events.js');
    const { api } = testApi();
    const { body } = await call(api, `${ORIGIN}/openapi.json`);
    expect(Object.keys(body.webhooks).sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort());
    for (const type of WEBHOOK_EVENT_TYPES) {
      const post = body.webhooks[type].post;
      expect(post.parameters.map((p: { name: string }) => p.name)).toEqual(['webhook-id', 'webhook-timestamp', 'webhook-signature']);
      expect(post.requestBody.content['application/json'].schema.properties.type).toEqual({ const: type });
    }
    expect(body.paths['/merchant/webhooks'].post.operationId).toBe('createWebhook');
    expect(Object.keys(body.paths['/merchant/webhooks/{id}'])).toEqual(['delete']);
  });
});

describe('client.webhooks retries', () => {
  it('retries a read, and a POST with the same Idempotency-Key, on 503; sends a DELETE once (its lost answer may have been a change made)', async () => {
    const calls: string[] = [];
    const keys: Array<string | null> = [];
    const unavailable = () => new Response(JSON.stringify({ status: 'error', data: [], errors: [{ code: 'storage_unavailable', message: 'x' }] }), { status: 503, headers: { 'content-type': 'application/json', 'retry-after': '0' } });
    const fetchStub = (async (input: RequestInfo | URL, init?: RequestInit) => {
      calls.push(`${init?.method} ${String(input)} ${String(init?.body ?? '')}`);
      keys.push(new Headers(init?.headers).get('idempotency-key'));
      if (calls.length % 2 === 1) return unavailable();
      const data = init?.method === 'POST' ? [{ id: 'we_1', url: 'https://example.com/h', secret: 'whsec_x' }] : [];
      return new Response(JSON.stringify({ status: 'ok', data, errors: [] }), { status: init?.method === 'POST' ? 201 : 200, headers: { 'content-type': 'application/json' } });
    }) as typeof fetch;
    const client = createMerchantClient({ baseUrl: 'http://api.test', merchantId: 'm', apiKey: 'k', fetch: fetchStub, retries: { baseDelayMs: 1, maxDelayMs: 5 } });
    expect(await client.webhooks.list()).toEqual([]);
    expect(calls).toHaveLength(2);
    expect(keys).toEqual([null, null]);
    calls.length = 0;
    keys.length = 0;
    expect(await client.webhooks.create('https://example.com/h', { events: ['user.updated'] })).toMatchObject({ id: 'we_1', secret: 'whsec_x' });
    expect(calls).toEqual(Array(2).fill('POST http://api.test/merchant/webhooks {"url":"https://example.com/h","events":["user.updated"]}'));
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[1]).toBe(keys[0]);
    calls.length = 0;
    const failed = await client.webhooks.remove('we_1').catch((error: unknown) => error);
    expect(failed).toMatchObject({ status: 503, code: 'storage_unavailable' });
    expect(calls).toEqual(['DELETE http://api.test/merchant/webhooks/we_1 ']);
  });
});

describe('/healthz with healthParts (serve on MySQL: the dispatcher)', () => {
  it('adds the parts to the details, and answers exactly as before while there are none', async () => {
    let part: { ok: boolean; running: boolean; pending?: number } | undefined;
    const { api } = testApi({ healthParts: () => (part === undefined ? undefined : { webhooks: part }) });
    expect((await call(api, `${ORIGIN}/healthz`)).text).toBe('{"status":"ok"}');
    part = { ok: true, running: true, pending: 3 };
    expect((await call(api, `${ORIGIN}/healthz`)).body).toEqual({ status: 'ok', details: { webhooks: { ok: true, running: true, pending: 3 } } });
    part = { ok: false, running: false };
    const down = await call(api, `${ORIGIN}/healthz`);
    expect(down.status).toBe(200);
    expect(down.body.details.webhooks.ok).toBe(false);
  });
});

describe('resolving an endpoint URL when it is added', () => {
  it('gives up on a resolver slower than its bound, as a name that does not resolve; passes a quick answer through', async () => {
    const { boundedResolve } = await import('../../src/routes/webhooks.js');
    const { resolveWebhookAddress, WebhookAddressError } = await import('../../src/webhooks/address-guard.js');
    const never = boundedResolve(() => new Promise(() => undefined), 50);
    const started = Date.now();
    await expect(never('slow.example')).rejects.toBeInstanceOf(WebhookAddressError);
    expect(Date.now() - started).toBeLessThan(2000);
    await expect(resolveWebhookAddress(new URL('https://slow.example/h'), {}, never)).rejects.toThrow("The URL's host does not resolve.");
    const quick = boundedResolve(async () => [{ address: '93.184.215.14', family: 4 }], 50);
    expect(await resolveWebhookAddress(new URL('https://quick.example/h'), {}, quick)).toEqual({ address: '93.184.215.14', family: 4 });
  });
});
