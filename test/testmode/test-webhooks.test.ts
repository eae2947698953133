/**
 * Test mode's webhooks (docs/test-mode.md#webhooks) through a real Node server and the real
 * dispatcher, on the memory storage and on MySQL, with receivers on real ports that verify every
 * delivery with the `standardwebhooks` package: an endpoint added with a test key receives the
 * simulator's churn scenario, in order, byte for byte the simulator's answer, and no live change; a
 * live endpoint of the same merchant receives the live change and none of the simulator's events;
 * each key lists and manages only the endpoints of its own mode (the other mode's are 404).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { serve } from '../../adapters/node.js';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import type { Storage } from '../../src/storage/contract.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { importSeed, MysqlStorage, MysqlWebhookOutbox } from '../../src/storage/mysql/index.js';
import { SHARE_BATCH_FROM } from '../../src/storage/mysql/webhooks/share-batches.js';
import { sql } from 'kysely';
import { parseSeed, type Seed } from '../../src/storage/seed/seed.js';
import type { WebhookOutbox } from '../../src/storage/webhook-outbox.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { basic } from '../support/basic-auth.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { asRecord, user } from '../support/seeds.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

const available = await mysqlAvailable();
const POLICY = { allowPrivate: true, allowHttp: true };
const LIVE_KEY = 'live-key-tw';
const TEST_KEY = 'test_key-tw';
const LIVE = basic('tw', LIVE_KEY);
const TEST = basic('tw', TEST_KEY);

function seedDocument(): Seed {
  return parseSeed({ merchants: [{ id: 'tw', status: 'active', keys: [LIVE_KEY, { key: TEST_KEY, mode: 'test' }] }], users: [] });
}

interface Fixture {
  storage: Storage;
  outbox: WebhookOutbox;
  /** A change of live data, as the storage's own import makes it: a new user `id` shared with `tw`. */
  liveShare(id: string): Promise<void>;
  /**
   * MySQL: an import sharing `count` new users at once (past `SHARE_BATCH_FROM`, so one batch row,
   * expanded by the dispatcher's claims), answering how many `user.shared` deliveries each endpoint got.
   */
  batchShare?(count: number): Promise<(endpointId: string) => Promise<number>>;
  cleanup(): Promise<void>;
}

