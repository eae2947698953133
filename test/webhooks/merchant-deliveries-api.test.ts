/**
 * `GET /merchant/webhooks/{id}/deliveries` and `POST /merchant/webhooks/{id}/redeliver`
 * (docs/webhooks.md#deliveries), one suite on the memory storage and on MySQL (the real MariaDB),
 * through Request objects and a real Node server: pages newest first with a cursor, the `state`
 * filter, a redelivery of one event or since a time (bounded by the retention and a cap per call),
 * a merchant reaching only its own endpoints and events (404, never 403), the redelivery logged and
 * (MySQL) audited with the merchant and its key as the actor; the MySQL reads walk the endpoint
 * index without a sort.
 */
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { serve } from '../../adapters/node.js';
import { createMerchantApi, type MerchantApi } from '../../src/api.js';
import { createMerchantClient, MerchantResponseError } from '../../src/client/index.js';
import { silentLogger, type Logger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { importSeed, listAuditEvents, listMerchantKeys, MysqlStorage, MysqlWebhookOutbox } from '../../src/storage/mysql/index.js';
import type { Storage } from '../../src/storage/contract.js';
import type { WebhookOutbox } from '../../src/storage/webhook-outbox.js';
import { basic, call, testApi } from '../support/api.js';
import { CLEAN_ENV, CLI, ROOT } from '../support/processes.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';

const available = await mysqlAvailable();
const ORIGIN = 'http://api.test';
const A = basic('wa', 'key-a');
const B = basic('wb', 'key-b');
const SEED = { merchants: [{ id: 'wa', status: 'active' as const, keys: ['key-a'] }, { id: 'wb', status: 'active' as const, keys: ['key-b'] }], users: [] };
const FIELDS = ['id', 'event_id', 'endpoint_id', 'merchant_id', 'type', 'state', 'attempts', 'next_attempt_at', 'last_attempt_at', 'last_status', 'last_error', 'created_at'];

interface Env {
  api: MerchantApi;
  storage: Storage;
  outbox: WebhookOutbox;
  logged: Array<Record<string, unknown>>;
  /** The audit events `webhook_redelivered` of `wa` (MySQL), newest first; undefined where none is kept. */
  audited?: () => Promise<Array<{ actor: string; summary: Record<string, unknown> }>>;
  /** The actor the API records for `wa`'s key. */
  actor?: () => Promise<string>;
}

const json = (auth: Record<string, string>, body: unknown): RequestInit => ({ method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });

async function addEndpoint(env: Env, auth: Record<string, string>): Promise<string> {
  const added = await call(env.api, `${ORIGIN}/merchant/webhooks`, json(auth, { url: 'http://127.0.0.1:9/hook' }));
  expect(added.status).toBe(201);
  return added.body.data[0].id as string;
}

/** `n` test events queued for the endpoint, oldest first (their event ids). */
async function testEvents(env: Env, auth: Record<string, string>, endpointId: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const tested = await call(env.api, `${ORIGIN}/merchant/webhooks/${endpointId}/test`, { method: 'POST', headers: auth });
    expect(tested.status).toBe(202);
    ids.push(tested.body.data[0].event_id as string);
  }
  return ids;
}

/** Claims every due delivery and records `outcome` for those of `endpointId` whose event is in `events` (others are recorded as a retry). */
async function settle(env: Env, endpointId: string, events: readonly string[], outcome: 'delivered' | 'failed', extra: { disableEndpoint?: 'gone' } = {}): Promise<void> {
  const claimed = await env.outbox.claimDue({ limit: 100, leaseMs: 60_000, maxInFlightPerEndpoint: 100 });
  for (const delivery of claimed) {
    const mine = delivery.endpointId === endpointId && events.includes(delivery.eventId);
    await env.outbox.recordAttempt(mine ? { delivery, outcome, status: outcome === 'delivered' ? 200 : 500, durationMs: 1, ...extra } : { delivery, outcome: 'retry', nextAttemptAt: new Date(), error: 'timeout', durationMs: 1 });
  }
}

const list = (env: Env, auth: Record<string, string>, endpointId: string, query = '') => call(env.api, `${ORIGIN}/merchant/webhooks/${endpointId}/deliveries${query}`, { headers: auth });

