/**
 * `merchant-api serve` with REDIS_URL, as real processes on Node, Bun and
 * Deno against a real redis-server (docs/scaling.md): ioredis runs on all
 * three; one server of each runtime, on the memory storage, share the salts
 * (a signed URL accepted by one is refused by the others as a replay) and the
 * throttle (10 wrong keys at one, the 11th request at another is a 429 at
 * once: each 401 is answered once Redis has counted it);
 * with Redis stopped (killed, or hung by SIGSTOP) each answers signed
 * requests 503 with Retry-After, never leaving them waiting on Redis, while the users
 * endpoints stay 200, and once Redis is back (empty) accepts new signatures
 * and still refuses a URL it accepted before the loss; WORKERS=2 on the memory storage accepts a signed
 * URL exactly once over 24 connections; bad REDIS_* values are refused with
 * exit 2, never printing the URL's password. Start-up refusals and MySQL
 * with Redis are in redis-start.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { signUrl } from '../../../src/signing/index.js';
import { basic } from '../../support/basic-auth.js';
import { send } from '../../support/http-client.js';
import { CLEAN_ENV, CLI, RUNTIMES, runProcess, startServer, type ServerProcess } from '../../support/processes.js';
import { freePort } from '../../support/ports.js';
import { redisAvailable, startRedis, useRedis, type RedisProcess } from '../../support/redis.js';
import { largeSeed, MERCHANTS, writeSeed, type Seed } from '../../support/seeds.js';
import { within } from '../../support/within.js';

const available = redisAvailable();
const PUBLIC_URL = 'http://merchant-api.test';
const { main } = MERCHANTS;
const THROTTLED = [MERCHANTS.main, MERCHANTS.other, MERCHANTS.unicode];

/** Three users of the main merchant, and three merchants whose pairs the throttle test blocks one by one. */
function threeMerchants(): Seed {
  return { merchants: THROTTLED.map(({ id, keys }) => ({ id, status: 'active' as const, keys: [...keys] })), users: largeSeed(3).users };
}

describe('REDIS_* values refused, exit 2 with one line', () => {
  const refused: [string, Record<string, string>, RegExp][] = [
    ['a URL of another scheme', { REDIS_URL: 'http://user:hunter2@127.0.0.1:6379' }, /^Invalid configuration: REDIS_URL: A Redis URL must start with redis:\/\/ or rediss:\/\/ \(got http:\/\/\)\.$/],
    ['several URLs without REDIS_CLUSTER', { REDIS_URL: 'redis://:hunter2@a:1,redis://b:2' }, /REDIS_URL has several URLs, which only a cluster takes: set REDIS_CLUSTER=true/],
    ['REDIS_CLUSTER without REDIS_URL', { REDIS_CLUSTER: 'true' }, /REDIS_CLUSTER needs REDIS_URL/],
    ['a database number on a cluster', { REDIS_URL: 'redis://:hunter2@a:1/3', REDIS_CLUSTER: 'yes' }, /a Redis Cluster has only database 0/],
    ['a prefix with a brace', { REDIS_URL: 'redis://a:1', REDIS_PREFIX: 'x{' }, /REDIS_PREFIX must not contain \{ or \}/],
    ['a prefix longer than 64 characters', { REDIS_URL: 'redis://a:1', REDIS_PREFIX: 'p'.repeat(65) }, /REDIS_PREFIX must be at most 64 characters/],
    ['REDIS_ASSUME_NOEVICTION not a boolean', { REDIS_URL: 'redis://:hunter2@a:1', REDIS_ASSUME_NOEVICTION: 'maybe' }, /REDIS_ASSUME_NOEVICTION must be/],
  ];
  for (const [name, env, message] of refused) {
    it(name, async () => {
      const { code, output } = await runProcess(process.execPath, [CLI.node, 'serve'], { ...CLEAN_ENV, ...env });
      expect(output.trim()).toMatch(message);
      expect(output).not.toContain('hunter2');
      expect(code).toBe(2);
    });
  }
});

