/**
 * `Idempotency-Key` on the POSTs of the merchant API (docs/protocol.md#safe-retries), through real
 * Node servers on real ports, on the memory storage and on MySQL (two instances on one database):
 * a retry answers the same bytes (a new endpoint's secret shown again to the same key and body),
 * another request with the key is 422, a burst of one key runs the handler once, a claim left by
 * a dead instance expires with its lease, a key expires after 24 hours (an injected clock), the
 * memory storage's map is bounded, and MySQL keeps the answer sealed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, type Served } from '../../adapters/node.js';
import { createMerchantApi, type MerchantApiOptions } from '../../src/api.js';
import { StorageUnavailableError } from '../../src/errors.js';
import { silentLogger } from '../../src/observe/logger.js';
import { IDEMPOTENCY_LEASE_MS, IDEMPOTENCY_TTL_MS } from '../../src/pipeline/idempotency.js';
import type { Storage } from '../../src/storage/contract.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { createMysqlKysely, importSeed, MysqlStorage } from '../../src/storage/mysql/index.js';
import type { NewWebhookEndpoint } from '../../src/storage/webhook-endpoints.js';
import { openApiDocument } from '../../src/openapi/document.js';
import { ROUTES } from '../../src/routes/table.js';
import type { Route } from '../../src/routes/route.js';
import { basic } from '../support/api.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { contractSeed } from '../support/seeds.js';

const available = await mysqlAvailable();
const START = 1_700_000_000_000;

/** A clock the test moves. */
function clock() {
  let now = START;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

interface Sent {
  status: number;
  text: string;
  headers: Headers;
}

async function post(base: string, path: string, auth: Record<string, string>, body: string | undefined, key?: string): Promise<Sent> {
  const headers: Record<string, string> = { ...auth };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (key !== undefined) headers['idempotency-key'] = key;
  const response = await fetch(`${base}${path}`, { method: 'POST', headers, body });
  return { status: response.status, text: await response.text(), headers: response.headers };
}

async function endpoints(base: string, auth: Record<string, string>): Promise<Array<{ id: string; url: string }>> {
  return (await (await fetch(`${base}/merchant/webhooks`, { headers: auth })).json()).data;
}

const options = (now: () => number): Partial<MerchantApiOptions> => ({ now, logger: silentLogger, accessLog: false, tracing: false, webhooks: { allowPrivate: true, allowHttp: true, maxEndpointsPerMerchant: 50 } });

/** What every storage must do, through a real server on `start()`'s storage. */
function behaviour(name: string, start: () => Promise<{ storage: Storage; auth: Record<string, string>; merchantId: string; close(): Promise<void> }>) {
  describe(`Idempotency-Key through a real server on ${name}`, () => {
    const time = clock();
    let served: Served;
    let storage: Storage;
    let auth: Record<string, string>;
    let merchantId: string;
    let close: () => Promise<void>;
    let n = 0;
    const url = () => `http://127.0.0.1:9/hook-${++n}`;
    const body = (u: string) => JSON.stringify({ url: u, events: ['user.updated'] });

    beforeAll(async () => {
      ({ storage, auth, merchantId, close } = await start());
      served = await serve(createMerchantApi({ storage, ...options(time.now) }), { port: 0, hostname: '127.0.0.1' });
    });
    afterAll(async () => {
      await served?.close();
      await close?.();
    });

    it('a retry answers the same bytes, the secret shown again, and adds no second endpoint', async () => {
      const u = url();
      const key = crypto.randomUUID();
      const first = await post(served.url, '/merchant/webhooks', auth, body(u), key);
      expect(first.status).toBe(201);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      const secret = JSON.parse(first.text).data[0].secret as string;
      expect(secret).toMatch(/^whsec_/);
      const again = await post(served.url, '/merchant/webhooks', auth, body(u), key);
      expect(again.status).toBe(201);
      expect(again.text).toBe(first.text);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.headers.get('content-type')).toBe('application/json');
      expect(again.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));
      expect((await endpoints(served.url, auth)).filter((e) => e.url === u)).toHaveLength(1);
      // Without a key, the same request is a new one.
      expect((await post(served.url, '/merchant/webhooks', auth, body(u))).status).toBe(201);
      expect((await endpoints(served.url, auth)).filter((e) => e.url === u)).toHaveLength(2);
    });

    it('the same key with another body or path is 422 idempotency_mismatch, and runs nothing', async () => {
      const key = crypto.randomUUID();
      const u = url();
      expect((await post(served.url, '/merchant/webhooks', auth, body(u), key)).status).toBe(201);
      const other = await post(served.url, '/merchant/webhooks', auth, body(url()), key);
      expect(other.status).toBe(422);
      expect(JSON.parse(other.text)).toEqual({ status: 'error', data: [], errors: [{ code: 'idempotency_mismatch', message: expect.stringContaining('another request'), param: 'Idempotency-Key' }] });
      const [endpoint] = (await endpoints(served.url, auth)).filter((e) => e.url === u);
      const path = await post(served.url, `/merchant/webhooks/${endpoint!.id}/test`, auth, undefined, key);
      expect(path.status).toBe(422);
      expect((await endpoints(served.url, auth)).filter((e) => e.url === u)).toHaveLength(1);
    });

    it('a key breaking the rule is 400 naming it; a GET ignores the header', async () => {
      for (const bad of ['x'.repeat(256), 'naïve', 'tab\there']) {
        const answer = await post(served.url, '/merchant/webhooks', auth, body(url()), bad);
        expect(answer.status, bad).toBe(400);
        expect(JSON.parse(answer.text).errors[0]).toEqual({ code: 'invalid_parameter', message: expect.stringContaining('1-255 printable ASCII'), param: 'Idempotency-Key' });
      }
      expect((await post(served.url, '/merchant/webhooks', auth, body(url()), 'x'.repeat(255))).status).toBe(201);
      const listed = await fetch(`${served.url}/merchant/webhooks`, { headers: { ...auth, 'idempotency-key': 'x'.repeat(300) } });
      expect(listed.status).toBe(200);
      expect(listed.headers.get('idempotent-replayed')).toBeNull();
    });

    it('a burst of one key runs the handler once: exactly one endpoint, every other answer a replay or 409 with Retry-After', async () => {
      const key = crypto.randomUUID();
      const u = url();
      const answers = await Promise.all(Array.from({ length: 10 }, () => post(served.url, '/merchant/webhooks', auth, body(u), key)));
      const original = answers.filter((a) => a.status === 201 && a.headers.get('idempotent-replayed') === null);
      expect(original).toHaveLength(1);
      for (const answer of answers) {
        if (answer.status === 201) expect(answer.text).toBe(original[0]!.text);
        else {
          expect(answer.status).toBe(409);
          expect(JSON.parse(answer.text).errors[0].code).toBe('idempotency_in_progress');
          expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        }
      }
      expect((await endpoints(served.url, auth)).filter((e) => e.url === u)).toHaveLength(1);
    });

    it('keeps a 4xx the handler decided (Stripe\'s rule) and answers it again, marked', async () => {
      const key = crypto.randomUUID();
      const refused = await post(served.url, '/merchant/webhooks', auth, JSON.stringify({ url: 'ftp://example.com/x' }), key);
      expect(refused.status).toBe(400);
      const again = await post(served.url, '/merchant/webhooks', auth, JSON.stringify({ url: 'ftp://example.com/x' }), key);
      expect(again.status).toBe(400);
      expect(again.text).toBe(refused.text);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
    });

    it('a claim left by a dead instance holds its lease (409), then the next request runs', async () => {
      const key = crypto.randomUUID();
      const u = url();
      const fingerprint = await fingerprintOf('POST', '/merchant/webhooks', body(u));
      // What an instance killed while its handler ran leaves behind: a claim never completed nor released.
      expect((await storage.claimIdempotencyKey!({ merchantId, key, fingerprint, now: time.now(), leaseMs: IDEMPOTENCY_LEASE_MS, ttlMs: IDEMPOTENCY_TTL_MS })).state).toBe('claimed');
      const held = await post(served.url, '/merchant/webhooks', auth, body(u), key);
      expect(held.status).toBe(409);
      expect(held.headers.get('retry-after')).toBe('1');
      expect(JSON.parse(held.text).errors[0].message).toContain(`within ${IDEMPOTENCY_LEASE_MS / 1000} seconds`);
      time.advance(IDEMPOTENCY_LEASE_MS + 1);
      const ran = await post(served.url, '/merchant/webhooks', auth, body(u), key);
      expect(ran.status).toBe(201);
      expect(ran.headers.get('idempotent-replayed')).toBeNull();
      expect((await post(served.url, '/merchant/webhooks', auth, body(u), key)).text).toBe(ran.text);
    });

    it('forgets a key 24 hours after its first request: the same request then runs again', async () => {
      const key = crypto.randomUUID();
      const u = url();
      const first = await post(served.url, '/merchant/webhooks', auth, body(u), key);
      time.advance(IDEMPOTENCY_TTL_MS - 1);
      expect((await post(served.url, '/merchant/webhooks', auth, body(u), key)).headers.get('idempotent-replayed')).toBe('true');
      time.advance(1);
      const later = await post(served.url, '/merchant/webhooks', auth, body(u), key);
      expect(later.status).toBe(201);
      expect(later.headers.get('idempotent-replayed')).toBeNull();
      expect(later.text).not.toBe(first.text);
      expect((await endpoints(served.url, auth)).filter((e) => e.url === u)).toHaveLength(2);
    });
  });
}

