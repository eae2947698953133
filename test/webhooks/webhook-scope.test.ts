/**
 * Who may push personal data out (issue 39, docs/webhooks.md#who-may-manage-endpoints and
 * #a-disabled-merchant), each attack reproduced on a real server (the Node adapter on a real port)
 * with the real dispatcher and real receivers, on the memory storage and on MySQL (real MariaDB):
 *
 * - a key limited to `users:read` (a reporting job's) is refused 403 `insufficient_scope`, naming
 *   `webhooks:manage`, on every route under /merchant/webhooks, and changes nothing; a key with
 *   every scope (every key that had no limits) and one with `webhooks:manage` manage;
 * - a disabled merchant's changes write no event, its pending deliveries wait (no round claims
 *   them, none is sent), and after it is enabled the waiting ones go; those older than the
 *   retention are dropped by the prune;
 * - endpoints belong to the merchant, not to the key that added them: revoking the key leaves them
 *   receiving (Stripe's model); disabling the merchant stops everything.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import { serve, type Served } from '../../adapters/node.js';
import { createMerchantApi, type MerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { ROUTES } from '../../src/routes/table.js';
import { openApiDocument } from '../../src/openapi/document.js';
import type { Seed, SeedMerchant } from '../../src/storage/seed/seed.js';
import type { UserRecord } from '../../src/storage/contract.js';
import type { WebhookOutbox } from '../../src/storage/webhook-outbox.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { importSeed, keyFingerprint, listAuditEvents, listMerchantKeys, listWebhookDeliveries, MysqlStorage, MysqlWebhookOutbox, revokeMerchantKey, setMerchantStatus } from '../../src/storage/mysql/index.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { mysqlCommands, openMysqlStorage } from '../../src/cli/commands/mysql.js';
import { runCli } from '../../src/cli/run.js';
import { captureIo } from '../support/recording.js';
import { basic } from '../support/api.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { user, type SeedUser } from '../support/seeds.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

const mysqlReady = await mysqlAvailable();
const POLICY = { allowPrivate: true, allowHttp: true };

/**
 * Merchant `wa`'s keys: every scope (as every key without limits), a reporting job's, a manager's,
 * the two scopes of before named, and one with every scope that the revocation test revokes.
 */
const KEYS = { full: 'key-full', read: 'key-read', manage: 'key-manage', old: 'key-old-pair', revoked: 'key-to-revoke' } as const;
function merchant(status: 'active' | 'disabled', keys: readonly string[] = Object.values(KEYS)): SeedMerchant {
  const details = keys.map((key) =>
    key === KEYS.read ? { limits: { scopes: ['users:read'] as const } } : key === KEYS.manage ? { limits: { scopes: ['webhooks:manage'] as const } } : key === KEYS.old ? { limits: { scopes: ['signature', 'users:read'] as const } } : undefined,
  );
  return { id: 'wa', status, keys: [...keys], keyDetails: details as SeedMerchant['keyDetails'] };
}
const OTHER: SeedMerchant = { id: 'wb', status: 'active', keys: ['key-b'] };

/** One deployment shape: the storage, how users change, how the merchant is disabled, and what the outbox holds. */
interface Shape {
  api: MerchantApi;
  outbox: WebhookOutbox;
  change(users: SeedUser[]): Promise<void>;
  setStatus(status: 'active' | 'disabled'): Promise<void>;
  /** Revokes one of `wa`'s keys. */
  revoke(key: string): Promise<void>;
  /** A merchant's deliveries (default `wa`), newest first. */
  deliveries(merchantId?: string): Promise<Array<{ state: string; lastError: string | null; type: string }>>;
  /** Events written for `wa`'s share `sharedUserId` (MySQL: rows; memory: undefined, it keeps none apart from deliveries). */
  eventsOf(sharedUserId: string): Promise<number | undefined>;
  /** Between tests: every endpoint (with its deliveries) removed, the merchant active. */
  reset(): Promise<void>;
  close(): Promise<void>;
}

function record({ merchant_id: _m, ...rest }: SeedUser): UserRecord {
  return rest as UserRecord;
}

