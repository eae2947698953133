/**
 * Salts on MySQL outlive the instance that recorded them (docs/protocol.md#signing): a salt
 * recorded through one MySQL storage is a replay through a second storage on the same database,
 * opened after the first was closed (a restart, a deploy) or beside it (another instance), with a
 * pool of its own each time, so nothing of the first instance's memory can answer for it; and
 * through a storage in another process (the built package), so nothing of this process's can
 * either. Through the handler on the storage `serve` opens (`openMysqlStorage`) too: a signed URL
 * accepted before a restart is refused after it.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../../src/api.js';
import { openMysqlStorage } from '../../../src/cli/commands/mysql.js';
import { readMysqlConfig } from '../../../src/cli/config.js';
import { silentLogger } from '../../../src/observe/logger.js';
import { createMysqlKysely, importSeed, MysqlStorage } from '../../../src/storage/mysql/index.js';
import { inCi } from '../../support/ci.js';
import { captureIo } from '../../support/recording.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../../support/mysql.js';
import { ROOT, runProcess } from '../../support/processes.js';
import { signedUrl } from '../../support/test-signer.js';

const available = await mysqlAvailable();
if (!available && inCi()) throw new Error('MariaDB is required in CI (127.0.0.1:3306).');

describe.skipIf(!available)('salts on MySQL across a restart', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, { merchants: [{ id: 'shop', status: 'active', keys: ['shop-key'] }], users: [] });
  });
  afterAll(async () => {
    await database?.drop();
  });

  /** A storage on a pool of its own, as a fresh process would open it. */
  const fresh = () => new MysqlStorage({ db: createMysqlKysely(database.url), masterKey: database.masterKey, destroyOnClose: true });
  const now = Math.floor(Date.now() / 1000);
  const record = (salt: string) => ({ merchantId: 'shop', salt, expiresAt: now + 300, now, ts: now });

  it('a salt recorded through one storage is a replay through a second one, opened after the first closed or beside it', async () => {
    const first = fresh();
    expect(await first.recordSalt(record('before-restart'))).toBe(true);
    expect(await first.recordSalt(record('before-restart'))).toBe(false);
    await first.close();

    const second = fresh();
    const beside = fresh();
    try {
      expect(await second.recordSalt(record('before-restart'))).toBe(false);
      // Either way round, the instance running beside it too.
      expect(await second.recordSalt(record('after-restart'))).toBe(true);
      expect(await beside.recordSalt(record('after-restart'))).toBe(false);
      expect(await beside.recordSalt(record('beside'))).toBe(true);
      expect(await second.recordSalt(record('beside'))).toBe(false);
      // The same salt for another merchant is another request.
      expect(await second.recordSalt({ ...record('before-restart'), merchantId: 'other' })).toBe(true);
    } finally {
      await Promise.all([second.close(), beside.close()]);
    }
  });

  it('a salt recorded in one process is a replay in another, both ways round', async () => {
    /** Records `salts` through a MySQL storage of the built package in a process of its own; its answers. */
    const inAnotherProcess = async (salts: string[]): Promise<boolean[]> => {
      const script = `
        import { createMysqlKysely, MysqlStorage, parseMasterKey } from ${JSON.stringify(join(ROOT, 'dist/storage/mysql.js'))};
        const storage = new MysqlStorage({ db: createMysqlKysely(process.env.DATABASE_URL), masterKey: parseMasterKey(process.env.MASTER_KEY), destroyOnClose: true });
        const answers = [];
        for (const salt of ${JSON.stringify(salts)}) answers.push(await storage.recordSalt({ ...${JSON.stringify(record(''))}, salt }));
        await storage.close();
        console.log(JSON.stringify(answers));`;
      const { code, output } = await runProcess(process.execPath, ['--input-type=module', '-e', script], { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText });
      expect(code, output).toBe(0);
      return JSON.parse(output.trim().split('\n').at(-1)!) as boolean[];
    };
    const here = fresh();
    try {
      expect(await here.recordSalt(record('recorded-here'))).toBe(true);
      expect(await inAnotherProcess(['recorded-here', 'recorded-there', 'recorded-there'])).toEqual([false, true, false]);
      expect(await here.recordSalt(record('recorded-there'))).toBe(false);
    } finally {
      await here.close();
    }
  });

  it('a signed URL accepted before a restart of the server\'s storage is refused after it, as a replay', async () => {
    const env = { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText };
    const start = async () => {
      const io = captureIo(env);
      const storage = await openMysqlStorage(readMysqlConfig(env), io, silentLogger);
      expect(io.errors).toEqual([]);
      return { storage, api: createMerchantApi({ storage, logger: silentLogger, throttle: false, publicUrl: 'http://shop.test' }) };
    };
    const url = signedUrl({ secret: 'shop-key', url: 'http://shop.test/validatesignature', cp: 'shop', ts: String(now) });

    const before = await start();
    expect(await (await before.api.fetch(new Request(url))).json()).toEqual({ status: 'ok', is_valid: true });
    await before.storage.close();

    const after = await start();
    try {
      const replayed = await after.api.fetch(new Request(url));
      expect(replayed.status).toBe(400);
      expect(await replayed.json()).toEqual({ status: 'error', message: 'This salt was already used: every request needs a new salt.', is_valid: false });
      const another = signedUrl({ secret: 'shop-key', url: 'http://shop.test/validatesignature', cp: 'shop', ts: String(now) });
      expect(await (await after.api.fetch(new Request(another))).json()).toEqual({ status: 'ok', is_valid: true });
    } finally {
      await after.storage.close();
    }
  });
});
