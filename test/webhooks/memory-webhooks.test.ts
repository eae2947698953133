/**
 * Webhooks on the memory storage (docs/webhooks.md#on-the-memory-storage): endpoints added through
 * `/merchant/webhooks` and through the storage's own methods, events from `putUser` and
 * `webhook.test`, sent by the same dispatcher as on MySQL from the in-process queue to real
 * receivers on real ports, every delivery verified by the `standardwebhooks` package. Retries
 * keep the webhook-id; merchants are isolated; the queue is bounded.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createMerchantApi, type MerchantApi } from '../../src/api.js';
import { changedUserJson } from '../../src/listing/user-json.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage, type MemoryStorageOptions } from '../../src/storage/memory/index.js';
import type { ChangedUserRecord, UserRecord } from '../../src/storage/contract.js';
import { WebhookDispatcher, type AttemptEvent, type DispatcherOptions } from '../../src/webhooks/dispatcher.js';
import { basic, call, ORIGIN } from '../support/api.js';
import { user } from '../support/seeds.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

const TEST_POLICY = { allowPrivate: true, allowHttp: true };
const A = basic('wa', 'key-a');
const B = basic('wb', 'key-b');
const ALL = ['user.shared', 'user.updated', 'user.deactivated', 'user.unshared'];

function record(merchantId: string, id: string, overrides: Parameters<typeof user>[2] = {}): UserRecord {
  const { merchant_id: _m, updated_at: _u, ...rest } = user(merchantId, id, overrides) as ReturnType<typeof user> & { updated_at?: string };
  return rest as UserRecord;
}

describe('webhooks on the memory storage', () => {
  const receivers: WebhookReceiver[] = [];
  const dispatchers: WebhookDispatcher[] = [];
  afterEach(async () => {
    await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });

  function setup(options: MemoryStorageOptions = {}) {
    const storage = new MemoryStorage(
      {
        merchants: [
          { id: 'wa', status: 'active', keys: ['key-a'] },
          { id: 'wb', status: 'active', keys: ['key-b'] },
        ],
        users: [],
      },
      options,
    );
    const api = createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false, webhooks: { ...TEST_POLICY, maxEndpointsPerMerchant: 3 } });
    return { storage, api };
  }

  function dispatcher(storage: MemoryStorage, options: Partial<DispatcherOptions> = {}): WebhookDispatcher {
    const d = new WebhookDispatcher({ outbox: storage.webhookOutbox, policy: TEST_POLICY, pollIntervalMs: 50, retrySchedule: [200, 200, 200], ...options });
    dispatchers.push(d);
    d.start();
    return d;
  }

  async function receiver(): Promise<WebhookReceiver> {
    const r = await startWebhookReceiver();
    receivers.push(r);
    return r;
  }

  const add = (api: MerchantApi, auth: Record<string, string>, body: unknown) =>
    call(api, `${ORIGIN}/merchant/webhooks`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('an endpoint added through the API gets its test event, verified, and is listed without its secret', async () => {
    const { storage, api } = setup();
    const r = await receiver();
    const added = await add(api, A, { url: r.url });
    expect(added.status).toBe(201);
    const endpoint = added.body.data[0];
    expect(endpoint).toEqual({ id: expect.stringMatching(/^we_/), url: r.url, events: ALL, status: 'enabled', disabled_reason: null, created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/), secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/) });
    r.secrets.push(endpoint.secret);
    const listed = await call(api, `${ORIGIN}/merchant/webhooks`, { headers: A });
    expect(listed.status).toBe(200);
    expect(listed.text).not.toContain('whsec_');
    const tested = await call(api, `${ORIGIN}/merchant/webhooks/${endpoint.id}/test`, { method: 'POST', headers: A });
    expect(tested.status).toBe(202);
    dispatcher(storage);
    await vi.waitFor(() => expect(r.received).toHaveLength(1), { timeout: 10_000 });
    expect(r.unverified).toEqual([]);
    expect(r.received[0]!.event).toEqual({ type: 'webhook.test', timestamp: expect.stringMatching(/\+00:00$/), data: { endpoint_id: endpoint.id } });
    expect(r.received[0]!.headers['webhook-id']).toBe(tested.body.data[0].event_id);
    expect(r.received[0]!.headers['webhook-id']).toMatch(/^evt_[0-9a-f]{18}[A-Za-z0-9_-]{24}$/);
    await vi.waitFor(() => expect(storage.listWebhookDeliveries({ endpointId: endpoint.id })).toMatchObject([{ state: 'delivered', attempts: 1, lastStatus: 204 }]));
    expect((await call(api, `${ORIGIN}/merchant/webhooks/${endpoint.id}`, { method: 'DELETE', headers: A })).status).toBe(204);
    expect(storage.listWebhookDeliveries({ endpointId: endpoint.id })).toEqual([]);
  });

  it('putUser sends user.shared, user.updated and user.deactivated, each the record the API answers with its updated_at; an equal record sends nothing', async () => {
    const { storage } = setup();
    const r = await receiver();
    const endpoint = await storage.addWebhookEndpoint({ merchantId: 'wa', url: r.url, events: ALL, maxPerMerchant: 10 });
    r.secrets.push(endpoint.secret);
    storage.putUser('wa', record('wa', 'u1'));
    storage.putUser('wa', record('wa', 'u1'));
    storage.putUser('wa', record('wa', 'u1', { city: 'Hamburg' }));
    storage.putUser('wa', record('wa', 'u1', { city: 'Hamburg', deactivated_at: '2026-01-02T03:04:05.000006+00:00' }));
    // Deactivated already: a later change is an update.
    storage.putUser('wa', record('wa', 'u1', { city: 'Köln', deactivated_at: '2026-01-02T03:04:05.000006+00:00' }));
    dispatcher(storage);
    await vi.waitFor(() => expect(r.received).toHaveLength(4), { timeout: 10_000 });
    expect(r.unverified).toEqual([]);
    const sorted = [...r.received].sort((x, y) => String(x.event.data.updated_at).localeCompare(String(y.event.data.updated_at)));
    expect(sorted.map((x) => [x.event.type, x.event.data.city])).toEqual([['user.shared', 'Berlin'], ['user.updated', 'Hamburg'], ['user.deactivated', 'Hamburg'], ['user.updated', 'Köln']]);
    const [page] = [await storage.listUsers({ merchantId: 'wa', filter: {}, order: 'updated_at', limit: 10 })];
    const last = sorted[3]!;
    expect(last.body).toBe(`{"type":"user.updated","timestamp":${JSON.stringify(last.event.data.updated_at)},"data":${changedUserJson(page[0] as ChangedUserRecord)}}`);
    expect(last.event.timestamp).toBe(last.event.data.updated_at);
    expect(new Set(r.received.map((x) => x.headers['webhook-id'])).size).toBe(4);
  });

  it('a receiver answering 500 twice then 200 gets the event on the third attempt with the same webhook-id', async () => {
    const { storage } = setup();
    const r = await receiver();
    r.answer = (n, res) => void res.writeHead(n < 2 ? 500 : 200).end('ok');
    const endpoint = await storage.addWebhookEndpoint({ merchantId: 'wa', url: r.url, events: ALL, maxPerMerchant: 10 });
    r.secrets.push(endpoint.secret);
    const attempts: AttemptEvent[] = [];
    storage.putUser('wa', record('wa', 'retried'));
    dispatcher(storage, { onAttempt: (a) => attempts.push(a) });
    await vi.waitFor(() => expect(attempts).toHaveLength(3), { timeout: 10_000 });
    expect(attempts.map((a) => [a.attempt, a.status, a.outcome])).toEqual([[1, 500, 'retry'], [2, 500, 'retry'], [3, 200, 'delivered']]);
    expect(r.received).toHaveLength(3);
    expect(new Set(r.received.map((x) => x.headers['webhook-id'])).size).toBe(1);
    expect(new Set(r.received.map((x) => x.body)).size).toBe(1);
    expect(storage.listWebhookDeliveries({ endpointId: endpoint.id })).toMatchObject([{ state: 'delivered', attempts: 3, lastStatus: 200 }]);
    expect((await storage.webhookOutbox.stats()).pending).toBe(0);
  });

  it('410 Gone disables the endpoint and cancels what was pending; enabling turns it on again', async () => {
    const { storage, api } = setup();
    const r = await receiver();
    r.answer = (_n, res) => void res.writeHead(410).end();
    const endpoint = await storage.addWebhookEndpoint({ merchantId: 'wa', url: r.url, events: ALL, maxPerMerchant: 10 });
    r.secrets.push(endpoint.secret);
    const attempts: AttemptEvent[] = [];
    for (let i = 0; i < 10; i++) storage.putUser('wa', record('wa', `g${i}`));
    dispatcher(storage, { onAttempt: (a) => attempts.push(a), maxInFlightPerEndpoint: 1 });
    await vi.waitFor(() => expect((storage.listWebhookEndpoints('wa') as Promise<unknown>)).resolves.toMatchObject([{ status: 'disabled', disabledReason: 'gone' }]), { timeout: 10_000 });
    expect(attempts[0]).toMatchObject({ status: 410, outcome: 'failed', disabledEndpoint: 'gone' });
    expect(attempts).toHaveLength(1);
    expect(storage.listWebhookDeliveries({ endpointId: endpoint.id, state: 'cancelled' })).toHaveLength(9);
    expect((await storage.webhookOutbox.stats()).pending).toBe(0);
    expect((await call(api, `${ORIGIN}/merchant/webhooks/${endpoint.id}/test`, { method: 'POST', headers: A })).status).toBe(409);
    // A disabled endpoint receives no new events.
    storage.putUser('wa', record('wa', 'after'));
    expect((await storage.webhookOutbox.stats()).pending).toBe(0);
    expect(storage.enableWebhookEndpoint('wa', endpoint.id)).toBe(true);
    r.answer = (_n, res) => void res.writeHead(204).end();
    storage.putUser('wa', record('wa', 'enabled'));
    await vi.waitFor(() => expect(r.received.some((x) => x.event.data.shared_user_id === 'enabled')).toBe(true), { timeout: 10_000 });
  });

  it('during a rotation both secrets sign', async () => {
    const { storage } = setup();
    const r = await receiver();
    const endpoint = await storage.addWebhookEndpoint({ merchantId: 'wa', url: r.url, events: ALL, maxPerMerchant: 10 });
    const rotated = (await storage.rotateWebhookSecret('wa', endpoint.id, 60_000))!;
    expect(rotated.oldExpiresAt).toMatch(/\+00:00$/);
    r.secrets.push(endpoint.secret, rotated.secret);
    storage.putUser('wa', record('wa', 'rotating'));
    dispatcher(storage);
    await vi.waitFor(() => expect(r.received).toHaveLength(1), { timeout: 10_000 });
    expect(r.received[0]!.verifiedBy).toEqual([0, 1]);
    expect(String(r.received[0]!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    // Rotated again with no overlap: the current secret stops at once, the first one signs on to its end (docs/webhooks.md#rotation).
    const again = (await storage.rotateWebhookSecret('wa', endpoint.id, 0))!;
    expect(again.oldExpiresAt).toBeNull();
    r.secrets.push(again.secret);
    storage.putUser('wa', record('wa', 'rotating', { city: 'Bonn' }));
    await vi.waitFor(() => expect(r.received).toHaveLength(2), { timeout: 10_000 });
    expect(r.received[1]!.verifiedBy).toEqual([0, 2]);
  });

  it('one merchant\'s receiver never gets another\'s events, and a merchant sees and changes only its own endpoints', async () => {
    const { storage, api } = setup();
    const ra = await receiver();
    const rb = await receiver();
    const ofA = (await add(api, A, { url: ra.url })).body.data[0];
    const ofB = (await add(api, B, { url: rb.url })).body.data[0];
    ra.secrets.push(ofA.secret);
    rb.secrets.push(ofB.secret);
    // The same person at both merchants, under each one's id.
    storage.putUser('wa', record('wa', 'person-at-a'));
    storage.putUser('wb', record('wb', 'person-at-b'));
    storage.putUser('wa', record('wa', 'person-at-a', { last_name: 'Byron' }));
    expect((await call(api, `${ORIGIN}/merchant/webhooks`, { headers: B })).body.data.map((e: { id: string }) => e.id)).toEqual([ofB.id]);
    for (const [method, path] of [['DELETE', `/merchant/webhooks/${ofA.id}`], ['POST', `/merchant/webhooks/${ofA.id}/test`], ['POST', `/merchant/webhooks/${ofA.id}/rotate-secret`]] as const) {
      const answer = await call(api, `${ORIGIN}${path}`, { method, headers: B });
      expect(answer.status, path).toBe(404);
      expect(answer.body.errors[0]).toEqual({ code: 'not_found', message: 'This merchant has no webhook endpoint with this id.' });
    }
    dispatcher(storage);
    await vi.waitFor(() => {
      expect(ra.received).toHaveLength(2);
      expect(rb.received).toHaveLength(1);
    }, { timeout: 10_000 });
    expect(ra.unverified).toEqual([]);
    expect(rb.unverified).toEqual([]);
    expect(ra.received.map((x) => x.event.data.shared_user_id)).toEqual(['person-at-a', 'person-at-a']);
    expect(rb.received.map((x) => [x.event.type, x.event.data.shared_user_id])).toEqual([['user.shared', 'person-at-b']]);
  });

  it('an endpoint receives only the types it names; a merchant without one costs no event', async () => {
    const { storage } = setup();
    const r = await receiver();
    const endpoint = await storage.addWebhookEndpoint({ merchantId: 'wa', url: r.url, events: ['user.deactivated'], maxPerMerchant: 10 });
    r.secrets.push(endpoint.secret);
    storage.putUser('wa', record('wa', 'typed'));
    storage.putUser('wb', record('wb', 'nobody-listens'));
    expect((await storage.webhookOutbox.stats()).pending).toBe(0);
    storage.putUser('wa', record('wa', 'typed', { deactivated_at: '2026-01-02T03:04:05.000006+00:00' }));
    expect((await storage.webhookOutbox.stats()).pending).toBe(1);
  });

  it('holds a merchant to its most endpoints and the server to its total (409 conflict)', async () => {
    const { api } = setup({ webhooks: { maxEndpoints: 4 } });
    for (let i = 0; i < 3; i++) expect((await add(api, A, { url: `http://127.0.0.1:9/a${i}` })).status).toBe(201);
    const fourth = await add(api, A, { url: 'http://127.0.0.1:9/a3' });
    expect(fourth.status).toBe(409);
    expect(fourth.body.errors[0]).toEqual({ code: 'conflict', message: 'A merchant has at most 3 webhook endpoints.' });
    expect((await add(api, B, { url: 'http://127.0.0.1:9/b0' })).status).toBe(201);
    const full = await add(api, B, { url: 'http://127.0.0.1:9/b1' });
    expect(full.status).toBe(409);
    expect(full.body.errors[0].message).toBe('This server holds at most 4 webhook endpoints in all.');
  });

  it('bounds the queue: a merchant holds at most half of it; what finds no room is dropped and counted, and a test is refused (429 at the half, 503 full)', async () => {
    const dropped: string[] = [];
    const { storage, api } = setup({ webhooks: { maxPendingDeliveries: 10, onDropped: (merchantId) => dropped.push(merchantId) } });
    const a = await storage.addWebhookEndpoint({ merchantId: 'wa', url: 'http://127.0.0.1:9/a', events: ALL, maxPerMerchant: 10 });
    const b = await storage.addWebhookEndpoint({ merchantId: 'wb', url: 'http://127.0.0.1:9/b', events: ALL, maxPerMerchant: 10 });
    for (let i = 0; i < 8; i++) storage.putUser('wa', record('wa', `flood-${i}`));
    expect(await storage.webhookOutbox.stats()).toMatchObject({ pending: 5, dropped: 3 });
    expect(dropped).toEqual(['wa', 'wa', 'wa']);
    // The change itself stands: the listing has every user.
    expect(await storage.listUsers({ merchantId: 'wa', filter: {}, order: 'shared_user_id', limit: 100 })).toHaveLength(8);
    // As the replay store answers a merchant holding its half: 429, with the reason and when to try again.
    const refused = await call(api, `${ORIGIN}/merchant/webhooks/${a.id}/test`, { method: 'POST', headers: A });
    expect(refused.status).toBe(429);
    expect(refused.body.errors[0]).toMatchObject({ code: 'too_many_requests', message: "This merchant has 5 webhook deliveries waiting, the most one merchant may (half of the queue's 10); try again once some are sent." });
    expect(refused.response.headers.get('retry-after')).toBe('60');
    // The other merchant still has its room.
    expect((await call(api, `${ORIGIN}/merchant/webhooks/${b.id}/test`, { method: 'POST', headers: B })).status).toBe(202);
    for (let i = 0; i < 4; i++) storage.putUser('wb', record('wb', `b-${i}`));
    expect(await storage.webhookOutbox.stats()).toMatchObject({ pending: 10, dropped: 3 });
    storage.putUser('wb', record('wb', 'b-full'));
    expect(await storage.webhookOutbox.stats()).toMatchObject({ pending: 10, dropped: 4 });
    // Full, with a third merchant that holds nothing: 503.
    storage.putMerchant({ id: 'wc', status: 'active', keys: ['key-c'] });
    const c = await storage.addWebhookEndpoint({ merchantId: 'wc', url: 'http://127.0.0.1:9/c', events: ALL, maxPerMerchant: 10 });
    const full = await call(api, `${ORIGIN}/merchant/webhooks/${c.id}/test`, { method: 'POST', headers: basic('wc', 'key-c') });
    expect(full.status).toBe(503);
    expect(full.body.errors[0].code).toBe('storage_unavailable');
    // Removing an endpoint frees its room.
    expect(await storage.removeWebhookEndpoint('wa', a.id)).toBe(true);
    expect((await storage.webhookOutbox.stats()).pending).toBe(5);
  });

  it('a merchant with thousands of due deliveries does not hold back another\'s first one', async () => {
    const { storage } = setup();
    const slow = await receiver();
    const fast = await receiver();
    slow.answer = (_n, res) => void setTimeout(() => res.writeHead(204).end(), 200);
    const a = await storage.addWebhookEndpoint({ merchantId: 'wa', url: slow.url, events: ALL, maxPerMerchant: 10 });
    const b = await storage.addWebhookEndpoint({ merchantId: 'wb', url: fast.url, events: ALL, maxPerMerchant: 10 });
    slow.secrets.push(a.secret);
    fast.secrets.push(b.secret);
    for (let i = 0; i < 3000; i++) storage.putUser('wa', record('wa', `backlog-${i}`));
    dispatcher(storage);
    storage.putUser('wb', record('wb', 'first'));
    await vi.waitFor(() => expect(fast.received).toHaveLength(1), { timeout: 5_000 });
    // At most 4 in flight to the slow receiver at once, so it has had only a handful by now.
    expect(slow.received.length).toBeLessThan(100);
  });

  it('prunes finished deliveries after the retention and keeps pending ones', async () => {
    const { storage } = setup();
    const endpoint = await storage.addWebhookEndpoint({ merchantId: 'wa', url: 'http://127.0.0.1:9/p', events: ALL, maxPerMerchant: 10 });
    storage.putUser('wa', record('wa', 'p1'));
    storage.putUser('wa', record('wa', 'p2'));
    const [first] = await storage.webhookOutbox.claimDue({ limit: 1, leaseMs: 60_000, maxInFlightPerEndpoint: 4 });
    await storage.webhookOutbox.recordAttempt({ delivery: first!, outcome: 'delivered', status: 204, durationMs: 1 });
    expect(await storage.webhookOutbox.prune(new Date(Date.now() + 1000))).toBe(1);
    expect(storage.listWebhookDeliveries({ endpointId: endpoint.id }).map((d) => d.state)).toEqual(['pending']);
    // A record whose claim is no longer held (the endpoint gone) changes nothing and does not throw.
    await storage.webhookOutbox.recordAttempt({ delivery: first!, outcome: 'delivered', status: 204, durationMs: 1 });
  });
});