/** The fingerprint the API computes (src/pipeline/idempotency.ts), written independently. */
async function fingerprintOf(method: string, path: string, body: string): Promise<string> {
  const bytes = new TextEncoder().encode(`${method}\u0000${path}\u0000${body}`);
  return Buffer.from(await crypto.subtle.digest('SHA-256', bytes)).toString('hex');
}

behaviour('the memory storage', async () => {
  const storage = new MemoryStorage(contractSeed());
  return { storage, auth: basic('m1', 'key-one'), merchantId: 'm1', close: () => storage.close() };
});

describe('the OpenAPI document, from the route table', () => {
  type Operation = { parameters: Array<{ $ref?: string }>; responses: Record<string, { description: string; headers?: Record<string, unknown> }> };
  const operations = (routes: readonly Route[]) => {
    const paths = openApiDocument('', routes).paths as Record<string, Record<string, Operation>>;
    return Object.entries(paths).flatMap(([path, item]) => Object.entries(item).filter(([method]) => method !== 'x-trailing-slash').map(([method, op]) => ({ path, method, op })));
  };
  const takesKey = (op: Operation) => op.parameters.some((p) => p.$ref === '#/components/parameters/Idempotency-Key');

  it('names Idempotency-Key, its 409, 422 and Idempotent-Replayed on every POST, and on nothing else', () => {
    const all = operations(ROUTES);
    const posts = all.filter((o) => o.method === 'post');
    expect(posts.length).toBeGreaterThanOrEqual(4);
    for (const { path, op } of posts) {
      expect(takesKey(op), path).toBe(true);
      expect(op.responses['409']!.description, path).toContain('idempotency_in_progress');
      expect(op.responses['422']!.description, path).toContain('idempotency_mismatch');
      const success = Object.entries(op.responses).find(([status]) => status.startsWith('2'))![1];
      expect(success.headers, path).toHaveProperty('Idempotent-Replayed');
    }
    for (const { path, method, op } of all.filter((o) => o.method !== 'post')) expect(takesKey(op), `${method} ${path}`).toBe(false);
  });

  it('a POST added to the table takes it with no line of its own; a route may opt out', () => {
    const extra: Route = { ...ROUTES.find((r) => r.id === 'testWebhook')!, id: 'newPost', pattern: '/merchant/new-things' };
    const optedOut: Route = { ...extra, id: 'optedOut', pattern: '/merchant/other-things', idempotencyKey: false };
    const ops = operations([...ROUTES, extra, optedOut]);
    expect(takesKey(ops.find((o) => o.path === '/merchant/new-things')!.op)).toBe(true);
    expect(takesKey(ops.find((o) => o.path === '/merchant/other-things')!.op)).toBe(false);
  });
});

