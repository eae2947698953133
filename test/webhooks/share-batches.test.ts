/**
 * One outbox row per import batch (migration 0018, src/storage/mysql/webhooks/share-batches.ts,
 * docs/webhooks.md#delivery), on the real MariaDB with real receivers: an import that shares many
 * new users writes one batch row and no event; the dispatcher expands it in bounded steps into the
 * events and deliveries the import used to write (the same ids' form, the same bodies), and every
 * event reaches every endpoint exactly once: across a change of the users or an erasure before
 * the expansion, and across a SIGKILL of the expanding process.
 */
import { spawn } from 'node:child_process';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { addWebhookEndpoint, createMigrator, eraseUser, expandAllShareBatches, expandShareBatches, importSeed, migrateToLatest, MysqlWebhookOutbox } from '../../src/storage/mysql/index.js';
import type { ChangedUserRecord } from '../../src/storage/contract.js';
import { SHARE_BATCH_FROM } from '../../src/storage/mysql/webhooks/share-batches.js';
import { userEventData } from '../../src/storage/webhook-outbox.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { ROOT } from '../support/processes.js';
import { user } from '../support/seeds.js';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '../support/webhook-receiver.js';

const available = await mysqlAvailable();
const TEST_POLICY = { allowPrivate: true, allowHttp: true };