describe.skipIf(!available)('serve with REDIS_URL on Node, Bun and Deno', () => {
  const redis = useRedis();
  let seed: { path: string; remove(): void };
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    seed = writeSeed(threeMerchants());
    for (const runtime of RUNTIMES) {
      servers.push(await startServer(runtime, CLI[runtime], { SEED_FILE: seed.path, REDIS_URL: redis.url, PUBLIC_URL, ACCESS_LOG: 'false', FAIR_SHARE: 'false' }, ['serve']));
    }
  });
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    seed?.remove();
  });

  it('says that salts and throttle are on Redis', () => {
    for (const server of servers) expect(server.output()).toMatch(/storage: in memory, loaded from .*; salts and throttle on Redis\)/);
  });

  it('accepts a signed URL on one runtime and refuses it on the two others', async () => {
    for (const [first, server] of servers.entries()) {
      const signed = new URL(signUrl(main.keys[0], `${PUBLIC_URL}/validatesignature`, { cp: main.id }));
      const on = (s: ServerProcess) => send(`${s.url}${signed.pathname}${signed.search}`);
      const accepted = await on(server);
      expect(accepted.body, RUNTIMES[first]).toBe('{"status":"ok","is_valid":true}');
      for (const other of servers.filter((s) => s !== server)) {
        const again = await on(other);
        expect(again.status).toBe(400);
        expect(again.body).toMatch(/This salt was already used/);
      }
    }
    // The replays were failed authentications (docs/security.md#only-a-whole-success-is-a-success): a whole
    // success ends the count they made, which the next test's 10 wrong keys would otherwise add to.
    const fresh = new URL(signUrl(main.keys[0], `${PUBLIC_URL}/validatesignature`, { cp: main.id }));
    expect((await send(`${servers[0]!.url}${fresh.pathname}${fresh.search}`)).status).toBe(200);
  });

  it('refuses the 11th request at every other runtime after 10 wrong keys at one, with no waiting', async () => {
    // Loopback: every server sees 127.0.0.1, so the pair (merchant, 127.0.0.1) is shared.
    for (const [first, a] of servers.entries()) {
      const merchant = THROTTLED[first]!;
      for (let i = 0; i < 10; i++) expect((await send(`${a.url}/merchant/users?limit=1`, { headers: basic(merchant.id, `wrong-${i}`) })).status).toBe(401);
      // Each 401 is answered once Redis has counted it (docs/security.md#sharing-the-counters-on-redis),
      // and the script that made the block published it: the next request, at any instance, is refused.
      for (const b of servers.filter((s) => s !== a)) {
        const eleventh = await send(`${b.url}/merchant/users?limit=1`, { headers: basic(merchant.id, merchant.keys[0]) });
        expect(eleventh.status, `${RUNTIMES[first]} then ${RUNTIMES[servers.indexOf(b)]}`).toBe(429);
        expect(Number(eleventh.headers['retry-after'])).toBeGreaterThan(0);
      }
    }
  });
});

describe.skipIf(!available)('Redis stopped and back, on Node, Bun and Deno', () => {
  const redis = useRedis();
  let seed: { path: string; remove(): void };
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    seed = writeSeed(largeSeed(3));
    for (const runtime of RUNTIMES) {
      // A tolerance of 3 s: after the loss, every ts up to the tolerance past it is refused (docs/scaling.md#the-life-marker).
      servers.push(await startServer(runtime, CLI[runtime], { SEED_FILE: seed.path, REDIS_URL: redis.url, STORAGE_TIMEOUT: '1000', ACCESS_LOG: 'false', THROTTLE_AUTH: 'false', TIMESTAMP_TOLERANCE: '3' }, ['serve']));
    }
  });
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    seed?.remove();
  });

  it('answers 503 with Retry-After while Redis is stopped, never left waiting, users 200; once back, 200 again and a URL accepted before the loss still refused', async () => {
    const signed = (server: ServerProcess) => signUrl(main.keys[0], `${server.url}/validatesignature`, { cp: main.id });
    const before = servers.map(signed);
    for (const [i, server] of servers.entries()) expect((await send(before[i]!)).body, RUNTIMES[i]).toBe('{"status":"ok","is_valid":true}');
    await redis.kill();
    for (const [i, server] of servers.entries()) {
      // Without the storage timeout (or ioredis failing at once while Redis is away) the request would
      // never be answered: 10x STORAGE_TIMEOUT is the bound, far off on a loaded machine, never reached that way.
      const refused = await within(send(signed(server)), 10_000, `${RUNTIMES[i]}: a signed request while Redis is stopped`);
      expect(refused.status, RUNTIMES[i]).toBe(503);
      expect(refused.headers['retry-after']).toBe('1');
      expect(JSON.parse(refused.body)).toEqual({ status: 'error', message: 'The storage is unavailable; try again shortly.', is_valid: false });
      for (const path of ['/merchant/users?limit=1', '/merchant/users', '/merchant/users/u-0000001', '/readyz']) {
        const answer = await send(`${server.url}${path}`, { headers: basic(main.id, main.keys[0]) });
        expect(answer.status, `${RUNTIMES[i]} ${path}`).toBe(200);
      }
    }
    await redis.restart();
    for (const [i, server] of servers.entries()) {
      // Redis came back empty: signatures up to the tolerance past the moment the loss was noticed are asked to sign again, then they pass.
      await vi.waitFor(async () => expect((await send(signed(server))).body, RUNTIMES[i]).toBe('{"status":"ok","is_valid":true}'), { timeout: 10_000, interval: 200 });
      for (const url of before) {
        const replay = await send(url.replace(/^http:\/\/[^/]+/, server.url));
        expect(replay.status, RUNTIMES[i]).toBe(400);
        expect(JSON.parse(replay.body).message).toMatch(/sign the request again|already used|signature|outside the accepted window/i);
      }
    }
  });

  it('answers 503 with Retry-After while Redis hangs (SIGSTOP), cut by the timeouts, users 200, and 200 again once it resumes', async () => {
    const signed = (server: ServerProcess) => signUrl(main.keys[0], `${server.url}/validatesignature`, { cp: main.id });
    for (const server of servers) await vi.waitFor(async () => expect((await send(signed(server))).status).toBe(200), { timeout: 10_000, interval: 200 });
    redis.pause();
    try {
      for (const [i, server] of servers.entries()) {
        // A hung Redis never answers: only the command timeout (half of STORAGE_TIMEOUT) or the storage
        // deadline ends these requests, so the bound is the behaviour, at 10x STORAGE_TIMEOUT.
        const answers = await within(Promise.all(Array.from({ length: 4 }, () => send(signed(server)))), 10_000, `${RUNTIMES[i]}: signed requests while Redis hangs`);
        for (const answer of answers) {
          expect(answer.status, RUNTIMES[i]).toBe(503);
          expect(answer.headers['retry-after']).toBe('1');
        }
        expect((await send(`${server.url}/merchant/users?limit=1`, { headers: basic(main.id, main.keys[0]) })).status, RUNTIMES[i]).toBe(200);
      }
    } finally {
      redis.resume();
    }
    for (const [i, server] of servers.entries()) {
      await vi.waitFor(async () => expect((await send(signed(server))).body, RUNTIMES[i]).toBe('{"status":"ok","is_valid":true}'), { timeout: 10_000, interval: 200 });
    }
  });
});

