/**
 * `merchant-api serve` with REDIS_URL, at start and in front of MySQL, as
 * real processes against real servers (docs/scaling.md): a Redis that could
 * evict salts (`maxmemory-policy allkeys-lru`) is refused at start on Node,
 * Bun and Deno, naming maxmemory-policy; a Redis that refuses CONFIG is
 * refused with how to check the policy, and accepted with
 * REDIS_ASSUME_NOEVICTION=true; two instances on one MySQL database and one
 * Redis refuse at B a URL A accepted (no salt written to MySQL), and refuse
 * at B the 11th request after 10 wrong keys at A.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { signUrl } from '../../../src/signing/index.js';
import { importSeed } from '../../../src/storage/mysql/index.js';
import { basic } from '../../support/basic-auth.js';
import { send } from '../../support/http-client.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../../support/mysql.js';
import { CLEAN_ENV, CLI, RUNTIMES, runProcess, runtimeCommand, startServer, type ServerProcess } from '../../support/processes.js';
import { redisAvailable, startRedis, useRedis } from '../../support/redis.js';
import { largeSeed, MERCHANTS, writeSeed } from '../../support/seeds.js';

const available = redisAvailable();
const mysql = await mysqlAvailable();
const { main } = MERCHANTS;

describe.skipIf(!available)('a Redis that may evict salts is refused at start', () => {
  let seed: { path: string; remove(): void };
  beforeAll(() => {
    seed = writeSeed(largeSeed(1));
  });
  afterAll(() => seed?.remove());

  for (const runtime of RUNTIMES) {
    it(`refuses maxmemory-policy allkeys-lru on ${runtime}, exit 2 naming maxmemory-policy`, async () => {
      const redis = await startRedis(['--maxmemory-policy', 'allkeys-lru', '--requirepass', 'hunter2']);
      try {
        const [command, args] = runtimeCommand(runtime, CLI[runtime], ['serve']);
        const { code, output } = await runProcess(command, args, { ...CLEAN_ENV, SEED_FILE: seed.path, REDIS_URL: `redis://:hunter2@127.0.0.1:${redis.port}` });
        expect(output.trim()).toBe(
          'Refusing to start: REDIS_URL: maxmemory-policy is allkeys-lru on a master, and salts could be evicted, letting replays through; set maxmemory-policy to noeviction.',
        );
        expect(output).not.toContain('hunter2');
        expect(code).toBe(2);
      } finally {
        await redis.stop();
      }
    });
  }

  it('refuses a Redis that refuses CONFIG, saying how to check, and starts with REDIS_ASSUME_NOEVICTION=true', async () => {
    const redis = await startRedis(['--rename-command', 'CONFIG', '']);
    try {
      const env = { ...CLEAN_ENV, SEED_FILE: seed.path, REDIS_URL: redis.url };
      const { code, output } = await runProcess(process.execPath, [CLI.node, 'serve'], env);
      expect(output.trim()).toMatch(/^Refusing to start: REDIS_URL: this Redis refuses CONFIG GET maxmemory-policy .*redis-cli INFO memory.*REDIS_ASSUME_NOEVICTION=true/);
      expect(code).toBe(2);
      const server = await startServer('node', CLI.node, { ...env, REDIS_ASSUME_NOEVICTION: 'true', ACCESS_LOG: 'false' }, ['serve']);
      try {
        const url = signUrl(main.keys[0], `${server.url}/validatesignature`, { cp: main.id });
        expect((await send(url)).body).toBe('{"status":"ok","is_valid":true}');
        expect((await send(url)).status).toBe(400);
      } finally {
        await server.stop();
      }
    } finally {
      await redis.stop();
    }
  });
});

describe.skipIf(!available || !mysql)('two instances on MySQL with Redis', () => {
  const redis = useRedis();
  let db: TestDatabase;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    await importSeed(db.db, db.masterKey, largeSeed(3));
    for (let i = 0; i < 2; i++) {
      servers.push(await startServer('node', CLI.node, { DATABASE_URL: db.url, MASTER_KEY: db.masterKeyText, REDIS_URL: redis.url, PUBLIC_URL: 'http://merchant-api.test', ACCESS_LOG: 'false', FAIR_SHARE: 'false' }, ['serve']));
    }
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await db?.drop();
  });

  it('says so, refuses at B a URL A accepted, and writes no salt to MySQL', async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    expect(a.output()).toMatch(/storage: MySQL; salts and throttle on Redis\)/);
    // The replay store begins at the first signed request (its life markers): a URL signed in an
    // earlier second is refused, so each instance first validates a throwaway URL, signed afresh at
    // each try, and the URLs below are signed after that.
    for (const server of [a, b]) {
      await vi.waitFor(async () => {
        const warm = new URL(signUrl(main.keys[0], 'http://merchant-api.test/validatesignature', { cp: main.id }));
        expect((await send(`${server.url}${warm.pathname}${warm.search}`)).status).toBe(200);
      });
    }
    for (let i = 0; i < 5; i++) {
      const url = new URL(signUrl(main.keys[0], 'http://merchant-api.test/validatesignature', { cp: main.id }));
      const at = (server: ServerProcess) => send(`${server.url}${url.pathname}${url.search}`);
      expect((await at(a)).body).toBe('{"status":"ok","is_valid":true}');
      const again = await at(b);
      expect(again.status).toBe(400);
      expect(again.body).toMatch(/This salt was already used/);
    }
    // The replays were failed authentications at B (docs/security.md#only-a-whole-success-is-a-success): a whole
    // success there ends the count they made, which the next test's 10 wrong keys would otherwise add to.
    const fresh = new URL(signUrl(main.keys[0], 'http://merchant-api.test/validatesignature', { cp: main.id }));
    expect((await send(`${servers[1]!.url}${fresh.pathname}${fresh.search}`)).status).toBe(200);
    const { n } = await db.db.selectFrom('used_salts').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    expect(Number(n)).toBe(0);
  });

  it('refuses at B the 11th request after 10 wrong keys at A', async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    for (let i = 0; i < 10; i++) expect((await send(`${a.url}/merchant/users?limit=1`, { headers: basic(main.id, `wrong-${i}`) })).status).toBe(401);
    const eleventh = await send(`${b.url}/merchant/users?limit=1`, { headers: basic(main.id, main.keys[0]) });
    expect(eleventh.status).toBe(429);
    expect(Number(eleventh.headers['retry-after'])).toBeGreaterThan(0);
  });
});