function deliveriesSuite(name: string, make: () => Promise<Env>, done: () => Promise<void>): void {
  describe(name, () => {
    let env: Env;
    beforeAll(async () => {
      env = await make();
    });
    afterAll(done);

    it('lists the deliveries newest first, a page at a time with next_cursor and Link, each with every field, filtered by state', async () => {
      const id = await addEndpoint(env, A);
      const events = await testEvents(env, A, id, 5);
      await settle(env, id, events.slice(0, 2), 'delivered');
      const all = await list(env, A, id, '?limit=100');
      expect(all.status).toBe(200);
      expect(all.body.next_cursor).toBeNull();
      expect(all.response.headers.get('link')).toBeNull();
      expect(all.body.data.map((d: { event_id: string }) => d.event_id)).toEqual([...events].reverse());
      for (const d of all.body.data) expect(Object.keys(d)).toEqual(FIELDS);
      const delivered = all.body.data.find((d: { event_id: string }) => d.event_id === events[0]);
      expect(delivered).toEqual({
        id: expect.stringMatching(/^\d+$/),
        event_id: events[0],
        endpoint_id: id,
        merchant_id: 'wa',
        type: 'webhook.test',
        state: 'delivered',
        attempts: 1,
        next_attempt_at: null,
        last_attempt_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/),
        last_status: 200,
        last_error: null,
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/),
      });
      const retried = all.body.data.find((d: { event_id: string }) => d.event_id === events[4]);
      expect(retried).toMatchObject({ state: 'pending', attempts: 1, last_status: null, last_error: 'timeout', next_attempt_at: expect.stringMatching(/\+00:00$/) });

      // Pages of 2: 2, 2, 1, each naming the next; together the whole list.
      const seen: string[] = [];
      let query = '?limit=2';
      for (let page = 0; page < 3; page++) {
        const answer = await list(env, A, id, query);
        expect(answer.status).toBe(200);
        seen.push(...answer.body.data.map((d: { event_id: string }) => d.event_id));
        if (page < 2) {
          expect(answer.body.next_cursor).toEqual(expect.any(String));
          expect(answer.response.headers.get('link')).toBe(`<${ORIGIN}/merchant/webhooks/${id}/deliveries?limit=2&cursor=${answer.body.next_cursor}>; rel="next"`);
          query = `?limit=2&cursor=${answer.body.next_cursor}`;
        } else expect(answer.body.next_cursor).toBeNull();
      }
      expect(seen).toEqual([...events].reverse());

      const onlyDelivered = await list(env, A, id, '?state=delivered');
      expect(onlyDelivered.body.data.map((d: { event_id: string }) => d.event_id)).toEqual([events[1], events[0]]);
      expect((await list(env, A, id, '?state=pending&limit=100')).body.data).toHaveLength(3);
      expect((await list(env, A, id, '?state=failed')).body).toEqual({ status: 'ok', data: [], next_cursor: null, errors: [] });
    });

    it('refuses bad parameters, one detail each', async () => {
      const id = await addEndpoint(env, A);
      const bad = await list(env, A, id, '?limit=0&state=lost&cursor=nope!&page=2&limit=5');
      expect(bad.status).toBe(400);
      expect(bad.body.errors.map((e: { code: string; param: string }) => [e.code, e.param])).toEqual([
        ['invalid_parameter', 'limit'],
        ['invalid_parameter', 'state'],
        ['invalid_cursor', 'cursor'],
        ['unknown_parameter', 'page'],
        ['invalid_parameter', 'limit'],
      ]);
      expect((await list(env, A, id, '?limit=101')).body.errors[0].message).toBe('limit must be a whole number from 1 to 100.');
    });

    it('redelivers one event, or every delivery since a time; bounded by the retention; logged and audited as the merchant and its key', async () => {
      const id = await addEndpoint(env, A);
      const events = await testEvents(env, A, id, 3);
      await settle(env, id, events, 'failed');
      expect((await list(env, A, id, '?state=failed')).body.data).toHaveLength(3);

      const one = await call(env.api, `${ORIGIN}/merchant/webhooks/${id}/redeliver`, json(A, { event_id: events[1] }));
      expect(one.status).toBe(202);
      expect(one.body).toEqual({ status: 'ok', data: [{ endpoint_id: id, event_id: events[1], matched: 1, queued: 1, max: 1000, next_cursor: null }], errors: [] });
      const after = (await list(env, A, id)).body.data as Array<{ event_id: string; state: string; next_attempt_at: string | null }>;
      expect(after.map((d) => [d.event_id, d.state])).toEqual([[events[2], 'failed'], [events[1], 'pending'], [events[0], 'failed']]);
      expect(env.logged.find((f) => f.event === 'webhook_redelivered')).toMatchObject({ merchant_id: 'wa', endpoint_id: id, event_id: events[1], deliveries: 1 });

      const since = new Date(Date.now() - 3_600_000).toISOString();
      const all = await call(env.api, `${ORIGIN}/merchant/webhooks/${id}/redeliver`, json(A, { since }));
      expect(all.status).toBe(202);
      expect(all.body.data[0]).toMatchObject({ endpoint_id: id, since: expect.stringMatching(/\+00:00$/), matched: 3, queued: 3, max: 1000, next_cursor: null });
      expect((await list(env, A, id, '?state=pending')).body.data).toHaveLength(3);
      if (env.audited !== undefined) {
        const audit = await env.audited();
        const actor = await env.actor!();
        // The key that asked is the row's key_id, as on every other change a merchant makes.
        const keyId = actor.slice(actor.indexOf(' key:') + 5);
        expect(audit.slice(0, 2)).toEqual([
          expect.objectContaining({ actor, key_id: keyId, summary: { endpoint_id: id, since: all.body.data[0].since, deliveries: 3 } }),
          expect.objectContaining({ actor, key_id: keyId, summary: { endpoint_id: id, event_id: events[1], deliveries: 1 } }),
        ]);
      }

      // Bounds and shapes of the body.
      const refused = async (body: unknown) => (await call(env.api, `${ORIGIN}/merchant/webhooks/${id}/redeliver`, json(A, body))).body.errors[0];
      expect(await refused({ since: new Date(Date.now() - 8 * 86_400_000).toISOString() })).toEqual({ code: 'invalid_parameter', param: 'since', message: 'since may reach back at most 7 days (the retention: older deliveries are deleted).' });
      expect(await refused({ since: new Date(Date.now() + 3_600_000).toISOString() })).toMatchObject({ code: 'invalid_parameter', param: 'since' });
      expect(await refused({ since: 'yesterday' })).toMatchObject({ code: 'invalid_parameter', param: 'since' });
      expect(await refused({})).toMatchObject({ code: 'malformed_request' });
      expect(await refused({ event_id: events[0], since })).toMatchObject({ code: 'malformed_request' });
      expect(await refused({ event_id: events[0], all: true })).toMatchObject({ code: 'unknown_parameter', param: 'all' });
      expect(await refused({ event_id: 7 })).toMatchObject({ code: 'invalid_parameter', param: 'event_id' });
      expect(await refused({ event_id: events[0], cursor: 'x' })).toMatchObject({ code: 'malformed_request' });
      expect(await refused({ since, cursor: 'nope!' })).toMatchObject({ code: 'invalid_cursor', param: 'cursor' });
    });

    it('requeues at most the cap per call, the oldest first, naming where the rest begin', async () => {
      const id = await addEndpoint(env, A);
      const events = await testEvents(env, A, id, 5);
      await settle(env, id, events, 'delivered');
      const since = new Date(Date.now() - 3_600_000).toISOString().replace('Z', '000+00:00');
      const first = await env.storage.redeliverEndpointDeliveries!({ merchantId: 'wa', endpointId: id, target: { since }, max: 2 });
      expect(first).toMatchObject({ matched: 2, queued: 2, next: { createdAt: expect.stringMatching(/\+00:00$/), id: expect.any(String) } });
      const states = async () => Object.fromEntries(((await list(env, A, id)).body.data as Array<{ event_id: string; state: string }>).map((d) => [d.event_id, d.state]));
      expect(await states()).toEqual({ [events[0]!]: 'pending', [events[1]!]: 'pending', [events[2]!]: 'delivered', [events[3]!]: 'delivered', [events[4]!]: 'delivered' });
      const rest = await env.storage.redeliverEndpointDeliveries!({ merchantId: 'wa', endpointId: id, target: { since, after: first!.next! }, max: 3 });
      expect(rest).toMatchObject({ matched: 3, queued: 3, next: null });
      expect(Object.values(await states())).toEqual(['pending', 'pending', 'pending', 'pending', 'pending']);
    });

    it("another merchant's endpoint or event is 404, as one that does not exist, and nothing of it changes", async () => {
      const ofA = await addEndpoint(env, A);
      const ofB = await addEndpoint(env, B);
      const [eventOfA] = await testEvents(env, A, ofA, 1);
      await settle(env, ofA, [eventOfA!], 'failed');
      const noEndpoint = { status: 'error', data: [], errors: [{ code: 'not_found', message: 'This merchant has no webhook endpoint with this id.' }] };
      for (const id of [ofA, 'we_does_not_exist']) {
        const read = await list(env, B, id);
        expect(read.status).toBe(404);
        expect(read.body).toEqual(noEndpoint);
        for (const body of [{ event_id: eventOfA }, { since: new Date(Date.now() - 60_000).toISOString() }]) {
          const redo = await call(env.api, `${ORIGIN}/merchant/webhooks/${id}/redeliver`, json(B, body));
          expect(redo.status).toBe(404);
          expect(redo.body).toEqual(noEndpoint);
        }
      }
      // A's event through B's own endpoint: B has no delivery of it.
      const through = await call(env.api, `${ORIGIN}/merchant/webhooks/${ofB}/redeliver`, json(B, { event_id: eventOfA }));
      expect(through.status).toBe(404);
      expect(through.body.errors).toEqual([{ code: 'not_found', message: 'This endpoint has no delivery of this event.' }]);
      expect((await list(env, B, ofB)).body.data).toEqual([]);
      expect((await list(env, A, ofA)).body.data).toMatchObject([{ event_id: eventOfA, state: 'failed' }]);
    });

    it('leaves a delivery being sent right now to its attempt: matched, not queued', async () => {
      const id = await addEndpoint(env, A);
      const [event] = await testEvents(env, A, id, 1);
      const claimed = (await env.outbox.claimDue({ limit: 100, leaseMs: 60_000, maxInFlightPerEndpoint: 100 })).filter((d) => d.endpointId === id);
      expect(claimed.map((d) => d.eventId)).toEqual([event]);
      const answer = await call(env.api, `${ORIGIN}/merchant/webhooks/${id}/redeliver`, json(A, { event_id: event }));
      expect(answer.body.data[0]).toMatchObject({ matched: 1, queued: 0 });
      // Its attempt is still the one recorded.
      await env.outbox.recordAttempt({ delivery: claimed[0]!, outcome: 'delivered', status: 204, durationMs: 1 });
      expect((await list(env, A, id)).body.data).toMatchObject([{ event_id: event, state: 'delivered', last_status: 204 }]);
    });

    it('a disabled endpoint is 409: nothing is sent to it', async () => {
      const id = await addEndpoint(env, A);
      const [event] = await testEvents(env, A, id, 1);
      await settle(env, id, [event!], 'failed', { disableEndpoint: 'gone' });
      const answer = await call(env.api, `${ORIGIN}/merchant/webhooks/${id}/redeliver`, json(A, { event_id: event }));
      expect(answer.status).toBe(409);
      expect(answer.body.errors[0].code).toBe('conflict');
      expect((await list(env, A, id)).body.data).toMatchObject([{ event_id: event, state: 'failed' }]);
    });

    it('through a real server and the client SDK: each merchant its own deliveries', async () => {
      const served = await serve(env.api, { port: 0, hostname: '127.0.0.1' });
      try {
        const id = await addEndpoint(env, A);
        const events = await testEvents(env, A, id, 3);
        await settle(env, id, events, 'failed');
        const a = createMerchantClient({ baseUrl: served.url, merchantId: 'wa', apiKey: 'key-a' });
        const b = createMerchantClient({ baseUrl: served.url, merchantId: 'wb', apiKey: 'key-b' });
        const first = await a.webhooks.deliveries(id, { limit: 2 });
        expect(first.data.map((d) => d.event_id)).toEqual([events[2], events[1]]);
        const second = await a.webhooks.deliveries(id, { limit: 2, cursor: first.next_cursor! });
        expect(second).toEqual({ data: [expect.objectContaining({ event_id: events[0], state: 'failed', last_status: 500 })], next_cursor: null });
        expect((await a.webhooks.deliveries(id, { state: 'delivered' })).data).toEqual([]);
        expect(await a.webhooks.redeliver(id, { eventId: events[0]! })).toEqual({ endpoint_id: id, event_id: events[0], matched: 1, queued: 1, max: 1000, next_cursor: null });
        expect(await a.webhooks.redeliver(id, { since: new Date(Date.now() - 60_000).toISOString() })).toMatchObject({ matched: 3, queued: 3 });
        for (const attempt of [b.webhooks.deliveries(id), b.webhooks.redeliver(id, { eventId: events[0]! })]) {
          const error = await attempt.catch((e: unknown) => e);
          expect(error).toBeInstanceOf(MerchantResponseError);
          expect(error).toMatchObject({ status: 404, code: 'not_found' });
        }
        const raw = await fetch(`${served.url}/merchant/webhooks/${id}/deliveries`, { headers: B });
        expect(raw.status).toBe(404);
        expect(await raw.json()).toEqual({ status: 'error', data: [], errors: [{ code: 'not_found', message: 'This merchant has no webhook endpoint with this id.' }] });
        expect(() => a.webhooks.redeliver(id, {} as never)).toThrow(TypeError);
      } finally {
        await served.close();
      }
    });
  });
}

