/**
 * Webhooks on MySQL end to end (docs/webhooks.md): the import writes events into the outbox in its
 * transaction, dispatchers send them to real receivers on real ports, every delivery verified by
 * the `standardwebhooks` package.
 */
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { changedUserJson } from '../../src/listing/user-json.js';
import { addWebhookEndpoint, createMigrator, deleteMerchant, enableWebhookEndpoint, eraseUser, eraseWebhookEvents, importSeed, listWebhookEndpoints, migrateToLatest, MysqlWebhookOutbox, removeWebhookEndpoint, rotateWebhookSecret, sendWebhookTest, WebhookAdminError, writeUnsharedEvent } from '../../src/storage/mysql/index.js';
import type { ChangedUserRecord } from '../../src/storage/contract.js';
import { userEventData } from '../../src/storage/webhook-outbox.js';
import { WebhookDispatcher, type AttemptEvent, type DispatcherOptions } from '../../src/webhooks/dispatcher.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { user } from '../support/seeds.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

const available = await mysqlAvailable();
const ALL = ['user.shared', 'user.updated', 'user.deactivated', 'user.unshared'];
const TEST_POLICY = { allowPrivate: true, allowHttp: true };

describe('userEventData', () => {
  it('is byte for byte the record GET /merchant/users answers, with updated_at', () => {
    const record = { ...user('m', 'u "1"\n😀'), updated_at: '2026-01-01T00:00:00.000001+00:00' } as unknown as ChangedUserRecord & { merchant_id?: string };
    delete record.merchant_id;
    expect(userEventData(record)).toBe(changedUserJson(record));
  });
});