function memoryShape(): Shape {
  let keys: string[] = Object.values(KEYS);
  let status: 'active' | 'disabled' = 'active';
  const storage = new MemoryStorage({ merchants: [merchant(status, keys), OTHER], users: [] });
  const api = createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false, webhooks: POLICY });
  return {
    api,
    outbox: storage.webhookOutbox,
    change: async (users) => {
      for (const u of users) storage.putUser(u.merchant_id, record(u));
    },
    setStatus: async (next) => {
      status = next;
      storage.putMerchant(merchant(status, keys));
    },
    revoke: async (key) => {
      keys = keys.filter((k) => k !== key);
      storage.putMerchant(merchant(status, keys));
    },
    deliveries: async (merchantId = 'wa') => storage.listWebhookDeliveries({ merchantId }),
    eventsOf: async () => undefined,
    reset: async () => {
      for (const merchantId of ['wa', 'wb']) for (const endpoint of await storage.listWebhookEndpoints(merchantId)) await storage.removeWebhookEndpoint(merchantId, endpoint.id);
      status = 'active';
      storage.putMerchant(merchant(status, keys));
    },
    close: () => storage.close(),
  };
}

async function mysqlShape(): Promise<Shape & { database: TestDatabase }> {
  const database = await createTestDatabase();
  const seed: Seed = { merchants: [merchant('active'), OTHER], users: [] };
  await importSeed(database.db, database.masterKey, seed);
  // A short key cache, so a revocation reaches this server within the test's wait.
  const storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey, keyCacheTtlMs: 200 });
  const api = createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false, webhooks: POLICY });
  return {
    database,
    api,
    outbox: new MysqlWebhookOutbox({ db: database.db, masterKey: database.masterKey }),
    change: async (users) => void (await importSeed(database.db, undefined, { merchants: [], users })),
    setStatus: async (next) => void (await setMerchantStatus(database.db, 'wa', next, 'test')),
    revoke: async (key) => {
      const listed = await listMerchantKeys(database.db, database.masterKey, 'wa');
      const found = listed.find((k) => k.fingerprint === keyFingerprint(key))!;
      expect(await revokeMerchantKey(database.db, 'wa', found.key_id, 'test')).toBe(true);
    },
    deliveries: async (merchantId = 'wa') => listWebhookDeliveries(database.db, { merchantId }),
    eventsOf: async (sharedUserId) => Number((await sql<{ n: number }>`SELECT COUNT(*) AS n FROM webhook_events WHERE merchant_id = 'wa' AND shared_user_id = ${sharedUserId}`.execute(database.db)).rows[0]!.n),
    reset: async () => {
      await database.db.deleteFrom('webhook_endpoints').execute();
      await setMerchantStatus(database.db, 'wa', 'active', 'test');
    },
    close: async () => {
      await storage.close();
      await database.drop();
    },
  };
}

/** A route's path with `{id}` filled. */
const pathOf = (pattern: string, id: string) => pattern.replace('{id}', id);
const MANAGEMENT = ROUTES.filter((route) => route.pattern.startsWith('/merchant/webhooks'));