describe('on the memory storage: what is not kept, and the bounded map', () => {
  it('a 5xx is not kept: the key is released and the retry runs', async () => {
    let failures = 1;
    // A storage whose first endpoint write fails as a backend would.
    class Flaky extends MemoryStorage {
      override async addWebhookEndpoint(endpoint: NewWebhookEndpoint) {
        if (failures-- > 0) throw new StorageUnavailableError('down');
        return super.addWebhookEndpoint(endpoint);
      }
    }
    const storage = new Flaky(contractSeed());
    const served = await serve(createMerchantApi({ storage, ...options(() => START) }), { port: 0, hostname: '127.0.0.1' });
    try {
      const key = crypto.randomUUID();
      const auth = basic('m1', 'key-one');
      const payload = JSON.stringify({ url: 'http://127.0.0.1:9/flaky' });
      expect((await post(served.url, '/merchant/webhooks', auth, payload, key)).status).toBe(503);
      const retried = await post(served.url, '/merchant/webhooks', auth, payload, key);
      expect(retried.status).toBe(201);
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
      expect(storage.idempotencyKeys.count).toBe(1);
    } finally {
      await served.close();
      await storage.close();
    }
  });

  it('an answer that cannot be stored still goes out, logged; its key holds until its lease ends, then the retry runs', async () => {
    const time = clock();
    class NoCompletion extends MemoryStorage {
      override async completeIdempotencyKey(): Promise<void> {
        throw new StorageUnavailableError('down');
      }
    }
    const storage = new NoCompletion(contractSeed());
    const warned: Array<Record<string, unknown>> = [];
    const logger = { ...silentLogger, warn: (fields: object) => void warned.push(fields as Record<string, unknown>) };
    const served = await serve(createMerchantApi({ storage, ...options(time.now), logger }), { port: 0, hostname: '127.0.0.1' });
    try {
      const auth = basic('m1', 'key-one');
      const payload = JSON.stringify({ url: 'http://127.0.0.1:9/unstored' });
      const made = await post(served.url, '/merchant/webhooks', auth, payload, 'k-unstored');
      expect(made.status).toBe(201);
      expect(warned).toEqual([expect.objectContaining({ event: 'idempotency_key_not_stored', merchant_id: 'm1', request_id: made.headers.get('x-request-id') })]);
      expect(JSON.stringify(warned)).not.toContain('whsec_');
      expect((await post(served.url, '/merchant/webhooks', auth, payload, 'k-unstored')).status).toBe(409);
      time.advance(IDEMPOTENCY_LEASE_MS);
      expect((await post(served.url, '/merchant/webhooks', auth, payload, 'k-unstored')).status).toBe(201);
    } finally {
      await served.close();
      await storage.close();
    }
  });

  it('refuses a new key rather than evict one: a merchant at half the map is 429, a full map 503, both with Retry-After until the oldest expires', async () => {
    const time = clock();
    const storage = new MemoryStorage(contractSeed(), { idempotency: { maxKeys: 4 } });
    const served = await serve(createMerchantApi({ storage, ...options(time.now) }), { port: 0, hostname: '127.0.0.1' });
    try {
      const m1 = basic('m1', 'key-one');
      const m2 = basic('m2', 'key-two');
      const M1 = basic('M1', 'case-differs');
      for (const [auth, i] of [[m1, 1], [m1, 2], [m2, 3]] as const) expect((await post(served.url, '/merchant/webhooks', auth, JSON.stringify({ url: `http://127.0.0.1:9/b${i}` }), `k${i}`)).status).toBe(201);
      time.advance(3_600_000);
      const mine = await post(served.url, '/merchant/webhooks', m1, JSON.stringify({ url: 'http://127.0.0.1:9/b4' }), 'k4');
      expect(mine.status).toBe(429);
      expect(JSON.parse(mine.text).errors[0].message).toContain('idempotency keys');
      expect(Number(mine.headers.get('retry-after'))).toBe(23 * 3600);
      // The keys held still answer.
      expect((await post(served.url, '/merchant/webhooks', m1, JSON.stringify({ url: 'http://127.0.0.1:9/b1' }), 'k1')).headers.get('idempotent-replayed')).toBe('true');
      expect((await post(served.url, '/merchant/webhooks', m2, JSON.stringify({ url: 'http://127.0.0.1:9/b5' }), 'k5')).status).toBe(201);
      const full = await post(served.url, '/merchant/webhooks', M1, JSON.stringify({ url: 'http://127.0.0.1:9/b6' }), 'k6');
      expect(full.status).toBe(503);
      expect(Number(full.headers.get('retry-after'))).toBe(23 * 3600);
      expect(storage.idempotencyKeys.count).toBe(4);
      // Once the oldest expire, the map takes new keys again.
      time.advance(IDEMPOTENCY_TTL_MS);
      expect((await post(served.url, '/merchant/webhooks', M1, JSON.stringify({ url: 'http://127.0.0.1:9/b6' }), 'k6')).status).toBe(201);
      expect(storage.idempotencyKeys.count).toBe(1);
    } finally {
      await served.close();
      await storage.close();
    }
  });

  it('a storage without the operations answers a request with the header 501, one without it as before', async () => {
    // The memory storage without the optional operations, as an embedder's own storage may be.
    class WithoutKeys extends MemoryStorage {
      constructor() {
        super(contractSeed());
        Object.defineProperty(this, 'claimIdempotencyKey', { value: undefined });
      }
    }
    const memory = new WithoutKeys();
    const storage: Storage = memory;
    const served = await serve(createMerchantApi({ storage, ...options(() => START) }), { port: 0, hostname: '127.0.0.1' });
    try {
      const auth = basic('m1', 'key-one');
      const refused = await post(served.url, '/merchant/webhooks', auth, JSON.stringify({ url: 'http://127.0.0.1:9/x' }), 'k');
      expect(refused.status).toBe(501);
      expect(JSON.parse(refused.text).errors[0].message).toContain('Idempotency-Key');
      expect((await post(served.url, '/merchant/webhooks', auth, JSON.stringify({ url: 'http://127.0.0.1:9/x' }))).status).toBe(201);
    } finally {
      await served.close();
      await memory.close();
    }
  });
});