function suite(name: string, setup: () => Promise<Fixture>, skip = false) {
  describe.skipIf(skip)(`test endpoints on ${name}, through a real server and dispatcher`, () => {
    let fixture: Fixture;
    let url: string;
    let close: () => Promise<void>;
    let dispatcher: WebhookDispatcher;
    let liveReceiver: WebhookReceiver;
    let testReceiver: WebhookReceiver;
    let liveEndpoint: { id: string; secret: string };
    let testEndpoint: { id: string; secret: string };

    async function call(method: string, path: string, headers: Record<string, string>, body?: unknown) {
      const response = await fetch(`${url}${path}`, { method, headers: { ...headers, ...(body !== undefined && { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await response.text();
      return { status: response.status, text, body: text === '' ? undefined : JSON.parse(text) };
    }

    /** Every delivery sent and recorded: nothing more can reach a receiver until something is queued. */
    async function drained(): Promise<void> {
      await vi.waitFor(async () => expect(await fixture.outbox.stats()).toMatchObject({ pending: 0 }), { timeout: 15_000 });
    }

    beforeAll(async () => {
      fixture = await setup();
      const api = createMerchantApi({ storage: fixture.storage, logger: silentLogger, accessLog: false, tracing: false, webhooks: POLICY });
      const served = await serve(api, { port: 0, hostname: '127.0.0.1' });
      url = served.url;
      close = () => served.close();
      // One delivery of an endpoint at a time: the receiver sees them in the order they were queued.
      dispatcher = new WebhookDispatcher({ outbox: fixture.outbox, policy: POLICY, pollIntervalMs: 50, retrySchedule: [200], maxInFlightPerEndpoint: 1 });
      dispatcher.start();
      liveReceiver = await startWebhookReceiver('/live');
      testReceiver = await startWebhookReceiver('/test');
      const live = await call('POST', '/merchant/webhooks', LIVE, { url: liveReceiver.url });
      expect(live.status, live.text).toBe(201);
      const test = await call('POST', '/merchant/webhooks', TEST, { url: testReceiver.url });
      expect(test.status, test.text).toBe(201);
      liveEndpoint = live.body.data[0];
      testEndpoint = test.body.data[0];
      liveReceiver.secrets = [liveEndpoint.secret];
      testReceiver.secrets = [testEndpoint.secret];
    });
    afterAll(async () => {
      await dispatcher?.stop();
      await close?.();
      await liveReceiver?.close();
      await testReceiver?.close();
      await fixture?.cleanup();
    });

    it('each key lists only the endpoints of its own mode, and the other mode\'s endpoint is not found', async () => {
      expect((await call('GET', '/merchant/webhooks', TEST)).body.data.map((e: { id: string }) => e.id)).toEqual([testEndpoint.id]);
      expect((await call('GET', '/merchant/webhooks', LIVE)).body.data.map((e: { id: string }) => e.id)).toEqual([liveEndpoint.id]);
      for (const [headers, other] of [
        [TEST, liveEndpoint.id],
        [LIVE, testEndpoint.id],
      ] as const) {
        const answers = [
          await call('GET', `/merchant/webhooks/${other}/deliveries`, headers),
          await call('POST', `/merchant/webhooks/${other}/rotate-secret`, headers),
          await call('POST', `/merchant/webhooks/${other}/test`, headers),
          await call('POST', `/merchant/webhooks/${other}/redeliver`, headers, { event_id: 'evt_none' }),
          await call('DELETE', `/merchant/webhooks/${other}`, headers),
        ];
        expect(answers.map((answer) => [answer.status, answer.body?.errors?.[0]?.code])).toEqual(Array(5).fill([404, 'not_found']));
      }
      // Nothing of that changed either endpoint: each is still listed with its own key.
      expect((await call('GET', '/merchant/webhooks', TEST)).body.data).toHaveLength(1);
      expect((await call('GET', '/merchant/webhooks', LIVE)).body.data).toHaveLength(1);
    });

    it('the churn scenario reaches the test endpoint in order, signed, the bytes the simulator answered; the live endpoint gets none of it', async () => {
      const simulated = await call('POST', '/merchant/test/events', TEST, { scenario: 'churn' });
      expect(simulated.status, simulated.text).toBe(200);
      const answered = simulated.body.data as Array<{ type: string; timestamp: string; data: Record<string, unknown> }>;
      expect(answered.map((event) => event.type)).toEqual(['user.shared', 'user.updated', 'user.updated', 'user.deactivated', 'user.unshared']);
      await vi.waitFor(() => expect(testReceiver.received).toHaveLength(5), { timeout: 15_000 });
      await drained();
      expect(testReceiver.unverified).toEqual([]);
      expect(testReceiver.received.map((r) => r.event)).toEqual(answered);
      // The same body bytes as the answer's events (the answer is their concatenation).
      for (const r of testReceiver.received) expect(simulated.text).toContain(r.body);
      const ids = testReceiver.received.map((r) => String(r.headers['webhook-id']));
      expect(new Set(ids).size).toBe(5);
      expect([...ids].sort()).toEqual(ids);
      expect(liveReceiver.received).toEqual([]);
      expect(liveReceiver.unverified).toEqual([]);
      // The deliveries are listed with the test key, on the test endpoint.
      const deliveries = await call('GET', `/merchant/webhooks/${testEndpoint.id}/deliveries`, TEST);
      expect(deliveries.body.data.map((d: { type: string; state: string }) => [d.type, d.state])).toEqual(answered.map((event) => [event.type, 'delivered']).reverse());
      expect((await call('GET', `/merchant/webhooks/${liveEndpoint.id}/deliveries`, LIVE)).body.data).toEqual([]);
    });

    it('a live change reaches the live endpoint and not the test endpoint', async () => {
      const before = testReceiver.received.length;
      await fixture.liveShare('live-person');
      await vi.waitFor(() => expect(liveReceiver.received).toHaveLength(1), { timeout: 15_000 });
      await drained();
      expect(liveReceiver.unverified).toEqual([]);
      expect(liveReceiver.received[0]!.event).toMatchObject({ type: 'user.shared', data: { shared_user_id: 'live-person' } });
      expect(testReceiver.received).toHaveLength(before);
      expect(testReceiver.unverified).toEqual([]);
    });

    it('a webhook.test asked with a test key goes to the test endpoint, with the live key to the live one', async () => {
      const sent = await call('POST', `/merchant/webhooks/${testEndpoint.id}/test`, TEST);
      expect(sent.status, sent.text).toBe(202);
      await vi.waitFor(() => expect(testReceiver.received.at(-1)?.event).toMatchObject({ type: 'webhook.test', data: { endpoint_id: testEndpoint.id } }), { timeout: 15_000 });
      await drained();
      expect(liveReceiver.received.filter((r) => r.event.type === 'webhook.test')).toEqual([]);
    });

    // MySQL's own path: the memory storage has no batch rows.
    if (name === 'MySQL') it('an import\'s batch of shares (one outbox row, expanded later) reaches the live endpoint only', async () => {
      const deliveries = await fixture.batchShare!(SHARE_BATCH_FROM);
      // Expanded in full (a step writes every endpoint's deliveries of its shares at once): the test endpoint got none.
      await vi.waitFor(async () => expect(await deliveries(liveEndpoint.id)).toBe(SHARE_BATCH_FROM), { timeout: 30_000 });
      expect(await deliveries(testEndpoint.id)).toBe(0);
      expect(testReceiver.received.filter((r) => String(r.event.data.shared_user_id).startsWith('batch-'))).toEqual([]);
    });

    it('a test key removes its test endpoint; the live one stays', async () => {
      expect((await call('DELETE', `/merchant/webhooks/${testEndpoint.id}`, TEST)).status).toBe(204);
      expect((await call('GET', '/merchant/webhooks', TEST)).body.data).toEqual([]);
      expect((await call('GET', '/merchant/webhooks', LIVE)).body.data.map((e: { id: string }) => e.id)).toEqual([liveEndpoint.id]);
    });
  });
}

suite('the memory storage', async () => {
  const memory = new MemoryStorage(seedDocument());
  return {
    storage: memory,
    outbox: memory.webhookOutbox,
    liveShare: async (id) => memory.putUser('tw', asRecord(user('tw', id))),
    cleanup: () => memory.close(),
  };
});

let database: TestDatabase | undefined;
suite(
  'MySQL',
  async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, seedDocument());
    const mysql = new MysqlStorage({ db: database.db, masterKey: database.masterKey });
    return {
      storage: mysql,
      outbox: new MysqlWebhookOutbox({ db: database.db, masterKey: database.masterKey }),
      liveShare: async (id) => void (await importSeed(database!.db, undefined, { merchants: [], users: [user('tw', id)] })),
      batchShare: async (count) => {
        const users = Array.from({ length: count }, (_, i) => user('tw', `batch-${String(i).padStart(4, '0')}`));
        await importSeed(database!.db, undefined, { merchants: [], users });
        // Written as one batch row, not an event per share: the path under test.
        const { rows } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM webhook_share_batches`.execute(database!.db);
        expect(Number(rows[0]!.n)).toBe(1);
        return async (endpointId) => {
          const { rows: found } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM webhook_deliveries d INNER JOIN webhook_events e ON e.id = d.event_id
            WHERE d.endpoint_id = ${endpointId} AND e.type = 'user.shared' AND e.shared_user_id LIKE 'batch-%'`.execute(database!.db);
          return Number(found[0]!.n);
        };
      },
      cleanup: async () => database!.drop(),
    };
  },
  !available,
);
