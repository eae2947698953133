/**
 * `merchant-api/client` against the standalone server on the MySQL storage,
 * on Node, Bun and Deno: the conformance seed imported into a fresh MariaDB
 * database, three servers on it, and test/suites/client-suite.ts against each.
 * Skips locally without MariaDB; in CI (`CI` set) a missing MariaDB fails
 * (test/support/mysql.ts).
 */
import { afterAll, beforeAll, describe } from 'vitest';
import { importSeed } from '../../src/storage/mysql/index.js';
import { describeClientSuite } from '../suites/client-suite.js';
import { CLI, RUNTIMES, startServer, type ServerProcess } from '../support/processes.js';
import { conformanceSeed } from '../support/seeds.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';

const available = await mysqlAvailable();

describe.skipIf(!available)('merchant-api/client against MySQL-backed servers', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase({ prefix: 'merchant_api_client' });
    await importSeed(database.db, database.masterKey, conformanceSeed());
  });
  afterAll(async () => {
    await database?.drop();
  });

  for (const runtime of RUNTIMES) {
    describe(`on ${runtime}`, () => {
      let server: ServerProcess | undefined;
      beforeAll(async () => {
        server = await startServer(runtime, CLI[runtime], { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText, KEY_CACHE_TTL: '0', WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_HTTP: 'true' }, ['serve']);
      });
      afterAll(async () => {
        await server?.stop();
      });
      describeClientSuite({
        baseUrl: () => {
          if (!server) throw new Error('the server has not started');
          return server.url;
        },
      });
    });
  }
});
