/**
 * What one attempt and one merchant may hold (docs/webhooks.md#delivery): an attempt, its name's
 * resolution included, ends within WEBHOOK_TIMEOUT and before its lease, its duration counted from
 * its start; a configuration whose lease an attempt could outlive is refused; the result is
 * recorded though the outbox fails at first; a claim takes no more of a merchant than the
 * dispatcher's share leaves, on the memory storage and on MySQL, the rest staying pending for
 * others. (The same with serve, a DNS server and real receivers: webhook-dns.test.ts.)
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { addWebhookEndpoint, importSeed, MysqlWebhookOutbox, sendWebhookTest } from '../../src/storage/mysql/index.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import type { WebhookOutbox } from '../../src/storage/webhook-outbox.js';
import { WebhookDispatcher, type AttemptEvent, type DispatcherOptions } from '../../src/webhooks/dispatcher.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

const TEST_POLICY = { allowPrivate: true, allowHttp: true };
const mysql = await mysqlAvailable();

function memoryStorage(merchants = ['m1', 'm2', 'm3']): MemoryStorage {
  return new MemoryStorage({ merchants: merchants.map((id) => ({ id, status: 'active' as const, keys: [`key-${id}`] })), users: [] });
}

describe('the dispatcher\'s bounds', () => {
  const dispatchers: WebhookDispatcher[] = [];
  const receivers: WebhookReceiver[] = [];
  afterEach(async () => {
    await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  const start = (options: DispatcherOptions) => {
    const d = new WebhookDispatcher({ policy: TEST_POLICY, pollIntervalMs: 20, ...options });
    dispatchers.push(d);
    d.start();
    return d;
  };

  it('refuses a lease an attempt could outlive, and a merchant share that lets two merchants take every slot', () => {
    const outbox = memoryStorage().webhookOutbox;
    expect(() => new WebhookDispatcher({ outbox, timeoutMs: 15_000, leaseMs: 15_500 })).toThrow(/lease \(15500 ms\) must be at least 1000 ms longer than the attempt timeout \(15000 ms, name resolution included\)/);
    expect(() => new WebhookDispatcher({ outbox, timeoutMs: 15_000, leaseMs: 16_000 })).not.toThrow();
    expect(() => new WebhookDispatcher({ outbox, maxInFlight: 64, maxInFlightPerMerchant: 32 })).toThrow(/two merchants must never take every slot/);
    expect(() => new WebhookDispatcher({ outbox, maxInFlight: 64, maxInFlightPerMerchant: 31 })).not.toThrow();
    expect(() => new WebhookDispatcher({ outbox, maxInFlight: 2, maxInFlightPerMerchant: 1 })).not.toThrow();
  });

  it('an attempt whose name never resolves ends within the timeout, is recorded, and its duration is the attempt\'s', async () => {
    const storage = memoryStorage();
    const endpoint = await storage.addWebhookEndpoint({ merchantId: 'm1', url: 'http://never.test/hook', events: ['user.shared'], maxPerMerchant: 10 });
    await storage.sendWebhookTest('m1', endpoint.id);
    const attempts: AttemptEvent[] = [];
    start({ outbox: storage.webhookOutbox, timeoutMs: 400, leaseMs: 60_000, retrySchedule: [60_000], resolve: () => new Promise(() => {}), onAttempt: (a) => attempts.push(a) });
    await vi.waitFor(() => expect(attempts).toHaveLength(1), { timeout: 10_000 });
    expect(attempts[0]).toMatchObject({ outcome: 'retry', error: 'dns_timeout' });
    expect(attempts[0]!.durationMs).toBeGreaterThanOrEqual(350);
    expect(attempts[0]!.durationMs).toBeLessThan(5000);
    expect(storage.listWebhookDeliveries({ endpointId: endpoint.id })).toMatchObject([{ state: 'pending', attempts: 1, lastError: 'dns_timeout' }]);
  });

  it('an attempt ends before its lease: name resolution and the request share the timeout', async () => {
    const storage = memoryStorage();
    const endpoint = await storage.addWebhookEndpoint({ merchantId: 'm1', url: 'http://slow-name.test:9/hook', events: ['user.shared'], maxPerMerchant: 10 });
    await storage.sendWebhookTest('m1', endpoint.id);
    const attempts: AttemptEvent[] = [];
    // The name answers after 800 ms of a 1000 ms attempt: 200 ms are left for a receiver that is not there.
    const slowName = () => new Promise<Array<{ address: string; family: number }>>((resolve) => setTimeout(() => resolve([{ address: '127.0.0.1', family: 4 }]), 800));
    start({ outbox: storage.webhookOutbox, timeoutMs: 1000, leaseMs: 2000, retrySchedule: [60_000], resolve: slowName, onAttempt: (a) => attempts.push(a) });
    await vi.waitFor(() => expect(attempts).toHaveLength(1), { timeout: 10_000 });
    expect(attempts[0]!.durationMs).toBeGreaterThanOrEqual(750);
    expect(attempts[0]!.durationMs).toBeLessThan(2000);
    expect(storage.listWebhookDeliveries({ endpointId: endpoint.id })).toMatchObject([{ attempts: 1 }]);
  });

  it('records the result though the outbox fails at first: the delivery is sent once', async () => {
    const storage = memoryStorage();
    const receiver = await startWebhookReceiver();
    receivers.push(receiver);
    const endpoint = await storage.addWebhookEndpoint({ merchantId: 'm1', url: receiver.url, events: ['user.shared'], maxPerMerchant: 10 });
    receiver.secrets.push(endpoint.secret);
    await storage.sendWebhookTest('m1', endpoint.id);
    const real = storage.webhookOutbox;
    let failures = 2;
    const flaky: WebhookOutbox = {
      claimDue: (options) => real.claimDue(options),
      recordAttempt: async (record) => {
        if (failures-- > 0) throw Object.assign(new Error('connection lost'), { code: 'PROTOCOL_CONNECTION_LOST' });
        await real.recordAttempt(record);
      },
      prune: (before) => real.prune(before),
      stats: () => real.stats(),
    };
    const errors: unknown[] = [];
    start({ outbox: flaky, timeoutMs: 500, leaseMs: 1500, onError: (e) => errors.push(e) });
    await vi.waitFor(() => expect(storage.listWebhookDeliveries({ endpointId: endpoint.id })).toMatchObject([{ state: 'delivered', attempts: 1 }]), { timeout: 10_000 });
    expect(errors).toHaveLength(2);
    expect(receiver.received).toHaveLength(1);
  });
});

describe('a claim leaves a merchant at its share pending', () => {
  it('memory storage', async () => {
    const storage = memoryStorage();
    for (const merchantId of ['m1', 'm2', 'm3']) {
      for (let e = 0; e < 3; e++) {
        const endpoint = await storage.addWebhookEndpoint({ merchantId, url: `http://127.0.0.1:9/${merchantId}/${e}`, events: ['user.shared'], maxPerMerchant: 10 });
        for (let i = 0; i < 4; i++) await storage.sendWebhookTest(merchantId, endpoint.id);
      }
    }
    const room: Record<string, number> = { m1: 0, m2: 2, m3: 5 };
    const claimed = await storage.webhookOutbox.claimDue({ limit: 100, leaseMs: 60_000, maxInFlightPerEndpoint: 4, merchantRoom: (m) => room[m]! });
    const count = (m: string) => claimed.filter((d) => d.merchantId === m).length;
    expect([count('m1'), count('m2'), count('m3')]).toEqual([0, 2, 5]);
    // What was not claimed is still there, m1's for a claim with room for it.
    const rest = await storage.webhookOutbox.claimDue({ limit: 100, leaseMs: 60_000, maxInFlightPerEndpoint: 4 });
    expect(rest.filter((d) => d.merchantId === 'm1')).toHaveLength(12);
    expect(rest).toHaveLength(36 - 7);
  });

  describe.skipIf(!mysql)('MySQL', () => {
    let database: TestDatabase;
    beforeAll(async () => {
      database = await createTestDatabase();
      await importSeed(database.db, database.masterKey, { merchants: ['m1', 'm2', 'm3'].map((id) => ({ id, status: 'active' as const, keys: [`key-${id}`] })), users: [] });
    });
    afterAll(async () => {
      await database?.drop();
    });

    it('the outbox', async () => {
      for (const merchantId of ['m1', 'm2', 'm3']) {
        for (let e = 0; e < 3; e++) {
          const endpoint = await addWebhookEndpoint(database.db, database.masterKey, merchantId, `http://127.0.0.1:9/${merchantId}/${e}`, ['user.shared']);
          for (let i = 0; i < 4; i++) await sendWebhookTest(database.db, endpoint.id);
        }
      }
      const outbox = new MysqlWebhookOutbox({ db: database.db, masterKey: database.masterKey });
      const room: Record<string, number> = { m1: 0, m2: 2, m3: 5 };
      const claimed = await outbox.claimDue({ limit: 100, leaseMs: 60_000, maxInFlightPerEndpoint: 4, merchantRoom: (m) => room[m]! });
      const count = (m: string) => claimed.filter((d) => d.merchantId === m).length;
      expect([count('m1'), count('m2'), count('m3')]).toEqual([0, 2, 5]);
      const rest = await outbox.claimDue({ limit: 100, leaseMs: 60_000, maxInFlightPerEndpoint: 4 });
      expect(rest.filter((d) => d.merchantId === 'm1')).toHaveLength(12);
      expect(rest).toHaveLength(36 - 7);
    });
  });
});