describe.skipIf(!available)('import batches expanded by the dispatcher', () => {
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
    // A test that failed before its expansion leaves its row: the next test's steps must not take it (oldest first).
    await sql`DELETE FROM webhook_share_batches`.execute(database.db);
  });
  afterAll(async () => {
    await database?.drop();
  });

  let merchantCount = 0;
  /** A fresh merchant with an endpoint per entry of `subscriptions`, each at its own receiver. */
  async function merchantWithEndpoints(subscriptions: string[][]) {
    const merchantId = `b${++merchantCount}`;
    await importSeed(database.db, database.masterKey, { merchants: [{ id: merchantId, status: 'active', keys: [`key-${merchantId}`] }], users: [] });
    const endpoints = [];
    for (const events of subscriptions) {
      const receiver = await startWebhookReceiver();
      receivers.push(receiver);
      const endpoint = await addWebhookEndpoint(database.db, database.masterKey, merchantId, receiver.url, events);
      receiver.secrets.push(endpoint.secret);
      endpoints.push({ receiver, endpoint });
    }
    return { merchantId, endpoints };
  }

  function dispatch(): WebhookDispatcher {
    const d = new WebhookDispatcher({ outbox, policy: TEST_POLICY, pollIntervalMs: 50, retrySchedule: [200, 200, 200] });
    dispatchers.push(d);
    d.start();
    return d;
  }

  const count = async (table: string, merchantId: string) => Number((await sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql.table(table)} WHERE merchant_id = ${merchantId}`.execute(database.db)).rows[0]!.n);
  const ids = (n: number, prefix = 'u') => Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(5, '0')}`);

  /** The share's `updated_at`, canonical: the `timestamp` and `updated_at` of its user.shared event. */
  async function stampOf(merchantId: string, sharedUserId: string): Promise<string> {
    const { rows } = await sql<{ at: string }>`SELECT DATE_FORMAT(updated_at, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS at FROM user_shares WHERE merchant_id = ${merchantId} AND shared_user_id = ${sharedUserId}`.execute(database.db);
    return rows[0]!.at;
  }

  /** The body the import wrote for a user.shared of `record` at `at` before batch rows (the direct path builds it the same way). */
  function sharedBody(record: ReturnType<typeof user>, at: string): string {
    const data = { ...record, updated_at: at } as unknown as ChangedUserRecord & { merchant_id?: string };
    delete data.merchant_id;
    return `{"type":"user.shared","timestamp":"${at}","data":${userEventData(data)}}`;
  }

  /** Each shared user id received by `receiver`, with how many times. */
  function receivedTimes(receiver: WebhookReceiver, type = 'user.shared'): Map<string, number> {
    const times = new Map<string, number>();
    for (const r of receiver.received) if (r.event.type === type) times.set(String(r.event.data.shared_user_id), (times.get(String(r.event.data.shared_user_id)) ?? 0) + 1);
    return times;
  }

  it(`an import sharing ${SHARE_BATCH_FROM} or more new users writes one batch row, expanded in bounded steps; every endpoint gets every event once, with the id and body of the direct path`, async () => {
    const { merchantId, endpoints } = await merchantWithEndpoints([['user.shared', 'user.updated'], ['user.shared'], ['user.updated']]);
    const users = ids(600).map((id) => user(merchantId, id));
    await importSeed(database.db, undefined, { merchants: [], users });
    // One row, naming the two endpoints that receive user.shared; nothing else yet.
    const { rows: batches } = await sql<{ endpoints: string; shares: number }>`SELECT endpoints, shares FROM webhook_share_batches WHERE merchant_id = ${merchantId}`.execute(database.db);
    expect(batches.map((b) => ({ endpoints: b.endpoints.split(',').sort(), shares: b.shares }))).toEqual([{ endpoints: [endpoints[0]!.endpoint.id, endpoints[1]!.endpoint.id].sort(), shares: 600 }]);
    expect([await count('webhook_events', merchantId), await count('webhook_deliveries', merchantId)]).toEqual([0, 0]);
    // Pending and due since the commit, for /healthz.
    const stats = await outbox.stats();
    expect(stats.pending).toBeGreaterThanOrEqual(1200);
    // Bounded steps: at most 250 shares (500 deliveries) each, the row gone with the last.
    const seen: Array<[number, number]> = [];
    for (let step = 0; step < 3; step++) {
      const before = await count('webhook_events', merchantId);
      const result = await expandShareBatches(database.db, { maxShares: 250 });
      expect(result.stepped).toBe(true);
      seen.push([(await count('webhook_events', merchantId)) - before, result.shares]);
    }
    expect(seen).toEqual([[250, 250], [250, 250], [100, 100]]);
    expect(await count('webhook_share_batches', merchantId)).toBe(0);
    expect([await count('webhook_events', merchantId), await count('webhook_deliveries', merchantId)]).toEqual([600, 1200]);
    // Listed as the direct path lists them: created at the change, pending.
    const at = await stampOf(merchantId, users[0]!.shared_user_id);
    const { rows: listed } = await sql<{ created: string; state: string; n: number }>`SELECT DATE_FORMAT(created_at, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS created, state, COUNT(*) AS n
      FROM webhook_deliveries WHERE merchant_id = ${merchantId} GROUP BY created, state`.execute(database.db);
    expect(listed.map((r) => ({ ...r, n: Number(r.n) }))).toEqual([{ created: at, state: 'pending', n: 1200 }]);
    dispatch();
    const [first, second, third] = endpoints.map((e) => e.receiver);
    await vi.waitFor(() => {
      expect(first!.received).toHaveLength(600);
      expect(second!.received).toHaveLength(600);
    }, { timeout: 60_000 });
    await Promise.all(dispatchers.map((d) => d.drain()));
    expect([first!.unverified, second!.unverified, third!.received]).toEqual([[], [], []]);
    for (const receiver of [first!, second!]) expect([...receivedTimes(receiver).values()].every((n) => n === 1) && receivedTimes(receiver).size === 600).toBe(true);
    // One event per share: the same id at both endpoints, ids distinct, carrying the time of the change.
    const idOf = (received: ReceivedWebhook[]) => new Map(received.map((r) => [String(r.event.data.shared_user_id), String(r.headers['webhook-id'])]));
    const firstIds = idOf(first!.received);
    expect(idOf(second!.received)).toEqual(firstIds);
    expect(new Set(firstIds.values()).size).toBe(600);
    const stampHex = Date.parse(at.replace('+00:00', 'Z')).toString(16).padStart(12, '0');
    for (const id of firstIds.values()) expect(id).toMatch(new RegExp(`^evt_${stampHex}[0-9a-f]{6}[A-Za-z0-9_-]{24}$`));
    // Byte for byte the body of the direct path: the record at the change, with its updated_at.
    const byId = new Map(users.map((u) => [u.shared_user_id, u]));
    for (const r of first!.received) expect(r.body).toBe(sharedBody(byId.get(String(r.event.data.shared_user_id))!, at));
  });

  it(`below ${SHARE_BATCH_FROM} new shares of a merchant, or with a changed user in the batch, events are written in the batch as before`, async () => {
    const { merchantId } = await merchantWithEndpoints([['user.shared', 'user.updated']]);
    await importSeed(database.db, undefined, { merchants: [], users: ids(SHARE_BATCH_FROM - 1, 'small').map((id) => user(merchantId, id)) });
    expect([await count('webhook_share_batches', merchantId), await count('webhook_events', merchantId)]).toEqual([0, SHARE_BATCH_FROM - 1]);
    // One existing user changed beside 600 new ones: the changed shares carry the batch's stamp too, so no batch row.
    await importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, 'small-00000', { city: 'Bonn' }), ...ids(600, 'more').map((id) => user(merchantId, id))] });
    expect([await count('webhook_share_batches', merchantId), await count('webhook_events', merchantId)]).toEqual([0, SHARE_BATCH_FROM - 1 + 601]);
  });

  it('a change of the users before the expansion: each still gets its user.shared with the record as it was, once, then its user.updated', async () => {
    const { merchantId, endpoints } = await merchantWithEndpoints([['user.shared', 'user.updated']]);
    const users = ids(700, 'c').map((id) => user(merchantId, id));
    await importSeed(database.db, undefined, { merchants: [], users });
    const at = await stampOf(merchantId, users[0]!.shared_user_id);
    // Part expanded (the first 300 shares), then 20 users on both sides of the cursor change.
    expect(await expandShareBatches(database.db, { maxShares: 300 })).toEqual({ stepped: true, shares: 300 });
    const changed = [...users.slice(290, 300), ...users.slice(300, 310)].map((u) => ({ ...u, city: 'Köln' }));
    await importSeed(database.db, undefined, { merchants: [], users: changed });
    // The 10 not yet expanded got their user.shared now, counted out of the row.
    const { rows: [row] } = await sql<{ expanded: number; left_early: number }>`SELECT expanded, left_early FROM webhook_share_batches WHERE merchant_id = ${merchantId}`.execute(database.db);
    expect(row).toEqual({ expanded: 300, left_early: 10 });
    expect((await outbox.stats()).pending).toBeGreaterThanOrEqual(390 + 20);
    dispatch();
    const receiver = endpoints[0]!.receiver;
    await vi.waitFor(() => expect(receiver.received).toHaveLength(720), { timeout: 60_000 });
    await Promise.all(dispatchers.map((d) => d.drain()));
    expect(receiver.unverified).toEqual([]);
    const shared = receivedTimes(receiver);
    expect(shared.size).toBe(700);
    expect([...shared.values()].every((n) => n === 1)).toBe(true);
    expect([...receivedTimes(receiver, 'user.updated').keys()].sort()).toEqual(changed.map((u) => u.shared_user_id).sort());
    const byId = new Map(users.map((u) => [u.shared_user_id, u]));
    // The user.shared of a changed user carries the record of its share, not the change.
    for (const r of receiver.received.filter((x) => x.event.type === 'user.shared')) expect(r.body).toBe(sharedBody(byId.get(String(r.event.data.shared_user_id))!, at));
    expect(await count('webhook_share_batches', merchantId)).toBe(0);
  });

  it('an erasure before the expansion: the erased share sends user.unshared and no record; the others their user.shared', async () => {
    const { merchantId, endpoints } = await merchantWithEndpoints([['user.shared', 'user.unshared']]);
    await importSeed(database.db, undefined, { merchants: [], users: ids(600, 'e').map((id) => user(merchantId, id)) });
    await eraseUser(database.db, 'e-00042', { merchantId, actor: 'test' });
    dispatch();
    const receiver = endpoints[0]!.receiver;
    await vi.waitFor(() => expect(receiver.received).toHaveLength(600), { timeout: 60_000 });
    await Promise.all(dispatchers.map((d) => d.drain()));
    expect(receivedTimes(receiver).size).toBe(599);
    expect(receivedTimes(receiver).has('e-00042')).toBe(false);
    expect([...receivedTimes(receiver, 'user.unshared').entries()]).toEqual([['e-00042', 1]]);
  });

  it('migration 0018 down expands the rows left before it drops their table: no event is lost to a downgrade', async () => {
    const scratch = await createTestDatabase();
    try {
      await importSeed(scratch.db, scratch.masterKey, { merchants: [{ id: 'down', status: 'active', keys: ['key-down'] }], users: [] });
      const endpoint = await addWebhookEndpoint(scratch.db, scratch.masterKey, 'down', 'http://127.0.0.1:9/hook', ['user.shared']);
      await importSeed(scratch.db, undefined, { merchants: [], users: ids(600, 'd').map((id) => user('down', id)) });
      const counts = async () => (await sql<{ events: number; deliveries: number }>`SELECT (SELECT COUNT(*) FROM webhook_events) AS events,
        (SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}) AS deliveries`.execute(scratch.db)).rows.map((r) => [Number(r.events), Number(r.deliveries)])[0];
      expect(await counts()).toEqual([0, 0]);
      const { results, error } = await createMigrator(scratch.db).migrateDown();
      expect(error).toBeUndefined();
      expect(results).toEqual([{ migrationName: '0018_webhook_share_batches', direction: 'Down', status: 'Success' }]);
      expect(await counts()).toEqual([600, 600]);
      expect((await sql`SHOW TABLES LIKE 'webhook_share_batches'`.execute(scratch.db)).rows).toEqual([]);
      expect((await migrateToLatest(scratch.db)).results).toHaveLength(1);
    } finally {
      await scratch.drop();
    }
  });

  it('a SIGKILL of the expanding process between commit and the end of the expansion loses nothing and repeats nothing', async () => {
    const { merchantId, endpoints } = await merchantWithEndpoints([['user.shared'], ['user.shared']]);
    const users = 2500;
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/expand-share-batches.ts'], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: database.url, MERCHANT: merchantId, USERS: String(users), STEP: '500' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
    // Killed as soon as a step has committed: it dies inside the next step or between two.
    await vi.waitFor(async () => {
      const { rows } = await sql<{ expanded: number }>`SELECT expanded FROM webhook_share_batches WHERE merchant_id = ${merchantId}`.execute(database.db);
      expect(rows[0]?.expanded ?? 0).toBeGreaterThan(0);
    }, { timeout: 120_000, interval: 5 });
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    const { rows: [left] } = await sql<{ expanded: number }>`SELECT expanded FROM webhook_share_batches WHERE merchant_id = ${merchantId}`.execute(database.db);
    expect(left!.expanded).toBeLessThan(users);
    // What was committed is whole steps: their events, each with a delivery per endpoint.
    const events = await count('webhook_events', merchantId);
    expect(events % 500).toBe(0);
    expect(await count('webhook_deliveries', merchantId)).toBe(2 * events);
    await expandAllShareBatches(database.db);
    expect([await count('webhook_events', merchantId), await count('webhook_deliveries', merchantId)]).toEqual([users, 2 * users]);
    dispatch();
    await vi.waitFor(() => {
      for (const { receiver } of endpoints) expect(receiver.received).toHaveLength(users);
    }, { timeout: 120_000 });
    await Promise.all(dispatchers.map((d) => d.drain()));
    for (const { receiver } of endpoints) {
      expect(receiver.unverified).toEqual([]);
      const times = receivedTimes(receiver);
      expect(times.size).toBe(users);
      expect([...times.values()].every((n) => n === 1)).toBe(true);
      expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(users);
    }
  }, 300_000);
});
