/**
 * `throttle list|unblock` where the servers keep the blocks (docs/security.md#lifting-a-block):
 * two real servers (`dist/cli.js serve`) on one MariaDB database with REDIS_URL keep their
 * blocks in a real redis-server; the CLI, given the same variables, lists them there, lifts
 * them there (both servers answer again at once), and says which store. A block left in MySQL
 * from before Redis was added is listed and lifted too.
 */
import { sql } from 'kysely';
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic } from '../support/basic-auth.js';
import { inCi } from '../support/ci.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { CLEAN_ENV, ROOT, startServer, type ServerProcess } from '../support/processes.js';
import { redisAvailable, startRedis, type RedisProcess } from '../support/redis.js';
import { sleep } from '../support/sleep.js';

const available = (await mysqlAvailable()) && redisAvailable();
if (!available && inCi()) throw new Error('MariaDB and redis-server are required in CI.');

interface Run {
  code: number;
  out: string;
  err: string;
}

describe.skipIf(!available)('throttle list|unblock with REDIS_URL, two servers on MariaDB and Redis', () => {
  let database: TestDatabase;
  let redis: RedisProcess;
  let env: Record<string, string>;
  let servers: ServerProcess[] = [];
  let key = '';

  const cli = (args: string[], extra: Record<string, string> = {}): Promise<Run> =>
    new Promise((resolve) => {
      execFile(process.execPath, ['dist/cli.js', ...args], { cwd: ROOT, env: { ...process.env, ...CLEAN_ENV, ...env, ...extra } }, (error, stdout, stderr) => {
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout.trim(), err: stderr.trim() });
      });
    });
  /** Until `server` answers `status` with the shop's right key (a published change arrives within milliseconds; load may slow it). */
  const until = async (server: ServerProcess, status: number) => {
    for (let tries = 0; (await users(server.url, key)) !== status; tries++) {
      if (tries > 100) throw new Error(`${server.url} never answered ${status}`);
      await sleep(50);
    }
  };
  const users = async (base: string, merchantKey: string) => (await fetch(`${base}/merchant/users?limit=1`, { headers: basic('shop', merchantKey) })).status;

  beforeAll(async () => {
    database = await createTestDatabase();
    redis = await startRedis();
    env = { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText, REDIS_URL: redis.url };
    const added = await cli(['merchant', 'add', 'shop', '--json']);
    key = (JSON.parse(added.out) as { api_key: string }).api_key;
    const serverEnv = { ...env, AUTH_FAILURES_PER_MERCHANT: '3', AUTH_FAILURES_PER_ADDRESS: '1000', PUBLIC_URL: '' };
    servers = await Promise.all([startServer('node', 'dist/cli.js', serverEnv), startServer('node', 'dist/cli.js', serverEnv)]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await redis?.stop();
    await database?.drop();
  });

  it('lists a block the servers made in Redis, lifts it there, and both servers answer again at once', async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    for (let i = 0; i < 3; i++) expect(await users(a.url, 'wrong-key')).toBe(401);
    expect(await users(a.url, key)).toBe(429);
    await until(b, 429);

    const listed = await cli(['throttle', 'list', '--json']);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.out)).toEqual([expect.objectContaining({ scope: 'pair', address: '127.0.0.1', merchant_id: 'shop', blocks: 1, store: 'Redis (REDIS_URL)' })]);
    expect((await cli(['throttle', 'list'])).out).toMatch(/^ADDRESS\s+MERCHANT\s+BLOCKED UNTIL \(UTC\)\s+SECONDS LEFT\s+BLOCKS\s+STORE\n127\.0\.0\.1\s+shop\s.*Redis \(REDIS_URL\)$/);

    const lifted = await cli(['throttle', 'unblock', '--address', '127.0.0.1', '--merchant', 'shop']);
    expect(lifted.code).toBe(0);
    expect(lifted.out).toBe(
      'Lifted the block of merchant "shop" from address 127.0.0.1 in Redis (REDIS_URL), and its count starts again; every server drops it at once.\n' +
        'Nothing to lift in MySQL (DATABASE_URL): no failures are counted for merchant "shop" from address 127.0.0.1.',
    );
    for (const server of servers) await until(server, 200);
    expect(JSON.parse((await cli(['throttle', 'list', '--json'])).out)).toEqual([]);
    expect((await cli(['throttle', 'list'])).out).toBe('No blocks in force in Redis (REDIS_URL) nor in MySQL (DATABASE_URL).');
  }, 60_000);

  it('lifts an address with every merchant from it in Redis, and a block left in MySQL, each named', async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    for (let i = 0; i < 3; i++) expect(await users(b.url, 'wrong-key')).toBe(401);
    expect(await users(b.url, key)).toBe(429);
    const ends = Math.floor(Date.now() / 1000) + 600;
    await sql`INSERT INTO auth_failures (scope, address, merchant_id, failures, window_start, blocks, blocked_until, updated_at, expires_at)
      VALUES ('address', '127.0.0.1', '', 100, ${ends - 3600}, 1, ${ends}, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)`.execute(database.db);
    const listed = JSON.parse((await cli(['throttle', 'list', '--json'])).out) as { store: string; scope: string }[];
    expect(listed.map((block) => [block.store, block.scope]).sort()).toEqual([
      ['MySQL (DATABASE_URL)', 'address'],
      ['Redis (REDIS_URL)', 'pair'],
    ]);

    const lifted = await cli(['throttle', 'unblock', '--address', '127.0.0.1']);
    expect(lifted.code).toBe(0);
    expect(lifted.out.split('\n')).toEqual([
      'Lifted the block of address 127.0.0.1 (and every merchant from it) in Redis (REDIS_URL), and its count starts again; every server drops it at once.',
      'Lifted the block of address 127.0.0.1 (and every merchant from it) in MySQL (DATABASE_URL), and its count starts again; every server drops it within about a second.',
    ]);
    for (const server of [a, b]) await until(server, 200);
    expect(JSON.parse((await cli(['throttle', 'list', '--json'])).out)).toEqual([]);
  }, 60_000);

  it('acts on Redis alone without DATABASE_URL (the memory storage with REDIS_URL)', async () => {
    const listed = await cli(['throttle', 'list'], { DATABASE_URL: '' });
    expect(listed).toMatchObject({ code: 0, out: 'No blocks in force in Redis (REDIS_URL).' });
    expect((await cli(['throttle', 'unblock', '--address', '192.0.2.1'], { DATABASE_URL: '' })).out).toBe('Nothing to lift in Redis (REDIS_URL): no failures are counted for address 192.0.2.1 (and every merchant from it).');
  }, 60_000);
});
