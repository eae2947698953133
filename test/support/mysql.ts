/**
 * Real MariaDB for the MySQL suites: each caller gets a fresh database
 * `merchant_api_test_<random>` on `MYSQL_URL`, dropped afterwards. When no
 * server answers: in CI (any `CI` but empty, `false` or `0`: test/support/ci.ts) the suites fail; locally they skip loudly.
 */
import { randomBytes } from 'node:crypto';
import { createConnection } from 'mysql2/promise';
import { inCi } from './ci.js';
import type { Kysely } from 'kysely';
import { createMysqlKysely, generateMasterKey, migrateToLatest, parseMasterKey, type MerchantApiDatabase, type MysqlKyselyOptions } from '../../src/storage/mysql/index.js';

export const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

/** True when MariaDB answers at MYSQL_URL; in CI a silent server throws instead. */
export async function mysqlAvailable(): Promise<boolean> {
  try {
    const connection = await createConnection({ uri: MYSQL_URL, connectTimeout: 2000 });
    await connection.end();
    return true;
  } catch (error) {
    if (inCi()) throw new Error(`MySQL suites must run in CI, but nothing answers at ${MYSQL_URL}: ${(error as Error).message}`);
    console.warn(
      [
        '',
        '!!! MySQL suites SKIPPED: nothing answers at ' + MYSQL_URL,
        '!!! Start MariaDB with: start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd',
        '!!! or set MYSQL_URL=mysql://user:password@host:port/database',
        '',
      ].join('\n'),
    );
    return false;
  }
}

/** The URL of `database` on the same server as MYSQL_URL. */
export function urlOf(database: string, base = MYSQL_URL): string {
  const url = new URL(base);
  url.pathname = `/${database}`;
  return url.toString();
}

export interface TestDatabase {
  name: string;
  url: string;
  /** A Kysely on it (created by createMysqlKysely), already migrated unless `migrate: false`. */
  db: Kysely<MerchantApiDatabase>;
  /** A fresh master key for this database, as text and parsed. */
  masterKeyText: string;
  masterKey: ReturnType<typeof parseMasterKey>;
  /** Destroys `db` and drops the database. */
  drop(): Promise<void>;
}

/** Creates a fresh database (and migrates it unless told not to). */
export async function createTestDatabase(options: { migrate?: boolean; kysely?: MysqlKyselyOptions; prefix?: string } = {}): Promise<TestDatabase> {
  const name = `${options.prefix ?? 'merchant_api_test'}_${randomBytes(6).toString('hex')}`;
  const admin = await createConnection({ uri: MYSQL_URL });
  await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  await admin.end();
  const url = urlOf(name);
  const db = createMysqlKysely(url, options.kysely);
  if (options.migrate !== false) await migrateToLatest(db);
  const masterKeyText = generateMasterKey();
  return {
    name,
    url,
    db,
    masterKeyText,
    masterKey: parseMasterKey(masterKeyText),
    async drop() {
      await db.destroy().catch(() => undefined);
      const connection = await createConnection({ uri: MYSQL_URL });
      await connection.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await connection.end();
    },
  };
}
