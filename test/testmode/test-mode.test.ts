/**
 * Test mode (docs/test-mode.md) through a real Node server, on the memory storage and on MySQL: a
 * test key's mode shown in `GET /merchant/keys`; every users endpoint answering the merchant's
 * generated test dataset (pages, filters, orders, `updated_since`, the change feed, ETags) and
 * never a live user; the simulator (test keys only) and its reset; `/validatesignature` with salts
 * kept apart; `testMode: false` refusing test keys.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { serve } from '../../adapters/node.js';
import { createMerchantApi, type MerchantApiOptions } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { createMetrics } from '../../src/observe/metrics.js';
import { createMerchantClient } from '../../src/client/index.js';
import { recordingLogger } from '../support/recording.js';
import type { Storage } from '../../src/storage/contract.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { parseSeed, type Seed } from '../../src/storage/seed/seed.js';
import { importSeed, MysqlStorage } from '../../src/storage/mysql/index.js';
import { generateTestUsers } from '../../src/testmode/dataset.js';
import { basic } from '../support/basic-auth.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { seedUser } from '../support/seeds.js';
import { hmacSha224, queryString, signatureMessage } from '../support/test-signer.js';

const available = await mysqlAvailable();

const LIVE_KEY = 'live-key-tm';
const TEST_KEY = 'test_key-tm';
const LIVE = basic('tm', LIVE_KEY);
const TEST = basic('tm', TEST_KEY);
const LIVE_IDS = ['live-1', 'live-2', 'test_user_00003'];

function seedDocument(): Seed {
  return parseSeed({
    merchants: [{ id: 'tm', status: 'active', keys: [LIVE_KEY, { key: TEST_KEY, mode: 'test', name: 'sandbox' }] }],
    // A live user whose id is also a generated test user's: which of the two a key sees is the point.
    users: LIVE_IDS.map((id, i) => ({ ...seedUser('tm', id, i + 1), email_address: `${id}@live.example` })),
  });
}

interface Server {
  url: string;
  close(): Promise<void>;
}

async function start(storage: Storage, options: Partial<MerchantApiOptions> = {}): Promise<Server> {
  const api = createMerchantApi({ storage, logger: silentLogger, ...options });
  const served = await serve(api, { port: 0, hostname: '127.0.0.1' });
  return { url: served.url, close: () => served.close() };
}

async function get(server: Server, path: string, headers: Record<string, string>) {
  const response = await fetch(`${server.url}${path}`, { headers });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: text === '' ? undefined : JSON.parse(text) };
}

async function post(server: Server, path: string, headers: Record<string, string>, body?: unknown) {
  const response = await fetch(`${server.url}${path}`, { method: 'POST', headers: { ...headers, ...(body !== undefined && { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, text, body: text === '' ? undefined : JSON.parse(text) };
}

/** Every user of a listing, page by page through `next_cursor`. */
async function allPages(server: Server, query: string, headers: Record<string, string>): Promise<{ shared_user_id: string }[]> {
  const users: { shared_user_id: string }[] = [];
  let cursor: string | null = null;
  do {
    const page = await get(server, `/merchant/users?limit=7&${query}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`, headers);
    expect(page.status, page.text).toBe(200);
    users.push(...page.body.data);
    cursor = page.body.next_cursor;
  } while (cursor !== null);
  return users;
}

function signed(server: Server, key: string, salt: string): string {
  const pairs: [string, string][] = [
    ['cp', 'tm'],
    ['ts', String(Math.floor(Date.now() / 1000))],
    ['salt', salt],
  ];
  const hmac = hmacSha224(key, signatureMessage('GET', `${server.url}/validatesignature`, pairs));
  return `${server.url}/validatesignature?${queryString([...pairs, ['hmac', hmac]])}`;
}