deliveriesSuite(
  'an endpoint\'s deliveries on the memory storage',
  async () => {
    const storage = new MemoryStorage(SEED);
    const logged: Array<Record<string, unknown>> = [];
    const logger: Logger = { ...silentLogger, info: (fields) => void logged.push(fields as Record<string, unknown>) };
    const api = createMerchantApi({ storage, logger, accessLog: false, tracing: false, webhooks: { allowPrivate: true, allowHttp: true, maxEndpointsPerMerchant: 10 } });
    return { api, storage, outbox: storage.webhookOutbox, logged };
  },
  async () => undefined,
);

let database: TestDatabase | undefined;
let mysqlStorage: MysqlStorage | undefined;
describe.skipIf(!available)('on MySQL', () => {
  deliveriesSuite(
    "an endpoint's deliveries on MySQL",
    async () => {
      database = await createTestDatabase();
      const db = database.db;
      await importSeed(db, database.masterKey, SEED);
      mysqlStorage = new MysqlStorage({ db, masterKey: database.masterKey });
      const logged: Array<Record<string, unknown>> = [];
      const logger: Logger = { ...silentLogger, info: (fields) => void logged.push(fields as Record<string, unknown>) };
      const api = createMerchantApi({ storage: mysqlStorage, logger, accessLog: false, tracing: false, webhooks: { allowPrivate: true, allowHttp: true, maxEndpointsPerMerchant: 10 } });
      return {
        api,
        storage: mysqlStorage,
        outbox: new MysqlWebhookOutbox({ db, masterKey: database.masterKey }),
        logged,
        audited: async () => (await listAuditEvents(db, { merchantId: 'wa', limit: 100 })).events.filter((e) => e.action === 'webhook_redelivered'),
        actor: async () => `merchant:wa key:${(await listMerchantKeys(db, database!.masterKey, 'wa'))[0]!.key_id}`,
      };
    },
    // Closed after the last test of this block (the plan's below).
    async () => undefined,
  );
  afterAll(async () => {
    await mysqlStorage?.close();
    await database?.drop();
  });

  it('the CLI answers the same items, a page at a time with --limit and --cursor, and redelivers through the same function', async () => {
    const cli = (args: string[]): Promise<{ code: number; out: string; err: string }> =>
      new Promise((resolve) => {
        execFile(process.execPath, [CLI.node, ...args], { cwd: ROOT, env: { ...process.env, ...CLEAN_ENV, DATABASE_URL: database!.url, MASTER_KEY: database!.masterKeyText } }, (error, stdout, stderr) => {
          resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout.trim(), err: stderr.trim() });
        });
      });
    const api = createMerchantApi({ storage: mysqlStorage!, logger: silentLogger, accessLog: false, tracing: false, webhooks: { allowPrivate: true, allowHttp: true, maxEndpointsPerMerchant: 10 } });
    const env = { api } as Env;
    const id = await addEndpoint(env, A);
    await testEvents(env, A, id, 3);
    const fromApi = (await list(env, A, id, '?limit=2')).body;
    const first = await cli(['webhook', 'deliveries', '--endpoint', id, '--limit', '2', '--json']);
    expect(first.code, first.err).toBe(0);
    expect(JSON.parse(first.out)).toEqual(fromApi.data);
    const cursor = /--cursor (\S+)$/.exec(first.err)?.[1];
    expect(cursor).toBe(fromApi.next_cursor);
    const second = await cli(['webhook', 'deliveries', '--endpoint', id, '--limit', '2', '--cursor', cursor!, '--json']);
    expect(JSON.parse(second.out)).toEqual((await list(env, A, id, `?limit=2&cursor=${cursor}`)).body.data);
    expect(second.err).not.toMatch(/--cursor/);
    const redo = await cli(['webhook', 'redeliver', '--endpoint', id, '--since', '2000-01-01T00:00:00Z', '--actor', 'ops']);
    expect(redo).toMatchObject({ code: 0, out: '3 deliveries queued again.' });
    const { events } = await listAuditEvents(database!.db, { merchantId: 'wa', limit: 1 });
    expect(events[0]).toMatchObject({ actor: 'ops', action: 'webhook_redelivered', summary: { endpoint_id: id, since: '2000-01-01T00:00:00.000000+00:00', deliveries: 3 } });
  });

  it('reads a page and a redelivery from the index (endpoint_id, created_at), in its order: no sort, no scan of the table', async () => {
    const db = database!.db;
    const explain = async (query: ReturnType<typeof sql>) => (await sql<{ key: string | null; Extra: string | null; type: string }>`EXPLAIN ${query}`.execute(db)).rows;
    const page = await explain(sql`SELECT id, created_at, state FROM webhook_deliveries FORCE INDEX (webhook_deliveries_endpoint)
      WHERE endpoint_id = ${'we_x'} AND (created_at < ${'2026-01-01 00:00:00'} OR (created_at = ${'2026-01-01 00:00:00'} AND id < ${'5'})) ORDER BY created_at DESC, id DESC LIMIT 1000`);
    const since = await explain(sql`SELECT id FROM webhook_deliveries FORCE INDEX (webhook_deliveries_endpoint)
      WHERE endpoint_id = ${'we_x'} AND created_at >= ${'2026-01-01 00:00:00'} ORDER BY created_at, id LIMIT 1001`);
    for (const plan of [page, since]) {
      expect(plan).toHaveLength(1);
      expect(plan[0]).toMatchObject({ key: 'webhook_deliveries_endpoint', type: 'range' });
      expect(plan[0]!.Extra ?? '').not.toMatch(/filesort|temporary/i);
    }
  });
});

