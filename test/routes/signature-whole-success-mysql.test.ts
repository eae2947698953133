/**
 * Only a whole success is a success with the throttle shared on MySQL
 * (docs/security.md#only-a-whole-success-is-a-success): two instances on one
 * real MariaDB database; 9 wrong signatures on one, a captured expired URL
 * on the other, and the pair is blocked on both (the captured URL was a
 * shared failure, not a shared reset).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { createMysqlKysely, importSeed, MysqlStorage } from '../../src/storage/mysql/index.js';
import { basic, NOW, NOW_MS, ORIGIN, signedUrl } from '../support/api.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { contractSeed } from '../support/seeds.js';

const available = await mysqlAvailable();

describe.skipIf(!available)('a captured URL on MySQL, two instances', () => {
  let database: TestDatabase;
  const open: MysqlStorage[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, contractSeed());
  });
  afterAll(async () => {
    await Promise.all(open.map((storage) => storage.close()));
    await database?.drop();
  });

  function instance() {
    const storage = new MysqlStorage({ db: createMysqlKysely(database.url, { connectTimeout: 1000, queryTimeout: 1000 }), masterKey: database.masterKey, destroyOnClose: true });
    open.push(storage);
    const api = createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, accessLog: false, tracing: false });
    return (url: string, headers: Record<string, string> = {}) => api.fetch(new Request(url.startsWith('http') ? url : `${ORIGIN}${url}`, { headers }), { clientAddress: '203.0.113.40' }).then((response) => response.status);
  }

  it('9 wrong signatures on one instance and an expired URL on the other block the pair on both', async () => {
    const [a, b] = [instance(), instance()];
    for (let i = 0; i < 9; i++) expect(await a(signedUrl({ key: `wrong-${i}` }))).toBe(400);
    expect(await b(signedUrl({ ts: NOW - 1000 }))).toBe(400);
    // The probe names m1 with an empty key: a blocked pair refuses it first; otherwise it is a malformed 401 that counts
    // for the address only (at most 2 × 12 probes here, far below the address's 100: it is the pair that is blocked).
    for (const one of [b, a]) await vi.waitFor(async () => expect(await one('/merchant/users', basic('m1', ''))).toBe(429), { timeout: 6000, interval: 500 });
    expect(await a(signedUrl())).toBe(429);
  });
});