describe.skipIf(!available)('on MySQL', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, { merchants: [{ id: 'ia', status: 'active', keys: ['key-a'] }], users: [] });
  });
  afterAll(async () => {
    await database?.drop();
  });

  behaviour('MySQL', async () => {
    const storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey });
    return { storage, auth: basic('ia', 'key-a'), merchantId: 'ia', close: () => storage.close() };
  });

  it('two instances on one database: a retry to the other answers the same bytes; a burst across both runs once; the row holds no secret in the clear', async () => {
    const time = clock();
    const first = new MysqlStorage({ db: database.db, masterKey: database.masterKey });
    // Its own pool, as another instance has.
    const second = new MysqlStorage({ db: createMysqlKysely(database.url), masterKey: database.masterKey, destroyOnClose: true });
    const a = await serve(createMerchantApi({ storage: first, ...options(time.now) }), { port: 0, hostname: '127.0.0.1' });
    const b = await serve(createMerchantApi({ storage: second, ...options(time.now) }), { port: 0, hostname: '127.0.0.1' });
    try {
      const auth = basic('ia', 'key-a');
      const key = crypto.randomUUID();
      const payload = JSON.stringify({ url: 'http://127.0.0.1:9/two-instances' });
      const created = await post(a.url, '/merchant/webhooks', auth, payload, key);
      expect(created.status).toBe(201);
      const retried = await post(b.url, '/merchant/webhooks', auth, payload, key);
      expect(retried.text).toBe(created.text);
      expect(retried.headers.get('idempotent-replayed')).toBe('true');
      const secret = JSON.parse(created.text).data[0].secret as string;

      const rows = await database.db.selectFrom('idempotency_keys').selectAll().where('idempotency_key', '=', key).execute();
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ merchant_id: 'ia', status: 201, claim_token: null });
      expect(rows[0]!.sealed_answer).toMatch(/^[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
      expect(rows[0]!.sealed_answer).not.toContain(secret);
      expect(rows[0]!.sealed_answer).not.toContain(Buffer.from(secret).toString('base64url'));
      expect(rows[0]!.sealed_answer).not.toContain('whsec');
      // Copied to another key's row, the sealed answer does not open: bound to its key.
      await database.db.insertInto('idempotency_keys').values({ ...rows[0]!, idempotency_key: 'copied' }).execute();
      expect((await post(a.url, '/merchant/webhooks', auth, payload, 'copied')).status).toBe(503);

      const burstKey = crypto.randomUUID();
      const burstBody = JSON.stringify({ url: 'http://127.0.0.1:9/burst-two' });
      const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => post(i % 2 ? a.url : b.url, '/merchant/webhooks', auth, burstBody, burstKey)));
      expect(answers.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null)).toHaveLength(1);
      expect(answers.every((r) => r.status === 201 || r.status === 409)).toBe(true);
      expect((await endpoints(a.url, auth)).filter((e) => e.url === 'http://127.0.0.1:9/burst-two')).toHaveLength(1);
    } finally {
      await a.close();
      await b.close();
      await first.close();
      await second.close();
    }
  });

  it('prunes expired keys in bounded batches', async () => {
    const { pruneIdempotencyKeys } = await import('../../src/storage/mysql/index.js');
    const storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey });
    try {
      for (let i = 0; i < 5; i++) await storage.claimIdempotencyKey({ merchantId: 'prune', key: `p${i}`, fingerprint: '0'.repeat(64), now: START - IDEMPOTENCY_TTL_MS - 10_000, leaseMs: 1000, ttlMs: IDEMPOTENCY_TTL_MS });
      const before = await database.db.selectFrom('idempotency_keys').select((eb) => eb.fn.countAll<number>().as('n')).where('merchant_id', '=', 'prune').executeTakeFirstOrThrow();
      expect(Number(before.n)).toBe(5);
      expect(await pruneIdempotencyKeys(database.db, { now: START, batchSize: 2, maxBatches: 2 })).toBe(4);
      expect(await pruneIdempotencyKeys(database.db, { now: START, batchSize: 2, maxBatches: 2 })).toBeGreaterThanOrEqual(1);
      const after = await database.db.selectFrom('idempotency_keys').select((eb) => eb.fn.countAll<number>().as('n')).where('merchant_id', '=', 'prune').executeTakeFirstOrThrow();
      expect(Number(after.n)).toBe(0);
    } finally {
      await storage.close();
    }
  });
});