describe('on a storage without webhooks (an embedder\'s own)', () => {
  it('answers 501 not_implemented', async () => {
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
    const { api } = testApi({ storage });
    const auth = basic('m1', 'key-one');
    expect((await call(api, `${ORIGIN}/merchant/webhooks/we_1/deliveries`, { headers: auth })).status).toBe(501);
    expect((await call(api, `${ORIGIN}/merchant/webhooks/we_1/redeliver`, json(auth, { event_id: 'evt_1' }))).status).toBe(501);
  });
});

describe("a redelivery on the memory storage's bounded queue", () => {
  it('takes only the room the merchant has: none left is 429 naming the queue, nothing changed', async () => {
    const storage = new MemoryStorage(SEED, { webhooks: { maxPendingDeliveries: 4 } });
    const api = createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false, webhooks: { allowPrivate: true, allowHttp: true } });
    const env: Env = { api, storage, outbox: storage.webhookOutbox, logged: [] };
    const id = await addEndpoint(env, A);
    const sent = await testEvents(env, A, id, 2);
    await settle(env, id, sent, 'delivered');
    // The merchant's half of the queue (2) taken again by two new tests.
    await testEvents(env, A, id, 2);
    const answer = await call(api, `${ORIGIN}/merchant/webhooks/${id}/redeliver`, json(A, { event_id: sent[0] }));
    expect(answer.status).toBe(429);
    expect(answer.body.errors[0]).toMatchObject({ code: 'too_many_requests', message: expect.stringContaining('webhook deliveries waiting') });
    expect(answer.response.headers.get('retry-after')).toBe('60');
    expect((await list(env, A, id, '?state=delivered')).body.data).toHaveLength(2);
  });
});