function suite(name: string, setup: () => Promise<{ storage: () => Storage; cleanup: () => Promise<void> }>, skip = false) {
  describe.skipIf(skip)(`test mode on ${name}, through a real server`, () => {
    let storage: Storage;
    let server: Server;
    let cleanup: () => Promise<void>;

    beforeAll(async () => {
      const made = await setup();
      cleanup = made.cleanup;
      storage = made.storage();
      server = await start(storage, { publicUrl: undefined });
      // A signature's ts is in whole seconds, and a request signed before the replay store began
      // (in the second the storage was made) is refused: the tests sign from the next second on.
      const started = Date.now();
      await vi.waitFor(() => expect(Math.floor(Date.now() / 1000) * 1000).toBeGreaterThan(started));
    });
    afterAll(async () => {
      await server?.close();
      await cleanup?.();
    });

    it('GET /merchant/keys shows each key\'s mode: the seed\'s test key is test, the plain one live', async () => {
      const keys = await get(server, '/merchant/keys', TEST);
      expect(keys.status).toBe(200);
      expect(keys.body.data.map((key: { name: string | null; mode: string }) => [key.name, key.mode])).toEqual([
        [null, 'live'],
        ['sandbox', 'test'],
      ]);
      expect(Object.keys(keys.body.data[0])).toEqual(['key_id', 'name', 'scopes', 'created_at', 'expires_at', 'last_used_at', 'allow_from', 'mode']);
    });

    it('a test key lists the generated dataset, every field type in it; a live key lists the live users only', async () => {
      const test = await get(server, '/merchant/users', TEST);
      expect(test.status).toBe(200);
      expect(test.body.data).toEqual(generateTestUsers('tm', 100).map(({ updated_at: _, ...record }) => record));
      const records = test.body.data as Record<string, string | null>[];
      expect(records.some((user) => user.state === null)).toBe(true);
      expect(records.some((user) => user.deactivated_at !== null)).toBe(true);
      expect(records.some((user) => /[^\x00-\x7f]/.test(`${user.first_name}${user.last_name}`))).toBe(true);
      expect(records.every((user) => /\.\d{6}\+00:00$/.test(user.date_joined!))).toBe(true);
      expect(records.some((user) => !user.date_joined!.endsWith('000+00:00'))).toBe(true);
      const live = await get(server, '/merchant/users', LIVE);
      expect(live.body.data.map((user: { shared_user_id: string }) => user.shared_user_id)).toEqual(LIVE_IDS);
      expect(live.body.data.every((user: { email_address: string }) => user.email_address.endsWith('@live.example'))).toBe(true);
    });

    it('one user: each key reads its own record of the same id, and 404 for the other mode\'s ids', async () => {
      const test = await get(server, '/merchant/users/test_user_00003', TEST);
      expect(test.body.data[0].email_address).toBe('test_user_00003@example.com');
      const live = await get(server, '/merchant/users/test_user_00003', LIVE);
      expect(live.body.data[0].email_address).toBe('test_user_00003@live.example');
      expect((await get(server, '/merchant/users/live-1', TEST)).status).toBe(404);
      expect((await get(server, '/merchant/users/test_user_00004', LIVE)).status).toBe(404);
    });

    it('pages, filters, orders and ETags work on the test dataset as on live data', async () => {
      const all = generateTestUsers('tm', 100);
      expect((await allPages(server, '', TEST)).map((user) => user.shared_user_id)).toEqual(all.map((user) => user.shared_user_id));
      const inactive = await allPages(server, 'active=false', TEST);
      expect(inactive.map((user) => user.shared_user_id)).toEqual(all.filter((user) => user.deactivated_at !== null).map((user) => user.shared_user_id));
      expect(inactive.map((user) => user.shared_user_id)).toContain('test_user_00002');
      const byJoined = await allPages(server, 'order=date_joined', TEST);
      const joined = byJoined.map((user) => (user as unknown as { date_joined: string }).date_joined);
      expect(joined).toEqual([...joined].sort());
      const page = await get(server, '/merchant/users/test_user_00001', TEST);
      const tag = page.headers.get('etag')!;
      expect(tag).toBeTruthy();
      const again = await fetch(`${server.url}/merchant/users/test_user_00001`, { headers: { ...TEST, 'if-none-match': tag } });
      expect(again.status).toBe(304);
      // The live record of the same path has another tag: nothing of one mode answers for the other.
      const liveTag = (await get(server, '/merchant/users/test_user_00003', LIVE)).headers.get('etag');
      expect(liveTag).not.toBe((await get(server, '/merchant/users/test_user_00003', TEST)).headers.get('etag'));
    });

    it('the simulator: test keys only; events change the dataset, show in the change feed and updated_since; reset restores it', async () => {
      const refused = await post(server, '/merchant/test/events', LIVE, { type: 'user.updated' });
      expect(refused.status).toBe(403);
      expect(refused.body.errors[0].code).toBe('test_key_required');
      expect((await post(server, '/merchant/test/reset', LIVE)).status).toBe(403);

      const before = await get(server, '/merchant/users?include_removed=true', TEST);
      const updated = await post(server, '/merchant/test/events', TEST, { type: 'user.updated', shared_user_id: 'test_user_00005' });
      expect(updated.status, updated.text).toBe(200);
      expect(updated.body.data).toHaveLength(1);
      expect(updated.body.data[0]).toMatchObject({ type: 'user.updated', data: { shared_user_id: 'test_user_00005' } });
      const since = updated.body.data[0].timestamp as string;

      const churn = await post(server, '/merchant/test/events', TEST, { scenario: 'churn' });
      expect(churn.status, churn.text).toBe(200);
      expect(churn.body.data.map((event: { type: string }) => event.type)).toEqual(['user.shared', 'user.updated', 'user.updated', 'user.deactivated', 'user.unshared']);
      const churned = churn.body.data[0].data.shared_user_id as string;
      expect(new Set(churn.body.data.map((event: { data: { shared_user_id: string } }) => event.data.shared_user_id))).toEqual(new Set([churned]));
      const stamps = churn.body.data.map((event: { timestamp: string }) => event.timestamp);
      expect(stamps).toEqual([...stamps].sort());
      expect(new Set(stamps).size).toBe(5);

      // The change feed since the update: the updated user, then the churned user's tombstone.
      const feed = await get(server, `/merchant/users?include_removed=true&updated_since=${encodeURIComponent(since)}`, TEST);
      expect(feed.status, feed.text).toBe(200);
      expect(feed.body.data).toEqual([
        expect.objectContaining({ shared_user_id: 'test_user_00005', updated_at: since }),
        { shared_user_id: churned, removed_at: stamps[4] },
      ]);
      // The live feed has none of it.
      const liveFeed = await get(server, `/merchant/users?include_removed=true&updated_since=${encodeURIComponent(since)}`, LIVE);
      expect(liveFeed.body.data).toEqual([]);
      expect((await get(server, '/merchant/users/test_user_00005', LIVE)).status).toBe(404);

      const unshared = await post(server, '/merchant/test/events', TEST, { type: 'user.unshared', shared_user_id: 'test_user_00001' });
      expect(unshared.status).toBe(200);
      expect((await get(server, '/merchant/users/test_user_00001', TEST)).status).toBe(404);
      const missing = await post(server, '/merchant/test/events', TEST, { type: 'user.updated', shared_user_id: 'test_user_00001' });
      expect(missing.status).toBe(404);
      const bad = await post(server, '/merchant/test/events', TEST, { type: 'user.exploded' });
      expect(bad.status).toBe(400);
      expect(bad.body.errors[0]).toMatchObject({ code: 'invalid_parameter', param: 'type' });

      expect((await post(server, '/merchant/test/reset', TEST)).status).toBe(204);
      expect(await get(server, '/merchant/users?include_removed=true', TEST)).toMatchObject({ status: 200, text: before.text });
      expect((await get(server, '/merchant/users', LIVE)).body.data.map((user: { shared_user_id: string }) => user.shared_user_id)).toEqual(LIVE_IDS);
    });

    it('/validatesignature: a test key\'s signature is valid, the same bytes; its salts are kept apart from live ones', async () => {
      const salt = `salt-${Math.random()}`;
      const live = await fetch(signed(server, LIVE_KEY, salt));
      const liveText = await live.text();
      expect(live.status).toBe(200);
      // The same salt again, signed by the test key: not a replay, as the test key's salts are its own.
      const test = await fetch(signed(server, TEST_KEY, salt));
      expect(test.status).toBe(200);
      expect(await test.text()).toBe(liveText);
      // Each key's replay is refused alike: the same answer as a live replay.
      const replay = await fetch(signed(server, TEST_KEY, salt));
      const liveReplay = await fetch(signed(server, LIVE_KEY, salt));
      expect(liveReplay.status).toBe(400);
      expect([replay.status, await replay.text()]).toEqual([liveReplay.status, await liveReplay.text()]);
    });

    it('the client SDK: a test key works unchanged, client.test.events and reset; a live key\'s client.test is refused', async () => {
      const client = createMerchantClient({ baseUrl: server.url, merchantId: 'tm', apiKey: TEST_KEY });
      const ids: string[] = [];
      for await (const user of client.users()) ids.push(user.shared_user_id);
      expect(ids).toHaveLength(100);
      expect((await client.user('test_user_00002')).deactivated_at).not.toBeNull();
      const events = await client.test.events({ scenario: 'churn' });
      expect(events.map((event) => event.type)).toEqual(['user.shared', 'user.updated', 'user.updated', 'user.deactivated', 'user.unshared']);
      const one = await client.test.events({ type: 'user.deactivated', sharedUserId: 'test_user_00001' });
      expect(one[0]!.data.deactivated_at).toBe(one[0]!.timestamp);
      await client.test.reset();
      expect((await client.user('test_user_00001')).deactivated_at).toBeNull();
      const live = createMerchantClient({ baseUrl: server.url, merchantId: 'tm', apiKey: LIVE_KEY });
      await expect(live.test.events({ type: 'user.updated' })).rejects.toMatchObject({ status: 403, code: 'test_key_required' });
      expect(await live.validateSignature()).toMatchObject({ is_valid: true });
      expect(await client.validateSignature()).toMatchObject({ is_valid: true });
    });

    it('labels test requests: "mode":"test" in the access log, mode="test" in merchant_api_requests_total', async () => {
      const { logger, access } = recordingLogger();
      const metrics = createMetrics({ processMetrics: false });
      const labelled = await start(storage, { logger, accessLog: true, hooks: [metrics.hooks] });
      try {
        await get(labelled, '/merchant/users?limit=1', TEST);
        await get(labelled, '/merchant/users?limit=1', LIVE);
        expect(access().map((line) => [line.status, line.mode])).toEqual([
          [200, 'test'],
          [200, undefined],
        ]);
        const scrape = await metrics.registry.metrics();
        expect(scrape).toContain('merchant_api_requests_total{route="/merchant/users",method="GET",status="200",mode="test"} 1');
        expect(scrape).toContain('merchant_api_requests_total{route="/merchant/users",method="GET",status="200",mode="live"} 1');
      } finally {
        await labelled.close();
      }
    });

    it('the webhook endpoints answer a test key with the test endpoints only (test-webhooks.test.ts delivers to them): none of the live ones', async () => {
      const listed = await get(server, '/merchant/webhooks', TEST);
      expect(listed.status, listed.text).toBe(200);
      expect(listed.body.data).toEqual([]);
      // An address refused for a test endpoint as for a live one: the URL rules are the same.
      const refused = await post(server, '/merchant/webhooks', TEST, { url: 'http://127.0.0.1/hook' });
      expect([refused.status, refused.body.errors[0].code]).toEqual([400, 'invalid_parameter']);
    });

    it('keys through the API: a live key makes a test key ("mode": "test") that reads the test dataset, a rotation keeps the mode, and a test key changes no key (501)', async () => {
      const made = await post(server, '/merchant/keys', LIVE, { name: 'sandbox 2', scopes: ['users:read', 'signature'], mode: 'test' });
      expect(made.status, made.text).toBe(201);
      const created = made.body.data[0];
      expect(created).toMatchObject({ mode: 'test', secret: expect.stringMatching(/^test_/) });
      const asCreated = basic('tm', created.secret);
      expect((await get(server, '/merchant/users/test_user_00001', asCreated)).status).toBe(200);
      expect((await get(server, '/merchant/users/live-1', asCreated)).status).toBe(404);
      const rotated = await post(server, `/merchant/keys/${created.key_id}/rotate`, LIVE, {});
      expect(rotated.status, rotated.text).toBe(200);
      const successor = rotated.body.data[0];
      expect(successor).toMatchObject({ mode: 'test', secret: expect.stringMatching(/^test_/) });
      expect((await get(server, '/merchant/users/test_user_00001', basic('tm', successor.secret))).status).toBe(200);
      // The seed's test key has every scope, keys:manage included: still, it creates, rotates, changes and revokes nothing.
      const refusals = [
        await post(server, '/merchant/keys', TEST, { scopes: ['users:read'] }),
        await post(server, `/merchant/keys/${successor.key_id}/rotate`, TEST, {}),
        await fetch(`${server.url}/merchant/keys/${successor.key_id}`, { method: 'PATCH', headers: { ...TEST, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'renamed' }) }),
        await fetch(`${server.url}/merchant/keys/${successor.key_id}`, { method: 'DELETE', headers: TEST }),
      ];
      expect(refusals.map((answer) => answer.status)).toEqual([501, 501, 501, 501]);
      const listed = await get(server, '/merchant/keys', LIVE);
      expect(listed.body.data.find((key: { key_id: string }) => key.key_id === successor.key_id)).toMatchObject({ name: 'sandbox 2', mode: 'test' });
      expect((await fetch(`${server.url}/merchant/keys/${successor.key_id}`, { method: 'DELETE', headers: LIVE })).status).toBe(204);
      // Test mode off: a live key cannot make a test key either.
      const off = await start(storage, { testMode: false });
      try {
        const refused = await post(off, '/merchant/keys', LIVE, { scopes: ['users:read'], mode: 'test' });
        expect([refused.status, refused.body.errors[0].code]).toEqual([403, 'test_mode_disabled']);
      } finally {
        await off.close();
      }
    });

    it('an Idempotency-Key sent with a test key is another key than the same text sent with a live key (the stored answers stay apart)', async () => {
      const shared = `idem-${Math.random().toString(36).slice(2)}`;
      const reset = await fetch(`${server.url}/merchant/test/reset`, { method: 'POST', headers: { ...TEST, 'idempotency-key': shared } });
      expect(reset.status).toBe(204);
      // One namespace for both would answer this 422 idempotency_mismatch (another path, another body).
      const made = await fetch(`${server.url}/merchant/keys`, { method: 'POST', headers: { ...LIVE, 'idempotency-key': shared, 'content-type': 'application/json' }, body: JSON.stringify({ scopes: ['users:read'] }) });
      const text = await made.text();
      expect(made.status, text).toBe(201);
      expect((await fetch(`${server.url}/merchant/keys/${JSON.parse(text).data[0].key_id}`, { method: 'DELETE', headers: LIVE })).status).toBe(204);
      const again = await fetch(`${server.url}/merchant/test/reset`, { method: 'POST', headers: { ...TEST, 'idempotency-key': shared } });
      expect([again.status, again.headers.get('idempotent-replayed')]).toEqual([204, 'true']);
    });

    it('test mode off: a test key is 403 test_mode_disabled everywhere, a live key answers as before', async () => {
      const off = await start(storage, { testMode: false });
      try {
        const users = await get(off, '/merchant/users', TEST);
        expect(users.status).toBe(403);
        expect(users.body.errors[0].code).toBe('test_mode_disabled');
        const signature = await fetch(signed(off, TEST_KEY, `salt-${Math.random()}`));
        expect(signature.status).toBe(403);
        expect(await signature.text()).toContain('Test mode is turned off');
        expect((await get(off, '/merchant/users', LIVE)).status).toBe(200);
      } finally {
        await off.close();
      }
    });
  });
}

suite('the memory storage', async () => {
  const memory = new MemoryStorage(seedDocument());
  return { storage: () => memory, cleanup: () => memory.close() };
});

let database: TestDatabase | undefined;
suite(
  'MySQL',
  async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, seedDocument());
    const mysql = new MysqlStorage({ db: database.db, masterKey: database.masterKey });
    return { storage: () => mysql, cleanup: async () => database!.drop() };
  },
  !available,
);