describe.skipIf(!available)('webhooks on MySQL', () => {
  let database: TestDatabase;
  let outbox: MysqlWebhookOutbox;
  const receivers: WebhookReceiver[] = [];
  const dispatchers: WebhookDispatcher[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    outbox = new MysqlWebhookOutbox({ db: database.db, masterKey: database.masterKey });
  });
  afterEach(async () => {
    await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  afterAll(async () => {
    await database?.drop();
  });

  let merchantCount = 0;
  /** A fresh merchant with one endpoint at a fresh receiver. */
  async function merchantWithEndpoint(events = ALL) {
    const merchantId = `m${++merchantCount}`;
    await importSeed(database.db, database.masterKey, { merchants: [{ id: merchantId, status: 'active', keys: [`key-${merchantId}`] }], users: [] });
    const receiver = await startWebhookReceiver();
    receivers.push(receiver);
    const endpoint = await addWebhookEndpoint(database.db, database.masterKey, merchantId, receiver.url, events);
    receiver.secrets.push(endpoint.secret);
    return { merchantId, receiver, endpoint };
  }

  function dispatcher(options: Partial<DispatcherOptions> = {}): WebhookDispatcher {
    const d = new WebhookDispatcher({ outbox, policy: TEST_POLICY, pollIntervalMs: 50, retrySchedule: [200, 200, 200], ...options });
    dispatchers.push(d);
    d.start();
    return d;
  }

  it('an import sends user.shared, user.updated and user.deactivated, each verified, in the merchant\'s view', async () => {
    const { merchantId, receiver, endpoint } = await merchantWithEndpoint();
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'u1'), user(merchantId, 'u2')] });
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'u1', { city: 'Hamburg' }), user(merchantId, 'u2', { deactivated_at: '2026-01-02T03:04:05.000006+00:00' })] });
    dispatcher();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(4), { timeout: 15_000 });
    expect(receiver.unverified).toEqual([]);
    const byKey = new Map(receiver.received.map((r) => [`${r.event.type}/${String(r.event.data.shared_user_id)}`, r]));
    expect([...byKey.keys()].sort()).toEqual(['user.deactivated/u2', 'user.shared/u1', 'user.shared/u2', 'user.updated/u1']);
    const updated = byKey.get('user.updated/u1')!;
    // The 14 keys in the API's order, then updated_at.
    expect(Object.keys(updated.event.data)).toEqual(['shared_user_id', 'first_name', 'last_name', 'email_address', 'street', 'zip_code', 'city', 'state', 'country', 'preferred_language', 'date_joined', 'deactivated_at', 'agreed_to_terms_and_conditions', 'agreed_to_marketing', 'updated_at']);
    expect(updated.event.data.city).toBe('Hamburg');
    expect(updated.event.data.updated_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/);
    expect(updated.event.timestamp).toBe(updated.event.data.updated_at);
    expect(updated.headers['webhook-id']).toMatch(/^evt_[0-9a-f]{18}[A-Za-z0-9_-]{24}$/);
    expect(updated.headers['user-agent']).toMatch(/^merchant-api-webhooks\//);
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(4);
    await vi.waitFor(async () => {
      const rows = await sql<{ state: string; n: number }>`SELECT state, COUNT(*) AS n FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id} GROUP BY state`.execute(database.db);
      expect(rows.rows.map((r) => [r.state, Number(r.n)])).toEqual([['delivered', 4]]);
    });
  });

  it('an import that changes nothing sends nothing; one that rolls back writes no event', async () => {
    const { merchantId } = await merchantWithEndpoint();
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'same')] });
    const count = async () => Number((await sql<{ n: number }>`SELECT COUNT(*) AS n FROM webhook_events WHERE merchant_id = ${merchantId}`.execute(database.db)).rows[0]!.n);
    expect(await count()).toBe(1);
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'same')] });
    expect(await count()).toBe(1);
    // A batch that fails after the users were written rolls back, its events with it.
    await expect(
      database.db.transaction().execute(async (trx) => {
        const { upsertUsers } = await import('../../src/storage/mysql/admin/user-upsert.js');
        const { readIdAllocation } = await import('../../src/storage/mysql/admin/new-users.js');
        await upsertUsers(trx, [user(merchantId, 'rolled-back')], await readIdAllocation(trx));
        throw new Error('rollback');
      }),
    ).rejects.toThrow('rollback');
    expect(await count()).toBe(1);
  });

  it('one change of a person shared with three merchants makes three events, each in its merchant\'s view, and never reaches a merchant without an endpoint', async () => {
    const a = await merchantWithEndpoint();
    const b = await merchantWithEndpoint();
    const c = await merchantWithEndpoint();
    await importSeed(database.db, database.masterKey, { merchants: [{ id: 'no-endpoint', status: 'active', keys: ['k-none'] }], users: [user(a.merchantId, 'person-at-a')] });
    // The same person shared with b, c and a merchant with no endpoint, under their own ids.
    for (const [merchantId, sharedId] of [[b.merchantId, 'person-at-b'], [c.merchantId, 'person-at-c'], ['no-endpoint', 'person-at-none']]) {
      await sql`INSERT INTO user_shares (merchant_id, shared_user_id, user_id, is_active, date_joined, updated_at)
        SELECT ${merchantId}, ${sharedId}, user_id, is_active, date_joined, updated_at FROM user_shares WHERE merchant_id = ${a.merchantId} AND shared_user_id = 'person-at-a'`.execute(database.db);
    }
    await importSeed(database.db, undefined, { merchants: [], users: [user(a.merchantId, 'person-at-a', { last_name: 'Byron' })] });
    dispatcher();
    await vi.waitFor(() => {
      expect(a.receiver.received.filter((r) => r.event.type === 'user.updated')).toHaveLength(1);
      expect(b.receiver.received).toHaveLength(1);
      expect(c.receiver.received).toHaveLength(1);
    }, { timeout: 15_000 });
    expect(b.receiver.received[0]!.event).toMatchObject({ type: 'user.updated', data: { shared_user_id: 'person-at-b', last_name: 'Byron' } });
    expect(c.receiver.received[0]!.event).toMatchObject({ type: 'user.updated', data: { shared_user_id: 'person-at-c', last_name: 'Byron' } });
    // Each receiver verifies only with its own endpoint's secret: b's secret does not verify what c got.
    for (const r of [a, b, c]) expect(r.receiver.unverified).toEqual([]);
    expect(b.endpoint.secret).not.toBe(c.endpoint.secret);
    const none = await sql<{ n: number }>`SELECT COUNT(*) AS n FROM webhook_events WHERE merchant_id = 'no-endpoint'`.execute(database.db);
    expect(Number(none.rows[0]!.n)).toBe(0);
  });

  it('an import writes a reference to the share, not a copy of the record; each event is sent with the state of its change however the user changed after, every attempt the same bytes', async () => {
    const { merchantId, receiver, endpoint } = await merchantWithEndpoint();
    const id = 'ref "1"\n😀';
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, id)] });
    const stored = async () => (await sql<{ type: string; data: string | null; shared_user_id: string }>`SELECT type, data, shared_user_id FROM webhook_events WHERE merchant_id = ${merchantId} ORDER BY id`.execute(database.db)).rows;
    expect(await stored()).toEqual([{ type: 'user.shared', data: null, shared_user_id: id }]);
    // The first attempt fails, with the record built from the user's row.
    receiver.answer = (n, res) => void res.writeHead(n === 0 ? 500 : 204).end();
    const attempts: AttemptEvent[] = [];
    const first = dispatcher({ retrySchedule: [1500, 200, 200], onAttempt: (event) => event.endpointId === endpoint.id && attempts.push(event) });
    await vi.waitFor(() => expect(attempts.map((a) => a.outcome)).toEqual(['retry']), { timeout: 10_000 });
    await first.stop();
    // The user changes twice before the retry: each change first writes the record into the events of the one before.
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, id, { city: 'Bonn' })] });
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, id, { city: 'Köln', deactivated_at: '2026-01-02T03:04:05.000006+00:00' })] });
    expect((await stored()).map((e) => [e.type, e.data === null ? null : (JSON.parse(e.data) as { city: string }).city])).toEqual([['user.shared', 'Berlin'], ['user.updated', 'Bonn'], ['user.deactivated', null]]);
    dispatcher();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(4), { timeout: 15_000 });
    expect(receiver.unverified).toEqual([]);
    const [attempt1, ...rest] = receiver.received;
    const retried = rest.find((r) => r.headers['webhook-id'] === attempt1!.headers['webhook-id'])!;
    // The retry sends the bytes of the first attempt: the state at the change, not the user's state now.
    expect(retried.body).toBe(attempt1!.body);
    expect(attempt1!.event).toMatchObject({ type: 'user.shared', data: { shared_user_id: id, city: 'Berlin', deactivated_at: null } });
    const byType = new Map(rest.map((r) => [r.event.type, r]));
    expect(byType.get('user.updated')!.event.data).toMatchObject({ city: 'Bonn', deactivated_at: null });
    // Built at send time, byte for byte what the import would have written (and GET /merchant/users answers).
    const deactivated = byType.get('user.deactivated')!;
    const expected = { ...user(merchantId, id, { city: 'Köln', deactivated_at: '2026-01-02T03:04:05.000006+00:00' }), updated_at: deactivated.event.timestamp } as unknown as ChangedUserRecord & { merchant_id?: string };
    delete expected.merchant_id;
    expect(deactivated.body).toBe(`{"type":"user.deactivated","timestamp":"${deactivated.event.timestamp}","data":${userEventData(expected)}}`);
  });

  it('a reference whose share is gone (its merchant being deleted) is cancelled, not sent', async () => {
    const { merchantId, receiver, endpoint } = await merchantWithEndpoint();
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'gone')] });
    await sql`DELETE FROM user_shares WHERE merchant_id = ${merchantId} AND shared_user_id = 'gone'`.execute(database.db);
    await outbox.claimDue({ limit: 10, leaseMs: 60_000, maxInFlightPerEndpoint: 10 });
    const row = await sql<{ state: string; last_error: string }>`SELECT state, last_error FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}`.execute(database.db);
    expect(row.rows).toEqual([{ state: 'cancelled', last_error: 'share_gone' }]);
    expect(receiver.received).toHaveLength(0);
  });

  it('an endpoint receives only the event types it names', async () => {
    const { merchantId, receiver } = await merchantWithEndpoint(['user.deactivated']);
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'x')] });
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'x', { deactivated_at: '2026-01-01T00:00:00.000000+00:00' })] });
    dispatcher();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1), { timeout: 15_000 });
    expect(receiver.received[0]!.event.type).toBe('user.deactivated');
  });

  it('a receiver answering 500 twice then 200 gets the event on the third attempt with the same webhook-id', async () => {
    const { merchantId, receiver, endpoint } = await merchantWithEndpoint();
    receiver.answer = (n, res) => void res.writeHead(n < 2 ? 500 : 200).end('ok');
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'retry-me')] });
    const attempts: AttemptEvent[] = [];
    dispatcher({ onAttempt: (event) => event.endpointId === endpoint.id && attempts.push(event) });
    await vi.waitFor(() => expect(attempts.map((a) => a.outcome)).toEqual(['retry', 'retry', 'delivered']), { timeout: 15_000 });
    expect(receiver.received).toHaveLength(3);
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(1);
    expect(attempts.map((a) => [a.attempt, a.status])).toEqual([[1, 500], [2, 500], [3, 200]]);
    // The log event carries ids, status, duration and attempt number: never the body nor the secret.
    expect(JSON.stringify(attempts)).not.toContain(endpoint.secret);
    expect(JSON.stringify(attempts)).not.toContain('retry-me@example.com');
    const row = await sql<{ attempts: number; state: string }>`SELECT attempts, state FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}`.execute(database.db);
    expect(row.rows.map((r) => [Number(r.attempts), r.state])).toEqual([[3, 'delivered']]);
  });

  it('a delivery whose schedule is used up fails for good', async () => {
    const { merchantId, receiver, endpoint } = await merchantWithEndpoint();
    receiver.answer = (_n, res) => void res.writeHead(500).end();
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'never')] });
    dispatcher({ retrySchedule: [50] });
    await vi.waitFor(async () => {
      const row = await sql<{ state: string }>`SELECT state FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}`.execute(database.db);
      expect(row.rows[0]!.state).toBe('failed');
    }, { timeout: 15_000 });
    expect(receiver.received).toHaveLength(2);
  });

  it('410 Gone disables the endpoint and cancels what was pending; enable turns it on again', async () => {
    const { merchantId, receiver, endpoint } = await merchantWithEndpoint();
    receiver.answer = (_n, res) => void res.writeHead(410).end();
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'g1'), user(merchantId, 'g2'), user(merchantId, 'g3')] });
    const attempts: AttemptEvent[] = [];
    dispatcher({ maxInFlightPerEndpoint: 1, onAttempt: (event) => event.endpointId === endpoint.id && attempts.push(event) });
    await vi.waitFor(async () => expect((await listWebhookEndpoints(database.db, merchantId))[0]).toMatchObject({ status: 'disabled', disabledReason: 'gone' }), { timeout: 15_000 });
    await vi.waitFor(() => expect(attempts.length).toBeGreaterThanOrEqual(1));
    expect(attempts[0]).toMatchObject({ status: 410, outcome: 'failed', disabledEndpoint: 'gone' });
    const states = await sql<{ state: string }>`SELECT state FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}`.execute(database.db);
    expect(states.rows.map((r) => r.state).sort()).toEqual(['cancelled', 'cancelled', 'failed']);
    expect(receiver.received).toHaveLength(1);
    await enableWebhookEndpoint(database.db, endpoint.id);
    expect((await listWebhookEndpoints(database.db, merchantId))[0]).toMatchObject({ status: 'enabled', disabledReason: null });
  });

  it('an endpoint failing every attempt for longer than the limit is disabled', async () => {
    const { merchantId, receiver, endpoint } = await merchantWithEndpoint();
    receiver.answer = (_n, res) => void res.writeHead(503).end();
    await sql`UPDATE webhook_endpoints SET failing_since = UTC_TIMESTAMP(6) - INTERVAL 6 DAY WHERE id = ${endpoint.id}`.execute(database.db);
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'f1')] });
    dispatcher();
    await vi.waitFor(async () => expect((await listWebhookEndpoints(database.db, merchantId))[0]).toMatchObject({ status: 'disabled', disabledReason: 'failing' }), { timeout: 15_000 });
  });

  it('during a rotation both secrets sign; after the overlap only the new one', async () => {
    const { merchantId, receiver, endpoint } = await merchantWithEndpoint();
    const rotated = await rotateWebhookSecret(database.db, database.masterKey, endpoint.id, 3_600_000);
    expect(rotated.secret).not.toBe(endpoint.secret);
    expect(rotated.oldExpiresAt).toMatch(/\+00:00$/);
    receiver.secrets = [endpoint.secret, rotated.secret];
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'r1')] });
    const d = dispatcher();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1), { timeout: 15_000 });
    expect(String(receiver.received[0]!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(receiver.received[0]!.verifiedBy).toEqual([0, 1]);
    await d.stop();
    const again = await rotateWebhookSecret(database.db, database.masterKey, endpoint.id, 0);
    receiver.secrets = [rotated.secret, again.secret];
    await sendWebhookTest(database.db, endpoint.id);
    dispatcher();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(2), { timeout: 15_000 });
    expect(receiver.received[1]!.event.type).toBe('webhook.test');
    expect(receiver.received[1]!.event.data).toEqual({ endpoint_id: endpoint.id });
    expect(receiver.received[1]!.verifiedBy).toEqual([1]);
    expect(receiver.unverified).toEqual([]);
  });

  it('private addresses are refused at delivery without the setting', async () => {
    const { merchantId, receiver, endpoint } = await merchantWithEndpoint();
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'p1')] });
    const attempts: AttemptEvent[] = [];
    dispatcher({ policy: { allowHttp: true }, onAttempt: (event) => event.endpointId === endpoint.id && attempts.push(event) });
    await vi.waitFor(() => expect(attempts).toHaveLength(1), { timeout: 15_000 });
    expect(attempts[0]).toMatchObject({ error: 'address_refused', outcome: 'retry', endpointId: endpoint.id });
    expect(receiver.received).toHaveLength(0);
  });

  it('two dispatchers on one database deliver each event once', async () => {
    const endpoints = [await merchantWithEndpoint(), await merchantWithEndpoint(), await merchantWithEndpoint()];
    for (const { merchantId } of endpoints) {
      await importSeed(database.db, undefined, { merchants: [], users: Array.from({ length: 40 }, (_, i) => user(merchantId, `two-${i}`)) });
    }
    const second = new MysqlWebhookOutbox({ db: database.db, masterKey: database.masterKey });
    const errors: unknown[] = [];
    dispatcher({ claimBatch: 7, onError: (error) => errors.push(error) });
    dispatcher({ claimBatch: 7, outbox: second, onError: (error) => errors.push(error) });
    await vi.waitFor(() => {
      for (const { receiver } of endpoints) expect(receiver.received).toHaveLength(40);
    }, { timeout: 30_000 });
    await Promise.all(dispatchers.map((d) => d.drain()));
    expect(errors.filter((error) => !/Deadlock/.test(String(error)))).toEqual([]);
    for (const { receiver } of endpoints) {
      expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(40);
      expect(receiver.received).toHaveLength(40);
    }
  });

  it('a claim whose instance died is sent after its lease; a live claim is not taken', async () => {
    const { merchantId, receiver } = await merchantWithEndpoint();
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'leased')] });
    // An instance claims, then "dies" before sending.
    const claimed = await outbox.claimDue({ limit: 10, leaseMs: 1500, maxInFlightPerEndpoint: 4 });
    expect(claimed.filter((d) => d.merchantId === merchantId)).toHaveLength(1);
    expect((await outbox.claimDue({ limit: 10, leaseMs: 1500, maxInFlightPerEndpoint: 4 })).filter((d) => d.merchantId === merchantId)).toEqual([]);
    dispatcher();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1), { timeout: 15_000 });
    expect(receiver.received[0]!.headers['webhook-id']).toBe(claimed.find((d) => d.merchantId === merchantId)!.eventId);
  });

  it('a merchant with a backlog does not delay another merchant\'s first delivery', async () => {
    const busy = await merchantWithEndpoint();
    const quiet = await merchantWithEndpoint();
    await importSeed(database.db, undefined, { merchants: [], users: Array.from({ length: 300 }, (_, i) => user(busy.merchantId, `busy-${i}`)) });
    await importSeed(database.db, undefined, { merchants: [], users: [user(quiet.merchantId, 'first')] });
    // One claim of 10: the quiet merchant's endpoint gets its turn in the first round.
    const claimed = await outbox.claimDue({ limit: 10, leaseMs: 60_000, maxInFlightPerEndpoint: 4 });
    expect(claimed.some((d) => d.merchantId === quiet.merchantId)).toBe(true);
    expect(claimed.filter((d) => d.merchantId === busy.merchantId).length).toBeLessThanOrEqual(4);
    await sql`UPDATE webhook_deliveries SET state = 'cancelled' WHERE merchant_id IN (${busy.merchantId}, ${quiet.merchantId})`.execute(database.db);
  });

  it('counts the claimed deliveries of an endpoint as in flight, and not those waiting for a retry', async () => {
    const { merchantId } = await merchantWithEndpoint();
    await importSeed(database.db, undefined, { merchants: [], users: Array.from({ length: 10 }, (_, i) => user(merchantId, `flying-${i}`)) });
    const claim = async () => (await outbox.claimDue({ limit: 10, leaseMs: 60_000, maxInFlightPerEndpoint: 4 })).filter((d) => d.merchantId === merchantId);
    const first = await claim();
    expect(first).toHaveLength(4);
    // Four in flight: nothing more for this endpoint while their leases hold.
    expect(await claim()).toEqual([]);
    // Two answered with a retry due within the lease: waiting, not in flight, so two more are claimed.
    for (const delivery of first.slice(0, 2)) {
      await outbox.recordAttempt({ delivery, outcome: 'retry', nextAttemptAt: new Date(Date.now() + 30_000), status: 500, durationMs: 1 });
    }
    const second = await claim();
    expect(second).toHaveLength(2);
    expect(new Set([...first, ...second].map((d) => d.id)).size).toBe(6);
    expect(await claim()).toEqual([]);
    await sql`UPDATE webhook_deliveries SET state = 'cancelled' WHERE merchant_id = ${merchantId}`.execute(database.db);
  });

  it('writeUnsharedEvent writes user.unshared in the given transaction', async () => {
    const { merchantId, receiver } = await merchantWithEndpoint();
    await database.db.transaction().execute((trx) => writeUnsharedEvent(trx, merchantId, 'gone-user'));
    await expect(database.db.transaction().execute(async (trx) => {
      await writeUnsharedEvent(trx, merchantId, 'rolled-back');
      throw new Error('rollback');
    })).rejects.toThrow('rollback');
    dispatcher();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1), { timeout: 15_000 });
    expect(receiver.received[0]!.event).toMatchObject({ type: 'user.unshared', data: { shared_user_id: 'gone-user' } });
    expect(Object.keys(receiver.received[0]!.event.data)).toEqual(['shared_user_id', 'unshared_at']);
  });

  it('eraseWebhookEvents removes the events holding an erased user\'s record, with their deliveries, and nothing else', async () => {
    const { merchantId } = await merchantWithEndpoint();
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'erase "me"'), user(merchantId, 'keep')] });
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'erase "me"', { city: 'Bonn' })] });
    const count = async (table: string) => Number((await sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql.table(table)} WHERE merchant_id = ${merchantId}`.execute(database.db)).rows[0]!.n);
    expect([await count('webhook_events'), await count('webhook_deliveries')]).toEqual([3, 3]);
    const erased = await database.db.transaction().execute(async (trx) => {
      const n = await eraseWebhookEvents(trx, merchantId, 'erase "me"');
      await writeUnsharedEvent(trx, merchantId, 'erase "me"');
      return n;
    });
    expect(erased).toBe(2);
    const left = await sql<{ type: string; shared_user_id: string; data: string | null }>`SELECT type, shared_user_id, data FROM webhook_events WHERE merchant_id = ${merchantId} ORDER BY type`.execute(database.db);
    expect(left.rows.map((r) => [r.type, r.shared_user_id])).toEqual([['user.shared', 'keep'], ['user.unshared', 'erase "me"']]);
    // What is left holds nothing of the erased person but the id in user.unshared.
    expect(JSON.stringify(left.rows.map((r) => r.data))).not.toContain('Bonn');
    expect(await count('webhook_deliveries')).toBe(2);
    await sql`UPDATE webhook_deliveries SET state = 'cancelled' WHERE merchant_id = ${merchantId}`.execute(database.db);
  });

  it('an erasure (user erase) sends user.unshared, verified, and leaves no copy of the record in the outbox', async () => {
    const { merchantId, receiver } = await merchantWithEndpoint();
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'forget-me'), user(merchantId, 'stay')] });
    const result = await eraseUser(database.db, 'forget-me', { merchantId, actor: 'test' });
    expect(result).toMatchObject({ shares: 1, users: 1, merchants: 1 });
    const events = await sql<{ type: string; shared_user_id: string }>`SELECT type, shared_user_id FROM webhook_events WHERE merchant_id = ${merchantId} ORDER BY type`.execute(database.db);
    expect(events.rows.map((r) => [r.type, r.shared_user_id])).toEqual([['user.shared', 'stay'], ['user.unshared', 'forget-me']]);
    dispatcher();
    await vi.waitFor(() => expect(receiver.received.filter((r) => r.event.type === 'user.unshared')).toHaveLength(1), { timeout: 10_000 });
    const unshared = receiver.received.find((r) => r.event.type === 'user.unshared')!;
    expect(unshared.event.data).toMatchObject({ shared_user_id: 'forget-me' });
    expect(Object.keys(unshared.event.data).sort()).toEqual(['shared_user_id', 'unshared_at']);
    expect(receiver.unverified).toEqual([]);
  });

  it('endpoints: at most the limit per merchant, scoped to their merchant, removed with their deliveries', async () => {
    const { merchantId, endpoint } = await merchantWithEndpoint();
    await expect(addWebhookEndpoint(database.db, database.masterKey, merchantId, 'https://example.com/2', ALL, 1)).rejects.toMatchObject({ code: 'too_many_endpoints' });
    await expect(addWebhookEndpoint(database.db, database.masterKey, 'no-such', 'https://example.com/', ALL)).rejects.toMatchObject({ code: 'merchant_not_found' });
    const listed = await listWebhookEndpoints(database.db, merchantId);
    expect(listed).toHaveLength(1);
    expect(JSON.stringify(listed)).not.toContain('whsec_');
    await expect(removeWebhookEndpoint(database.db, endpoint.id, 'm1-other')).rejects.toBeInstanceOf(WebhookAdminError);
    await removeWebhookEndpoint(database.db, endpoint.id, merchantId);
    expect(await listWebhookEndpoints(database.db, merchantId)).toEqual([]);
  });

  it('a secret that does not open holds back only its own delivery', async () => {
    const broken = await merchantWithEndpoint();
    const fine = await merchantWithEndpoint();
    await sql`UPDATE webhook_endpoints SET sealed_secret = 'not.a.jwe.at.all' WHERE id = ${broken.endpoint.id}`.execute(database.db);
    await importSeed(database.db, undefined, { merchants: [], users: [user(broken.merchantId, 'b1'), user(fine.merchantId, 'f1')] });
    dispatcher();
    await vi.waitFor(() => expect(fine.receiver.received).toHaveLength(1), { timeout: 15_000 });
    await vi.waitFor(async () => {
      const row = await sql<{ last_error: string | null }>`SELECT last_error FROM webhook_deliveries WHERE endpoint_id = ${broken.endpoint.id}`.execute(database.db);
      expect(row.rows[0]!.last_error).toBe('secret_unreadable');
    });
    expect(broken.receiver.received).toHaveLength(0);
    await removeWebhookEndpoint(database.db, broken.endpoint.id);
  });

  it('deleting a merchant deletes its endpoints, their deliveries and its events', async () => {
    const { merchantId, endpoint } = await merchantWithEndpoint();
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'bye')] });
    const count = async (table: string) => Number((await sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql.table(table)} WHERE merchant_id = ${merchantId}`.execute(database.db)).rows[0]!.n);
    expect([await count('webhook_endpoints'), await count('webhook_deliveries'), await count('webhook_events')]).toEqual([1, 1, 1]);
    await deleteMerchant(database.db, merchantId);
    expect([await count('webhook_endpoints'), await count('webhook_deliveries'), await count('webhook_events')]).toEqual([0, 0, 0]);
    expect(endpoint.id).toMatch(/^we_/);
  });

  it('prune removes finished deliveries and their events older than the retention', async () => {
    const { merchantId } = await merchantWithEndpoint();
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'old')] });
    // Everything so far, of every merchant, as if written 8 days ago (rows age in the order they were written).
    await sql`UPDATE webhook_deliveries SET state = 'delivered', created_at = UTC_TIMESTAMP(6) - INTERVAL 8 DAY`.execute(database.db);
    await sql`UPDATE webhook_events SET created_at = UTC_TIMESTAMP(6) - INTERVAL 8 DAY`.execute(database.db);
    // A later one, delivered too: pruning walks the primary keys up to the first recent row and stops there.
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'recent')] });
    await sql`UPDATE webhook_deliveries SET state = 'delivered' WHERE merchant_id = ${merchantId}`.execute(database.db);
    expect(await outbox.prune(new Date(Date.now() - 7 * 86_400_000))).toBeGreaterThanOrEqual(1);
    const left = await sql<{ shared_user_id: string }>`SELECT shared_user_id FROM webhook_events WHERE merchant_id = ${merchantId}`.execute(database.db);
    expect(left.rows).toEqual([{ shared_user_id: 'recent' }]);
    const deliveries = await sql<{ n: number }>`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE merchant_id = ${merchantId}`.execute(database.db);
    expect(Number(deliveries.rows[0]!.n)).toBe(1);
  });

  it('migration 0010 down writes the record into every reference (the bytes it would have sent); up again keeps them', async () => {
    const { merchantId } = await merchantWithEndpoint();
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'down "1"')] });
    const before = await sql<{ id: string; data: string | null; at: string }>`SELECT id, data, DATE_FORMAT(created_at, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS at FROM webhook_events WHERE merchant_id = ${merchantId}`.execute(database.db);
    expect(before.rows.map((r) => r.data)).toEqual([null]);
    const migrator = createMigrator(database.db);
    // Down to the schema before 0010 (every later migration goes down first).
    const down = (await migrator.migrateTo('0009_auth_check_reservations')).results!;
    expect(down.at(-1)).toEqual({ migrationName: '0010_webhook_event_refs', direction: 'Down', status: 'Success' });
    expect(down.every((result) => result.status === 'Success')).toBe(true);
    const expected = { ...user(merchantId, 'down "1"'), updated_at: before.rows[0]!.at } as unknown as ChangedUserRecord & { merchant_id?: string };
    delete expected.merchant_id;
    const after = await sql<{ data: string }>`SELECT data FROM webhook_events WHERE id = ${before.rows[0]!.id}`.execute(database.db);
    expect(after.rows[0]!.data).toBe(userEventData(expected));
    expect((await migrateToLatest(database.db)).results![0]).toEqual({ migrationName: '0010_webhook_event_refs', direction: 'Up', status: 'Success' });
    const up = await sql<{ data: string; shared_user_id: string }>`SELECT data, shared_user_id FROM webhook_events WHERE id = ${before.rows[0]!.id}`.execute(database.db);
    expect(up.rows).toEqual([{ data: userEventData(expected), shared_user_id: 'down "1"' }]);
  });
});
