/**
 * The bounds of `/merchant/webhooks` (docs/webhooks.md#endpoints), through a real Node server on
 * the memory storage and on MySQL (the real MariaDB), each storage answering alike:
 * - a URL is at most 2048 characters as stored (normalized, percent-encoded), not only as sent: a
 *   short URL of non-ASCII characters is a 400 naming the limit, never the database's 503;
 * - a rotation never ends an earlier rotation's overlap before the end it answered: a second one
 *   with an overlap is a 409, one without leaves the earlier old secret signing to its end;
 * - test events are bounded per endpoint (a burst of 10, one more every 6 s): 429 with
 *   `Retry-After` and the RateLimit fields, and no row or queue entry for what was refused.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { serve } from '../../adapters/node.js';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger, type Logger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { importSeed, MysqlStorage, MysqlWebhookOutbox } from '../../src/storage/mysql/index.js';
import type { Storage } from '../../src/storage/contract.js';
import type { WebhookOutbox } from '../../src/storage/webhook-outbox.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { basic } from '../support/api.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

const available = await mysqlAvailable();
const A = basic('wa', 'key-a');
const POLICY = { allowPrivate: true, allowHttp: true };
const MERCHANTS = { merchants: [{ id: 'wa', status: 'active' as const, keys: ['key-a'] }], users: [] };

interface Subject {
  storage: Storage;
  outbox: WebhookOutbox;
  /** The test events queued for an endpoint, as the storage holds them. */
  queuedTests(endpointId: string): Promise<number>;
  cleanup(): Promise<void>;
}

const subjects: Array<[string, boolean, () => Promise<Subject>]> = [
  [
    'memory',
    true,
    async () => {
      const storage = new MemoryStorage(MERCHANTS);
      return { storage, outbox: storage.webhookOutbox, queuedTests: async (id) => storage.listWebhookDeliveries({ endpointId: id, limit: 1000 }).filter((d) => d.type === 'webhook.test').length, cleanup: async () => undefined };
    },
  ],
  [
    'MySQL',
    available,
    async () => {
      const database: TestDatabase = await createTestDatabase();
      await importSeed(database.db, database.masterKey, MERCHANTS);
      const storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey });
      return {
        storage,
        outbox: new MysqlWebhookOutbox({ db: database.db, masterKey: database.masterKey }),
        queuedTests: async (id) => {
          const { n } = await database.db.selectFrom('webhook_deliveries as d').innerJoin('webhook_events as e', 'e.id', 'd.event_id').select((eb) => eb.fn.countAll<number>().as('n')).where('d.endpoint_id', '=', id).where('e.type', '=', 'webhook.test').executeTakeFirstOrThrow();
          return Number(n);
        },
        cleanup: () => database.drop(),
      };
    },
  ],
];