for (const [name, make, skip] of [
  ['memory', async () => memoryShape(), false],
  ['MySQL', mysqlShape, !mysqlReady],
] as const) {
  describe.skipIf(skip)(`who may push personal data out, on the ${name} storage`, () => {
    let shape: Shape;
    let served: Served;
    const receivers: WebhookReceiver[] = [];
    beforeAll(async () => {
      shape = await make();
      served = await serve(shape.api, { port: 0, hostname: '127.0.0.1' });
    });
    afterEach(async () => {
      await Promise.all(receivers.splice(0).map((r) => r.close()));
      // Nothing of one test reaches the next, passed or failed.
      await shape.reset();
      await vi.waitFor(async () => expect((await send(KEYS.full, 'GET', '/merchant/webhooks')).status).toBe(200), { timeout: 10_000, interval: 100 });
    });
    afterAll(async () => {
      await served?.close();
      await shape?.close();
    });

    const send = (key: string, method: string, path: string, body?: unknown) =>
      fetch(`${served.url}${path}`, {
        method,
        headers: { ...basic('wa', key), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    async function receiver(): Promise<WebhookReceiver> {
      const r = await startWebhookReceiver();
      receivers.push(r);
      return r;
    }
    /** Adds an endpoint for `wa` with `key`; the receiver learns its secret. */
    async function addEndpoint(key: string, r: WebhookReceiver, events?: string[]): Promise<string> {
      const added = await send(key, 'POST', '/merchant/webhooks', { url: r.url, ...(events && { events }) });
      expect(added.status).toBe(201);
      const endpoint = ((await added.json()) as { data: Array<{ id: string; secret: string }> }).data[0]!;
      r.secrets.push(endpoint.secret);
      return endpoint.id;
    }
    /** The real dispatcher, run round by round: how many it claimed, everything it claimed sent and recorded. */
    function dispatcher(): { round(): Promise<number> } {
      const d = new WebhookDispatcher({ outbox: shape.outbox, policy: POLICY, retrySchedule: [60_000] });
      return {
        async round() {
          const claimed = await d.runOnce();
          await d.drain();
          return claimed;
        },
      };
    }

    it('a users:read key is refused 403 insufficient_scope, naming webhooks:manage, on every route under /merchant/webhooks, and changes nothing', async () => {
      const r = await receiver();
      const id = await addEndpoint(KEYS.full, r);
      const before = (await (await send(KEYS.full, 'GET', '/merchant/webhooks')).json()) as { data: unknown[] };
      const refused = { status: 'error', data: [], errors: [{ code: 'insufficient_scope', message: 'This API key lacks the scope webhooks:manage, which this endpoint needs.' }] };
      // Every route of the table under the path, so a route added later is covered too; HEAD is the GET's twin.
      expect(MANAGEMENT.map((route) => `${route.method} ${route.pattern}`)).toEqual([
        'GET /merchant/webhooks',
        'POST /merchant/webhooks',
        'DELETE /merchant/webhooks/{id}',
        'POST /merchant/webhooks/{id}/rotate-secret',
        'POST /merchant/webhooks/{id}/test',
        'GET /merchant/webhooks/{id}/deliveries',
        'POST /merchant/webhooks/{id}/redeliver',
      ]);
      for (const key of [KEYS.read, KEYS.old]) {
        for (const route of MANAGEMENT) {
          const body = route.id === 'createWebhook' ? { url: r.url } : route.id === 'rotateWebhookSecret' ? { expire_old_in: '1h' } : route.id === 'redeliverWebhook' ? { since: new Date(Date.now() - 60_000).toISOString() } : undefined;
          const answer = await send(key, route.method, pathOf(route.pattern, id), body);
          expect([route.id, key, answer.status]).toEqual([route.id, key, 403]);
          expect(await answer.json()).toEqual(refused);
        }
        expect((await send(key, 'HEAD', '/merchant/webhooks')).status).toBe(403);
        // It still reads what it may.
        expect((await send(key, 'GET', '/merchant/users')).status).toBe(200);
      }
      // Nothing changed: the same endpoint, no test queued, and its secret still the one that signs.
      expect(await (await send(KEYS.full, 'GET', '/merchant/webhooks')).json()).toEqual(before);
      expect(await dispatcher().round()).toBe(0);
      const tested = await send(KEYS.full, 'POST', `/merchant/webhooks/${id}/test`);
      expect(tested.status).toBe(202);
      await vi.waitFor(
        async () => {
          await dispatcher().round();
          expect(r.received).toHaveLength(1);
        },
        { timeout: 10_000, interval: 50 },
      );
      expect(r.unverified).toEqual([]);
      expect(r.received[0]!.event.type).toBe('webhook.test');

      // The scope of its own: a webhooks:manage key manages, and reads nothing else.
      const listed = await send(KEYS.manage, 'GET', '/merchant/webhooks');
      expect(listed.status).toBe(200);
      const own = await addEndpoint(KEYS.manage, await receiver());
      expect((await send(KEYS.manage, 'POST', `/merchant/webhooks/${own}/rotate-secret`)).status).toBe(200);
      const users = await send(KEYS.manage, 'GET', '/merchant/users');
      expect(users.status).toBe(403);
      expect(((await users.json()) as { errors: Array<{ message: string }> }).errors[0]!.message).toBe('This API key lacks the scope users:read, which this endpoint needs.');
    });

    it('a disabled merchant: a change writes no event, no delivery is sent; after enable the waiting ones go', async () => {
      const r = await receiver();
      await addEndpoint(KEYS.full, r, ['user.shared', 'user.updated']);
      const d = dispatcher();
      await shape.change([user('wa', 'dis-1')]);
      expect(await d.round()).toBe(1);
      expect(r.received.map((w) => [w.event.type, w.event.data.shared_user_id])).toEqual([['user.shared', 'dis-1']]);

      // A change before the merchant is disabled: its delivery is pending when it is.
      await shape.change([user('wa', 'dis-2', { street: 'Before 2' })]);
      await shape.setStatus('disabled');
      await shape.change([user('wa', 'dis-3'), user('wa', 'dis-1', { street: 'While disabled' })]);
      expect(await shape.eventsOf('dis-3')).toBe(name === 'MySQL' ? 0 : undefined);
      const held = await shape.deliveries();
      expect(held.map((x) => x.state).sort()).toEqual(['delivered', 'pending']);
      // Rounds claim nothing: the pending delivery waits, and the outbox does not count it late.
      expect(await d.round()).toBe(0);
      expect(await d.round()).toBe(0);
      expect(r.received).toHaveLength(1);
      expect((await shape.outbox.stats()).oldestDueAgeMs).toBe(0);
      // Inside the retention, the prune keeps it.
      await shape.outbox.prune(new Date(Date.now() - 3_600_000));
      expect((await shape.deliveries()).map((x) => x.state).sort()).toEqual(['delivered', 'pending']);

      await shape.setStatus('active');
      await vi.waitFor(async () => expect(await d.round()).toBe(1), { timeout: 10_000, interval: 50 });
      expect(r.unverified).toEqual([]);
      // The waiting one went, with the record as it was at its change; the changes made while disabled never do.
      expect(r.received.map((w) => [w.event.type, w.event.data.shared_user_id, w.event.data.street])).toEqual([
        ['user.shared', 'dis-1', 'Hauptstraße 1'],
        ['user.shared', 'dis-2', 'Before 2'],
      ]);
      expect(await d.round()).toBe(0);
      // Active again: changes are events again.
      await shape.change([user('wa', 'dis-4')]);
      expect(await d.round()).toBe(1);
      expect(r.received.at(-1)!.event.data.shared_user_id).toBe('dis-4');
    });

    it('a disabled merchant\'s deliveries older than the retention are dropped by the prune, and not sent after enable; other merchants\' pending ones are kept', async () => {
      const r = await receiver();
      await addEndpoint(KEYS.full, r, ['user.shared']);
      const added = await fetch(`${served.url}/merchant/webhooks`, { method: 'POST', headers: { ...basic('wb', 'key-b'), 'content-type': 'application/json' }, body: JSON.stringify({ url: r.url, events: ['user.shared'] }) });
      expect(added.status).toBe(201);
      r.secrets.push(((await added.json()) as { data: Array<{ secret: string }> }).data[0]!.secret);
      await shape.change([user('wa', 'old-1'), user('wb', 'old-b')]);
      await shape.setStatus('disabled');
      expect((await shape.deliveries()).filter((x) => x.state === 'pending')).toHaveLength(1);
      // A cutoff after the deliveries were made: they are past the retention.
      await shape.outbox.prune(new Date(Date.now() + 1000));
      expect((await shape.deliveries()).filter((x) => x.state === 'pending')).toEqual([]);
      // An active merchant's pending delivery is kept, however old (it is being retried, or about to be).
      expect((await shape.deliveries('wb')).map((x) => x.state)).toEqual(['pending']);
      await shape.setStatus('active');
      // Only the other merchant's goes.
      expect(await dispatcher().round()).toBe(1);
      expect(r.received.map((w) => w.event.data.shared_user_id)).toEqual(['old-b']);
      expect(r.unverified).toEqual([]);
    });

    it('endpoints belong to the merchant, not the key: revoking the key that added one leaves it receiving; disabling the merchant stops everything', async () => {
      const r = await receiver();
      await addEndpoint(KEYS.revoked, r, ['user.shared', 'user.updated']);
      await shape.revoke(KEYS.revoked);
      await vi.waitFor(async () => expect((await send(KEYS.revoked, 'GET', '/merchant/webhooks')).status).toBe(401), { timeout: 10_000, interval: 100 });
      const d = dispatcher();
      await shape.change([user('wa', 'rev-1')]);
      expect(await d.round()).toBe(1);
      expect(r.received.map((w) => w.event.data.shared_user_id)).toEqual(['rev-1']);

      await shape.setStatus('disabled');
      await vi.waitFor(async () => expect((await send(KEYS.full, 'GET', '/merchant/webhooks')).status).toBe(403), { timeout: 10_000, interval: 100 });
      await shape.change([user('wa', 'rev-2'), user('wa', 'rev-1', { city: 'Hamburg' })]);
      expect(await d.round()).toBe(0);
      expect(r.received).toHaveLength(1);
      expect(await shape.eventsOf('rev-2')).toBe(name === 'MySQL' ? 0 : undefined);
    });
  });
}

describe.skipIf(!mysqlReady)('the key behind an endpoint change, and the new scope through the CLI, on MySQL', () => {
  let database: TestDatabase;
  let storage: MysqlStorage;
  let served: Served;
  /** A merchant id as long as one may be (128 characters): `merchant:ID key:KEY_ID` is longer than the trail's 128. */
  const LONG = `m-${'x'.repeat(126)}`;
  const run = async (args: string[]) => {
    const io = captureIo({ DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText }, { progress: () => {} });
    const code = await runCli(args, io, { name: 'test', serve: () => Promise.reject(new Error('not in this test')), commands: mysqlCommands, openMysqlStorage });
    return { code, out: io.lines.join('\n'), err: io.errors.join('\n') };
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, {
      merchants: [
        { id: LONG, status: 'active', keys: ['long-key'] },
        { id: 'wc', status: 'active', keys: ['key-c'] },
      ],
      users: [],
    });
    storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey, keyCacheTtlMs: 0 });
    served = await serve(createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false, webhooks: POLICY }), { port: 0, hostname: '127.0.0.1' });
  });
  afterAll(async () => {
    await served?.close();
    await storage?.close();
    await database?.drop();
  });

  it('every endpoint change records the id of the key that made it, in the row\'s key_id and whole in the actor, however long the merchant id', async () => {
    const auth = basic(LONG, 'long-key');
    const added = await fetch(`${served.url}/merchant/webhooks`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ url: 'http://127.0.0.1:9/hook' }) });
    expect(added.status).toBe(201);
    const id = ((await added.json()) as { data: Array<{ id: string }> }).data[0]!.id;
    expect((await fetch(`${served.url}/merchant/webhooks/${id}/rotate-secret`, { method: 'POST', headers: auth })).status).toBe(200);
    expect((await fetch(`${served.url}/merchant/webhooks/${id}`, { method: 'DELETE', headers: auth })).status).toBe(204);
    const KEY_ID = (await listMerchantKeys(database.db, database.masterKey, LONG))[0]!.key_id;
    const { events } = await listAuditEvents(database.db, { merchantId: LONG, limit: 10 });
    expect(events.map((e) => e.action)).toEqual(['webhook_endpoint_removed', 'webhook_secret_rotated', 'webhook_endpoint_added']);
    for (const event of events) {
      expect(event.key_id).toBe(KEY_ID);
      expect(event.merchant_id).toBe(LONG);
      expect(event.actor.length).toBeLessThanOrEqual(128);
      expect(event.actor).toMatch(new RegExp(`^merchant:m-x+… key:${KEY_ID}$`));
    }
    // A short id: the actor whole, as before, and the key id in its column too.
    const short = await fetch(`${served.url}/merchant/webhooks`, { method: 'POST', headers: { ...basic('wc', 'key-c'), 'content-type': 'application/json' }, body: JSON.stringify({ url: 'http://127.0.0.1:9/hook' }) });
    expect(short.status).toBe(201);
    const [key] = await listMerchantKeys(database.db, database.masterKey, 'wc');
    const [event] = (await listAuditEvents(database.db, { merchantId: 'wc', action: 'webhook_endpoint_added', limit: 1 })).events;
    expect([event!.actor, event!.key_id]).toEqual([`merchant:wc key:${key!.key_id}`, key!.key_id]);
  });

  it('merchant add-key and update-key take webhooks:manage; a key with every scope (stored as before) has it, one given the two old scopes has not', async () => {
    const keys = JSON.parse((await run(['merchant', 'keys', 'wc', '--json'])).out) as Array<{ key_id: string; scopes: string[] }>;
    expect(keys.map((k) => k.scopes)).toEqual([['signature', 'users:read', 'webhooks:manage', 'keys:manage']]);
    const added = await run(['merchant', 'add-key', 'wc', '--scopes', 'webhooks:manage', '--json', '--actor', 'alice']);
    expect(added.code, added.err).toBe(0);
    const manager = JSON.parse(added.out) as { api_key: string; key_id: string };
    const pair = JSON.parse((await run(['merchant', 'add-key', 'wc', '--scopes', 'signature,users:read', '--json'])).out) as { api_key: string; key_id: string };
    const listed = async (key: string) => (await fetch(`${served.url}/merchant/webhooks`, { headers: basic('wc', key) })).status;
    expect(await listed(manager.api_key)).toBe(200);
    expect(await listed(pair.api_key)).toBe(403);
    expect(await listed('key-c')).toBe(200);
    const updated = await run(['merchant', 'update-key', 'wc', pair.key_id, '--scopes', 'users:read,webhooks:manage']);
    expect(updated.code, updated.err).toBe(0);
    expect(await listed(pair.api_key)).toBe(200);
    const after = JSON.parse((await run(['merchant', 'keys', 'wc', '--json'])).out) as Array<{ key_id: string; scopes: string[] }>;
    expect(after.find((k) => k.key_id === pair.key_id)!.scopes).toEqual(['users:read', 'webhooks:manage']);
    expect(after.find((k) => k.key_id === manager.key_id)!.scopes).toEqual(['webhooks:manage']);
    // A scope that does not exist is a usage error naming the ones that do.
    const wrong = await run(['merchant', 'add-key', 'wc', '--scopes', 'webhooks:write']);
    expect(wrong.code).toBe(2);
    expect(wrong.err).toContain('the scopes are signature, users:read, webhooks:manage');
  });

  it('a delivery claimed just before its merchant is disabled is given back unsent, and goes after enable', async () => {
    const r = await startWebhookReceiver();
    try {
      await database.db.deleteFrom('webhook_endpoints').execute();
      const added = await fetch(`${served.url}/merchant/webhooks`, { method: 'POST', headers: { ...basic('wc', 'key-c'), 'content-type': 'application/json' }, body: JSON.stringify({ url: r.url, events: ['user.shared'] }) });
      r.secrets.push(((await added.json()) as { data: Array<{ secret: string }> }).data[0]!.secret);
      await importSeed(database.db, undefined, { merchants: [], users: [user('wc', 'race-1')] });
      const outbox = new MysqlWebhookOutbox({ db: database.db, masterKey: database.masterKey });
      // The disable commits between the claim's transaction and its read of what it claimed.
      let disabled = false;
      const execute = database.db.getExecutor().executeQuery.bind(database.db.getExecutor());
      const spy = vi.spyOn(database.db.getExecutor(), 'executeQuery').mockImplementation(async (query, ...rest) => {
        if (!disabled && /INNER JOIN webhook_events e ON e.id = d.event_id/.test((query as { sql: string }).sql)) {
          disabled = true;
          await setMerchantStatus(database.db, 'wc', 'disabled', 'test');
        }
        return execute(query, ...rest);
      });
      try {
        expect(await outbox.claimDue({ limit: 10, leaseMs: 60_000, maxInFlightPerEndpoint: 4 })).toEqual([]);
      } finally {
        spy.mockRestore();
      }
      expect(disabled).toBe(true);
      const d = new WebhookDispatcher({ outbox, policy: POLICY, retrySchedule: [60_000] });
      expect(await d.runOnce()).toBe(0);
      await setMerchantStatus(database.db, 'wc', 'active', 'test');
      expect(await d.runOnce()).toBe(1);
      await d.drain();
      expect(r.received.map((w) => w.event.data.shared_user_id)).toEqual(['race-1']);
    } finally {
      await r.close();
    }
  });
});

describe('the OpenAPI document names the scope of every route', () => {
  it('webhooks:manage on every /merchant/webhooks operation (its security and its 403), keys:manage on the key changes, users:read on the other Basic routes', () => {
    const paths = openApiDocument('', ROUTES).paths as Record<string, Record<string, { security: unknown; responses: Record<string, { description: string }> }>>;
    for (const route of ROUTES.filter((r) => r.auth === 'basic')) {
      const scope = route.pattern.startsWith('/merchant/webhooks') ? 'webhooks:manage' : route.pattern.startsWith('/merchant/keys') && route.method !== 'GET' ? 'keys:manage' : 'users:read';
      const operation = paths[route.pattern]![route.method.toLowerCase()]!;
      expect([route.id, operation.security]).toEqual([route.id, [{ merchantBasic: [scope] }]]);
      expect(operation.responses['403']!.description).toContain(`lacks the scope \`${scope}\``);
    }
  });
});
