/**
 * docs/protocol.md#failures for real: the connection to MariaDB is cut by a TCP proxy.
 * While it is down or hanging, every endpoint answers 503 in its own JSON
 * shape within the bounded time and /readyz is 503; once it is back, service
 * resumes by itself, with no restart of anything.
 */
import { createConnection } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantClient, type RetryInfo } from '../../../src/client/index.js';
import { createMerchantApi, silentLogger, type MerchantApi } from '../../../src/index.js';
import { signUrl } from '../../../src/signing/index.js';
import { createMysqlKysely, importSeed, MysqlStorage } from '../../../src/storage/mysql/index.js';
import { createTestDatabase, MYSQL_URL, mysqlAvailable, urlOf, type TestDatabase } from '../../support/mysql.js';
import { basic } from '../../support/basic-auth.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { user } from '../../support/seeds.js';
import { sleep } from '../../support/sleep.js';
import { recordingLogger } from '../../support/recording.js';

const available = await mysqlAvailable();
const BASE = 'http://merchant-api.test';
const STORAGE_TIMEOUT = 1500;
const auth = basic('shop', 'shop-key');

describe.skipIf(!available)('MySQL cut off behind a TCP proxy', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let storage: MysqlStorage;
  let api: MerchantApi;

  const get = async (path: string, headers: Record<string, string> = auth) => {
    const started = performance.now();
    const response = await api.fetch(new Request(path.startsWith('http') ? path : `${BASE}${path}`, { headers }));
    return { response, ms: performance.now() - started, body: await response.json() };
  };
  const signed = () => signUrl('shop-key', `${BASE}/validatesignature`, { cp: 'shop' });

  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, {
      merchants: [{ id: 'shop', status: 'active', keys: ['shop-key'] }],
      users: [user('shop', 'u-1'), user('shop', 'u-2')],
    });
    const target = new URL(MYSQL_URL);
    proxy = new TcpProxy(target.hostname, Number(target.port || 3306));
    await proxy.start();
    const proxied = new URL(urlOf(database.name));
    proxied.hostname = '127.0.0.1';
    proxied.port = String(proxy.port);
    // Like `serve`: connect and query timeouts at the storage deadline; a short key cache so the cut shows.
    const db = createMysqlKysely(proxied.toString(), { connectTimeout: STORAGE_TIMEOUT, queryTimeout: STORAGE_TIMEOUT });
    storage = new MysqlStorage({ db, masterKey: database.masterKey, keyCacheTtlMs: 0, destroyOnClose: true });
    api = createMerchantApi({ storage, storageTimeout: STORAGE_TIMEOUT, logger: silentLogger });
  });
  afterAll(async () => {
    await proxy?.stop();
    await storage?.close();
    await database?.drop();
  });

  const expectServing = async () => {
    expect((await get('/readyz')).response.status).toBe(200);
    expect((await get('/merchant/users')).body.data).toHaveLength(2);
    expect((await get('/merchant/users/u-1')).response.status).toBe(200);
    expect((await get(signed(), {})).body).toEqual({ status: 'ok', is_valid: true });
  };

  /** Every 503: Retry-After, the generic message in the endpoint's shape, nothing of the operator's message. */
  const expectGeneric503 = (response: Response, body: unknown, path: string) => {
    expect(response.status, path).toBe(503);
    expect(response.headers.get('retry-after'), path).toBe('1');
    const generic = 'The storage is unavailable; try again shortly.';
    if (path.includes('validatesignature')) expect(body).toEqual({ status: 'error', message: generic, is_valid: false });
    else if (path !== '/readyz') expect(body).toEqual({ status: 'error', data: [], errors: [{ code: 'storage_unavailable', message: generic }] });
    expect(JSON.stringify(body)).not.toMatch(/MySQL|E[A-Z]{3,}|PROTOCOL/);
  };

  const expectUnavailable = async () => {
    for (const path of ['/readyz', '/merchant/users', '/merchant/users?limit=1', '/merchant/users/u-1']) {
      const { response, ms, body } = await get(path);
      expect(response.status, path).toBe(503);
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(ms, path).toBeLessThan(STORAGE_TIMEOUT + 1000);
      expectGeneric503(response, body, path);
    }
    const { response, ms, body } = await get(signed(), {});
    expect(ms).toBeLessThan(STORAGE_TIMEOUT + 1000);
    expectGeneric503(response, body, '/validatesignature');
  };

  it('serves through the proxy', expectServing);

  it('answers 503 quickly while MySQL is down, and the first request after it is back succeeds', async () => {
    await proxy.stop();
    await expectUnavailable();
    await proxy.start();
    // The very next request: dead pool connections were dropped, not reused.
    expect((await get('/merchant/users')).response.status).toBe(200);
    await expectServing();
  });

  it('answers 503 within the deadline while MySQL hangs, and recovers without a restart', async () => {
    // Warm the pool to all its connections, so the hang catches live ones, not only new ones.
    await Promise.all(Array.from({ length: 30 }, () => get('/merchant/users/u-1')));
    proxy.hang();
    await expectUnavailable();
    // More concurrent requests than the pool has connections: every connection gets stuck.
    const stuck = await Promise.all(Array.from({ length: 20 }, () => get('/merchant/users/u-1')));
    expect(new Set(stuck.map((r) => r.response.status))).toEqual(new Set([503]));
    expect(Math.max(...stuck.map((r) => r.ms))).toBeLessThan(STORAGE_TIMEOUT + 1000);
    // Same sockets, nothing reset: only the pool's query timeout can retire the connections the hang broke.
    proxy.resume();
    const started = performance.now();
    let status = 0;
    while (performance.now() - started < 3 * STORAGE_TIMEOUT) {
      status = (await get('/readyz')).response.status;
      if (status === 200) break;
    }
    expect(status).toBe(200);
    await expectServing();
  }, 30_000);

  it('survives repeated cuts under concurrent load', async () => {
    for (let round = 0; round < 3; round++) {
      await proxy.stop();
      const during = await Promise.all(Array.from({ length: 20 }, () => get('/merchant/users/u-2')));
      expect(new Set(during.map((r) => r.response.status))).toEqual(new Set([503]));
      await proxy.start();
      const after = await Promise.all(Array.from({ length: 20 }, () => get('/merchant/users/u-2')));
      expect(new Set(after.map((r) => r.response.status))).toEqual(new Set([200]));
    }
  }, 30_000);

  it('a connection killed mid-query (KILL CONNECTION) is the generic 503 with Retry-After; only the operator event names the driver code', async () => {
    const { logger, lines } = recordingLogger();
    const seen: { onError: unknown[]; onFinish: unknown[] } = { onError: [], onFinish: [] };
    const hooks = { onError: (_: unknown, error: unknown) => void seen.onError.push((error as { code?: unknown }).code), onFinish: (ctx: { errorCode?: string }) => void seen.onFinish.push(ctx.errorCode) };
    const killing = createMerchantApi({ storage, storageTimeout: 10_000, logger, hooks, throttle: false });
    const admin = await createConnection({ uri: urlOf(database.name) });
    try {
      for (const [path, headers] of [['/merchant/users/u-1', auth], [signed(), {}]] as const) {
        // The merchant read waits for the table lock: the statement is in flight on a pool connection when it is killed.
        await admin.query('LOCK TABLES merchants WRITE, merchant_keys WRITE');
        const answer = killing.fetch(new Request(path.startsWith('http') ? path : `${BASE}${path}`, { headers }));
        let victim: number | undefined;
        for (let tries = 0; victim === undefined && tries < 500; tries++) {
          const [rows] = await admin.query('SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() AND INFO LIKE ?', [database.name, '%merchants%']);
          victim = (rows as { ID: number }[])[0]?.ID;
          if (victim === undefined) await sleep(10);
        }
        expect(victim, 'the merchant read waiting for the lock').toBeDefined();
        await admin.query(`KILL CONNECTION ${Number(victim)}`);
        const response = await answer;
        await admin.query('UNLOCK TABLES');
        expectGeneric503(response, await response.json(), path);
      }
    } finally {
      await admin.end();
    }
    const events = lines.filter((line) => line.event === 'storage_unavailable');
    expect(events).toHaveLength(2);
    for (const event of events) expect(event.code).toMatch(/^(PROTOCOL_CONNECTION_LOST|ER_CONNECTION_KILLED)$/);
    const access = lines.filter((line) => line.event === 'request');
    expect(access.map((line) => [line.status, line.code])).toEqual([[503, 'storage_unavailable'], [503, 'storage_unavailable']]);
    expect(seen).toEqual({ onError: ['storage_unavailable', 'storage_unavailable'], onFinish: ['storage_unavailable', 'storage_unavailable'] });
    expect(JSON.stringify(lines)).not.toContain('MySQL merchant read failed');
    expect((await get('/merchant/users/u-1')).response.status).toBe(200);
  });

  it("the client waits the 503's Retry-After, and its retry succeeds once MySQL is back", async () => {
    const retries: RetryInfo[] = [];
    const client = createMerchantClient({
      baseUrl: BASE,
      merchantId: 'shop',
      apiKey: 'shop-key',
      fetch: (input, init) => api.fetch(new Request(input, init)),
      retries: {
        onRetry: (info) => {
          retries.push(info);
          // Back before the wait is over: the retry the Retry-After asked for is the one that succeeds.
          void proxy.start();
        },
      },
    });
    await proxy.stop();
    const user = await client.user('u-1');
    expect(user.shared_user_id).toBe('u-1');
    expect(retries.map((r) => [r.status, r.delayMs])).toEqual([[503, 1000]]);
  });
});