for (const [name, runs, make] of subjects) {
  describe.skipIf(!runs)(`webhook bounds through a real server on ${name}`, () => {
    let subject: Subject;
    let url: string;
    let close: () => Promise<void>;
    const errors: unknown[] = [];
    const logger: Logger = { ...silentLogger, error: (fields) => void errors.push(fields) };
    const receivers: WebhookReceiver[] = [];
    const dispatchers: WebhookDispatcher[] = [];

    beforeAll(async () => {
      subject = await make();
      const api = createMerchantApi({ storage: subject.storage, logger, accessLog: false, tracing: false, webhooks: POLICY });
      const served = await serve(api, { port: 0, hostname: '127.0.0.1' });
      url = served.url;
      close = () => served.close();
    });
    afterEach(async () => {
      await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
      await Promise.all(receivers.splice(0).map((r) => r.close()));
    });
    afterAll(async () => {
      await close?.();
      await subject?.storage.close();
      await subject?.cleanup();
    });

    const post = (path: string, body?: unknown) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { ...A, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const add = async (endpointUrl: string) => post('/merchant/webhooks', { url: endpointUrl });
    const remove = (id: string) => fetch(`${url}/merchant/webhooks/${id}`, { method: 'DELETE', headers: A });
    const errorOf = async (response: Response) => ((await response.json()) as { errors: Array<{ code: string; message: string; param?: string }> }).errors[0]!;

    async function receiver(): Promise<WebhookReceiver> {
      const r = await startWebhookReceiver();
      receivers.push(r);
      return r;
    }
    function dispatch(): void {
      const d = new WebhookDispatcher({ outbox: subject.outbox, policy: POLICY, pollIntervalMs: 50, retrySchedule: [200] });
      dispatchers.push(d);
      d.start();
    }

    it('refuses a URL longer than 2048 characters as stored (percent-encoded) with 400 invalid_parameter naming the limit', async () => {
      const long = await add(`https://8.8.8.8/${'é'.repeat(2000)}`);
      expect(long.status).toBe(400);
      const error = await errorOf(long);
      expect(error).toMatchObject({ code: 'invalid_parameter', param: 'url' });
      expect(error.message).toContain('2048');
      expect(error.message).toContain('12016');
      // At the bound exactly: 16 + 2032 characters, stored as given. One é more than the room: refused.
      const exact = await add(`https://8.8.8.8/${'a'.repeat(2032)}`);
      expect(exact.status).toBe(201);
      const endpoint = ((await exact.json()) as { data: Array<{ id: string; url: string }> }).data[0]!;
      expect(endpoint.url).toHaveLength(2048);
      expect((await add(`https://8.8.8.8/${'a'.repeat(2031)}é`)).status).toBe(400);
      expect((await remove(endpoint.id)).status).toBe(204);
      expect(errors).toEqual([]);
    });

    it('a second rotation with an overlap is 409 while the first one runs; one without leaves the first old secret signing to its end', async () => {
      const r = await receiver();
      const added = await add(r.url);
      expect(added.status).toBe(201);
      const { id, secret: first } = ((await added.json()) as { data: Array<{ id: string; secret: string }> }).data[0]!;
      const rotated = await post(`/merchant/webhooks/${id}/rotate-secret`, { expire_old_in: '24h' });
      expect(rotated.status).toBe(200);
      const { secret: second, old_secret_expires_at: firstEnds } = ((await rotated.json()) as { data: Array<{ secret: string; old_secret_expires_at: string }> }).data[0]!;

      const again = await post(`/merchant/webhooks/${id}/rotate-secret`, { expire_old_in: '24h' });
      expect(again.status).toBe(409);
      const refusal = await errorOf(again);
      expect(refusal.code).toBe('conflict');
      expect(refusal.message).toContain(`signs until ${firstEnds}`);

      // Without an overlap: the current secret (the second) stops now, the first still signs until firstEnds.
      const now = await post(`/merchant/webhooks/${id}/rotate-secret`);
      expect(now.status).toBe(200);
      const { secret: third, old_secret_expires_at: none } = ((await now.json()) as { data: Array<{ secret: string; old_secret_expires_at: null }> }).data[0]!;
      expect(none).toBeNull();
      r.secrets.push(first, second, third);
      expect((await post(`/merchant/webhooks/${id}/test`)).status).toBe(202);
      dispatch();
      await vi.waitFor(() => expect(r.received).toHaveLength(1), { timeout: 15_000 });
      expect(r.unverified).toEqual([]);
      expect(r.received[0]!.verifiedBy).toEqual([0, 2]);
      expect(String(r.received[0]!.headers['webhook-signature']).split(' ')).toHaveLength(2);
      expect((await remove(id)).status).toBe(204);
    });

    it('bounds test events per endpoint: a burst of 10, then 429 with Retry-After, nothing queued for a refusal', async () => {
      const r = await receiver();
      const added = await add(r.url);
      const { id } = ((await added.json()) as { data: Array<{ id: string }> }).data[0]!;
      const answers = await Promise.all(Array.from({ length: 30 }, () => post(`/merchant/webhooks/${id}/test`)));
      const statuses = answers.map((a) => a.status);
      expect(statuses.filter((s) => s === 202)).toHaveLength(10);
      expect(statuses.filter((s) => s === 429)).toHaveLength(20);
      const refused = answers.find((a) => a.status === 429)!;
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(6);
      expect(refused.headers.get('ratelimit-policy')).toBe('"webhook_tests";q=10;w=60');
      const error = await errorOf(refused);
      expect(error.code).toBe('too_many_requests');
      expect(error.message).toMatch(/10 test events within 60 s/);
      expect(await subject.queuedTests(id)).toBe(10);
      // The budget comes back: one more is accepted once its Retry-After has passed.
      await vi.waitFor(async () => expect((await post(`/merchant/webhooks/${id}/test`)).status).toBe(202), { timeout: 20_000, interval: 1000 });
      expect(await subject.queuedTests(id)).toBe(11);
      expect(errors).toEqual([]);
      expect((await remove(id)).status).toBe(204);
    });
  });
}