describe.skipIf(!available)('WORKERS=2 on the memory storage with REDIS_URL', () => {
  const redis = useRedis();
  let seed: { path: string; remove(): void };
  let server: ServerProcess;

  beforeAll(async () => {
    seed = writeSeed(largeSeed(3));
    // Without the throttle: the 23 replays of a round are failed authentications (docs/security.md#only-a-whole-success-is-a-success)
    // that would block the pair for the next rounds; this is about the replay store.
    server = await startServer('node', CLI.node, { SEED_FILE: seed.path, REDIS_URL: redis.url, WORKERS: '2', ACCESS_LOG: 'false', THROTTLE_AUTH: 'false' }, ['serve']);
  });
  afterAll(async () => {
    await server?.stop();
    seed?.remove();
  });

  it('starts two workers and accepts a signed URL exactly once over 24 fresh connections', async () => {
    expect(server.output()).toMatch(/2 workers\)/);
    for (let round = 0; round < 3; round++) {
      const url = signUrl(main.keys[0], `${server.url}/validatesignature`, { cp: main.id });
      const answers = await Promise.all(Array.from({ length: 24 }, () => send(url)));
      expect(answers.filter((answer) => answer.body === '{"status":"ok","is_valid":true}')).toHaveLength(1);
      expect(answers.filter((answer) => answer.status === 400)).toHaveLength(23);
    }
  });
});

describe.skipIf(!available)('serve with REDIS_URL while Redis is away at start', () => {
  it('starts, logs redis_not_ready, answers signed requests 503 and /readyz 200, then works once Redis is up', async () => {
    const port = await freePort();
    const seed = writeSeed(largeSeed(3));
    const server = await startServer('node', CLI.node, { SEED_FILE: seed.path, REDIS_URL: `redis://:hunter2@127.0.0.1:${port}`, STORAGE_TIMEOUT: '1000', ACCESS_LOG: 'false' }, ['serve']);
    let redis: RedisProcess | undefined;
    try {
      await server.waitFor(/"event":"redis_not_ready"/);
      const signed = () => send(signUrl(main.keys[0], `${server.url}/validatesignature`, { cp: main.id }));
      const refused = await signed();
      expect(refused.status).toBe(503);
      expect(refused.headers['retry-after']).toBe('1');
      // Readiness and listings do not depend on Redis.
      expect((await send(`${server.url}/readyz`)).status).toBe(200);
      expect((await send(`${server.url}/merchant/users?limit=1`, { headers: basic(main.id, main.keys[0]) })).status).toBe(200);
      redis = await startRedis(['--requirepass', 'hunter2'], port);
      await vi.waitFor(async () => expect(JSON.parse((await signed()).body)).toEqual({ status: 'ok', is_valid: true }), { timeout: 10_000, interval: 200 });
      expect(server.output()).not.toContain('hunter2');
    } finally {
      await server.stop();
      seed.remove();
      }
  });
});
