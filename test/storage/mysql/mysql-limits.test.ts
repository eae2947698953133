/**
 * MySQL upkeep under load: statements stopped by the server at the query
 * timeout, and salt pruning that keeps pace with new salts.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createMysqlKysely, MysqlStorage } from '../../../src/storage/mysql/index.js';
import { createTestDatabase, MYSQL_URL, mysqlAvailable } from '../../support/mysql.js';
import { sleep } from '../../support/sleep.js';

const available = await mysqlAvailable();

describe.skipIf(!available)('MySQL session limits', () => {
  it('sets the server-side statement time limit to the query timeout, and none without one', async () => {
    const limited = createMysqlKysely(MYSQL_URL, { queryTimeout: 1500 });
    const unlimited = createMysqlKysely(MYSQL_URL, { queryTimeout: 0 });
    try {
      const read = async (db: typeof limited) => Number((await sql<{ v: string }>`SELECT @@SESSION.max_statement_time AS v`.execute(db)).rows[0]!.v);
      expect(await read(limited)).toBe(1.5);
      expect(await read(unlimited)).toBe(0);
    } finally {
      await limited.destroy();
      await unlimited.destroy();
    }
  });

  it('prunes a backlog larger than one run with the next runs at once, not one run per interval', async () => {
    const database = await createTestDatabase();
    const storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey, saltPruneIntervalMs: 60_000, saltPrune: { batchSize: 10, maxBatches: 2 } });
    try {
      const count = async () => Number((await sql<{ n: string }>`SELECT COUNT(*) AS n FROM used_salts`.execute(database.db)).rows[0]!.n);
      // 100 salts that expired long ago: five runs of 20.
      const seeding = new MysqlStorage({ db: database.db, masterKey: database.masterKey, saltPruneIntervalMs: 0 });
      for (let i = 0; i < 100; i++) await seeding.recordSalt({ merchantId: 'm', salt: `old-${i}`, expiresAt: 1000, now: 900 });
      expect(await count()).toBe(100);
      for (let i = 0; i < 40 && (await count()) > 1; i++) {
        await storage.recordSalt({ merchantId: 'm', salt: `new-${i}`, expiresAt: 10_000_000_000, now: 2_000_000_000 });
        await sleep(20);
      }
      // Only the new salts are left, well before the 60 s interval could have passed.
      expect(Number((await sql<{ n: string }>`SELECT COUNT(*) AS n FROM used_salts WHERE salt LIKE 'old-%'`.execute(database.db)).rows[0]!.n)).toBe(0);
    } finally {
      await storage.close();
      await database.drop();
    }
  });
});
