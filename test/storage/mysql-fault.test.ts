/**
 * docs/protocol.md#failures for real: the connection to MariaDB is cut by a TCP proxy.
 * While it is down or hanging, every endpoint answers 503 in its own JSON
 * shape within the bounded time and /readyz is 503; once it is back, service
 * resumes by itself, with no restart of anything.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi, silentLogger, type MerchantApi } from '../../src/index.js';
import { signUrl } from '../../src/signing/index.js';
import { createMysqlKysely, importSeed, MysqlStorage } from '../../src/storage/mysql/index.js';
import { createTestDatabase, MYSQL_URL, mysqlAvailable, urlOf, type TestDatabase } from '../support/mysql.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { user } from '../support/seeds.js';

const available = await mysqlAvailable();
const BASE = 'http://merchant-api.test';
const STORAGE_TIMEOUT = 1500;
const auth = { authorization: `Basic ${Buffer.from('shop:shop-key').toString('base64')}` };

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

  const expectUnavailable = async () => {
    for (const path of ['/readyz', '/merchant/users', '/merchant/users?limit=1', '/merchant/users/u-1']) {
      const { response, ms, body } = await get(path);
      expect(response.status, path).toBe(503);
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(ms, path).toBeLessThan(STORAGE_TIMEOUT + 1000);
      if (path !== '/readyz') expect(body).toMatchObject({ status: 'error', data: [], errors: [{ code: 'storage_unavailable' }] });
    }
    const { response, ms, body } = await get(signed(), {});
    expect(response.status).toBe(503);
    expect(ms).toBeLessThan(STORAGE_TIMEOUT + 1000);
    expect(body).toMatchObject({ status: 'error', is_valid: false, message: expect.any(String) });
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
});
