/** Every MySQL connection of a server is set up to stop statements itself when the query timeout passes. */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createMysqlKysely } from '../src/storage/mysql/index.js';
import { MYSQL_URL, mysqlAvailable } from './support/mysql.js';

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
});
