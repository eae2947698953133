/**
 * No replay, whatever Redis does (docs/scaling.md#the-life-marker), on a real
 * redis-server with the real clock (the markers after a loss use Redis's
 * TIME): a URL accepted before Redis was killed with SIGKILL and restarted
 * from its RDB snapshot, or from an append-only file that lost its last
 * second, is refused, by the instance that accepted it and by one started on
 * the restored Redis; a URL signed ahead of the clock and accepted before a
 * FLUSHALL is refused after it; an instance whose clock is a minute behind
 * cannot write a marker that lets a replay through; /readyz says signing is
 * held (details.signing, still 200) until a URL signed now validates, on a
 * fresh Redis and after a detected restart; two deployments on DB 0 and DB 1 of one server keep their
 * throttles apart.
 */
import { readdirSync, statSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMerchantApi } from '../../../src/api.js';
import { silentLogger } from '../../../src/observe/logger.js';
import { MemoryStorage } from '../../../src/storage/memory/index.js';
import { withRedisState, type RedisConnection } from '../../../src/storage/redis/index.js';
import { signUrl } from '../../../src/signing/index.js';
import { basic, call, ORIGIN, signedUrl } from '../../support/api.js';
import { send } from '../../support/http-client.js';
import { CLI, RUNTIMES, startServer, type ServerProcess } from '../../support/processes.js';
import { largeSeed, MERCHANTS, writeSeed } from '../../support/seeds.js';
import { blind, redisAvailable, useRedis, type SuiteRedis } from '../../support/redis.js';
import { contractSeed } from '../../support/seeds.js';
import { sleep } from '../../support/sleep.js';

const available = redisAvailable();
const OK = { status: 'ok', is_valid: true };
const seconds = () => Math.floor(Date.now() / 1000);

/** One instance on the real clock (shifted by `shiftMs`): a memory storage of its own, salts on Redis through a connection of its own. */
function instanceOn(redis: SuiteRedis, options: { shiftMs?: number; tolerance?: number; url?: string; blind?: boolean } = {}) {
  const connection = options.blind ? blind(redis.connect(options.url)) : redis.connect(options.url);
  const clock = () => Date.now() + (options.shiftMs ?? 0);
  const storage = withRedisState(new MemoryStorage(contractSeed()), connection, { now: clock, timestampTolerance: options.tolerance });
  const api = createMerchantApi({ storage, now: clock, logger: silentLogger, throttle: false, timestampTolerance: options.tolerance });
  /** /readyz: its status, and 'held' while its details say signing is held, else 'ready'. */
  const readiness = async () => {
    const answer = await api.fetch(new Request(`${ORIGIN}/readyz`));
    const body = (await answer.json()) as { details?: { signing?: { ok: boolean } } };
    return { status: answer.status, signing: body.details?.signing === undefined ? 'ready' : 'held' };
  };
  const ready = async () => {
    const { status, signing } = await readiness();
    return status === 200 && signing === 'ready' ? 200 : signing === 'held' ? 'held' : status;
  };
  return { api, storage, connection, clock, ready, readiness };
}

/** Markers written, and /readyz 200 without signing held: a URL signed now validates (a first marker refuses the second it was written in). */
async function ready(instance: ReturnType<typeof instanceOn>) {
  await instance.storage.redisReady();
  await vi.waitFor(async () => expect(await instance.ready()).toBe(200), { timeout: 20_000, interval: 50 });
}

async function connected(connection: RedisConnection) {
  await vi.waitFor(() => connection.ping(), { timeout: 10_000, interval: 20 });
}

describe.skipIf(!available)('no replay after Redis restarts from its RDB snapshot', () => {
  const redis = useRedis({ persistence: 'rdb' });

  it('refuses a URL accepted after the snapshot, on a new instance and on the one that accepted it; the snapshot itself came back', async () => {
    const a = instanceOn(redis);
    await ready(a);
    redis.cli('save');
    const url = signedUrl({ ts: seconds() });
    expect((await call(a.api, url)).body).toEqual(OK);

    await redis.kill();
    await redis.restart();
    // The snapshot was loaded: the markers are back, the salt is not.
    expect(Number(redis.cli('dbsize'))).toBeGreaterThanOrEqual(1024);
    // An instance that never saw the Redis before, first: it cannot tell by itself that a restart happened.
    const b = instanceOn(redis);
    await connected(b.connection);
    for (const each of [b, a]) {
      await connected(each.connection);
      const replay = await call(each.api, url);
      expect(replay.status).toBe(400);
      expect(replay.body.message).toMatch(/before the replay store began/);
    }
  });

  it('keeps starting on a Redis with persistence, and refuses a replay after a restart the instance notices itself', async () => {
    // The restart before raised the markers for the tolerance: start from an empty Redis.
    redis.cli('flushall');
    const a = instanceOn(redis);
    await ready(a);
    redis.cli('save');
    const url = signedUrl({ ts: seconds() });
    expect((await call(a.api, url)).body).toEqual(OK);
    await redis.kill();
    await redis.restart();
    await connected(a.connection);
    const replay = await call(a.api, url);
    expect(replay.status).toBe(400);
    expect(replay.body.message).toMatch(/before the replay store began/);
  });
});

describe.skipIf(!available)('no replay after Redis restarts from an append-only file that lost its last second', () => {
  const redis = useRedis({ persistence: 'aof' });

  /** The incremental append-only file, whose tail `appendfsync everysec` may lose on a power cut. */
  function appendOnlyFile(): string {
    const dir = join(redis.cli('config', 'get', 'dir').trim().split('\n')[1]!, 'appendonlydir');
    return join(dir, readdirSync(dir).find((name) => name.endsWith('.incr.aof'))!);
  }

  it('refuses a URL whose salt the file lost', async () => {
    const a = instanceOn(redis);
    await ready(a);
    // Everything so far is on disk; what follows is the second a power cut takes.
    await sleep(1200);
    const file = appendOnlyFile();
    const kept = statSync(file).size;
    const url = signedUrl({ ts: seconds() });
    expect((await call(a.api, url)).body).toEqual(OK);
    await redis.kill();
    truncateSync(file, kept);
    await redis.restart();
    const b = instanceOn(redis);
    for (const each of [b, a]) {
      await connected(each.connection);
      expect((await call(each.api, url)).status).toBe(400);
    }
  });
});

describe.skipIf(!available)('no replay after a loss, whatever the ts and the clocks', () => {
  const redis = useRedis({ flushAfterEach: true });

  it('refuses after a FLUSHALL a URL signed 200 s ahead of the clock and accepted before it', async () => {
    const a = instanceOn(redis);
    await ready(a);
    const url = signedUrl({ ts: seconds() + 200 });
    expect((await call(a.api, url)).body).toEqual(OK);
    redis.cli('flushall');
    const replay = await call(a.api, url);
    expect(replay.status).toBe(400);
    expect(replay.body.message).toMatch(/before the replay store began/);
  });

  it('refuses after a FLUSHALL a URL signed 200 s ahead, at an instance started after it (which sees the running one) and at the one that accepted it', async () => {
    const a = instanceOn(redis);
    await ready(a);
    const url = signedUrl({ ts: seconds() + 200 });
    expect((await call(a.api, url)).body).toEqual(OK);
    redis.cli('flushall');
    // b never knew this Redis: an empty Redis is a first contact to it, unless another instance is listening.
    const b = instanceOn(redis);
    await b.storage.redisReady();
    for (const each of [b, a]) {
      const replay = await call(each.api, url);
      expect(replay.status).toBe(400);
      expect(replay.body.message).toMatch(/before the replay store began/);
    }
  });

  it('refuses at the instance that accepted it a URL signed 200 s ahead, when one that cannot see it marked the flushed Redis as new', async () => {
    const a = instanceOn(redis);
    await ready(a);
    const url = signedUrl({ ts: seconds() + 200 });
    expect((await call(a.api, url)).body).toEqual(OK);
    redis.cli('flushall');
    // A connection without the count of listeners (an embedder's own): b takes the empty Redis for a new one, from its start.
    const b = instanceOn(redis, { blind: true });
    await b.storage.redisReady();
    expect(redis.cli('get', 'merchant-api:{000}life')).toMatch(/\./);
    // a knew another first marker: the Redis was emptied since, so the marker is raised past the tolerance, for b too.
    const replay = await call(a.api, url);
    expect(replay.status).toBe(400);
    expect(replay.body.message).toMatch(/before the replay store began/);
    await vi.waitFor(() => expect(Number(redis.cli('get', 'merchant-api:{000}life'))).toBeGreaterThan(seconds() + 250), { timeout: 5000 });
    expect((await call(b.api, url)).status).toBe(400);
  });

  it('refuses a replay although the marker after the loss was written by an instance whose clock is a minute behind', async () => {
    const a = instanceOn(redis);
    const behind = instanceOn(redis, { shiftMs: -60_000 });
    await ready(a);
    // Its own readiness waits for its clock to reach the marker a wrote, a minute on: it is started for its markers only.
    await behind.storage.redisReady();
    const url = signedUrl({ ts: seconds() });
    expect((await call(a.api, url)).body).toEqual(OK);
    redis.cli('flushall');
    // The slow instance notices the loss first (a signature of its own, of its own time) and writes the marker.
    expect((await call(behind.api, signedUrl({ ts: Math.floor(behind.clock() / 1000) }))).status).toBe(400);
    await vi.waitFor(() => expect(Number(redis.cli('dbsize'))).toBeGreaterThanOrEqual(1024), { timeout: 5000 });
    for (const each of [a, behind]) expect((await call(each.api, url)).status).toBe(400);
  });

  it('refuses after a loss the ts up to the tolerance and a second past its detection, no more', async () => {
    const a = instanceOn(redis, { tolerance: 2 });
    await ready(a);
    redis.cli('flushall');
    const detected = seconds();
    expect((await call(a.api, signedUrl({ ts: detected }))).status).toBe(400);
    expect(Number(redis.cli('get', 'merchant-api:{000}life'))).toBeLessThanOrEqual(detected + 1 + 2 + 1);
  });
});

describe.skipIf(!available)('a URL signed once /readyz no longer says signing is held validates; /readyz stays 200 meanwhile', () => {
  const redis = useRedis({ persistence: 'rdb', flushAfterEach: true });

  async function whenReady(instance: ReturnType<typeof instanceOn>) {
    await vi.waitFor(async () => expect(await instance.ready()).toBe(200), { timeout: 20_000, interval: 50 });
    return signedUrl({ ts: Math.floor(instance.clock() / 1000) });
  }

  it('on a fresh Redis', async () => {
    const a = instanceOn(redis);
    await a.storage.redisReady();
    expect((await call(a.api, await whenReady(a))).body).toEqual(OK);
  });

  it('after a restart from the snapshot is detected: held meanwhile, still 200, for at most the tolerance and a second', async () => {
    const a = instanceOn(redis, { tolerance: 3 });
    await a.storage.redisReady();
    expect((await call(a.api, await whenReady(a))).body).toEqual(OK);
    redis.cli('save');
    await redis.kill();
    await redis.restart();
    const b = instanceOn(redis, { tolerance: 3 });
    await b.storage.redisReady();
    const detected = seconds();
    expect(await b.readiness()).toEqual({ status: 200, signing: 'held' });
    expect((await call(b.api, signedUrl({ ts: detected }))).status).toBe(400);
    const url = await whenReady(b);
    expect(seconds() - detected).toBeLessThanOrEqual(3 + 2);
    expect((await call(b.api, url)).body).toEqual(OK);
    // The instance that ran across the restart notices it at its next signature, and is ready again once URLs signed now pass.
    await connected(a.connection);
    await call(a.api, signedUrl({ ts: seconds() }));
    expect((await call(a.api, await whenReady(a))).body).toEqual(OK);
  });
});

describe.skipIf(!available)('two deployments on DB 0 and DB 1 of one Redis', () => {
  const redis = useRedis({ flushAfterEach: true });

  function deployment(db: number) {
    const connection = redis.connect(`${redis.url}/${db}`);
    const storage = withRedisState(new MemoryStorage(contractSeed()), connection);
    const api = createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false });
    const users = (key: string, address: string) => api.fetch(new Request(`${ORIGIN}/merchant/users`, { headers: basic('m1', key) }), { clientAddress: address });
    return { connection, users };
  }

  it('does not block one deployment for failures at the other: the throttle channel names the database', async () => {
    const zero = deployment(0);
    const one = deployment(1);
    await Promise.all([connected(zero.connection), connected(one.connection)]);
    const address = '203.0.113.9';
    // DB 1's subscription is up once it has heard its own deployment's first failure.
    expect((await one.users('wrong', '203.0.113.10')).status).toBe(401);
    for (let i = 0; i < 10; i++) expect((await zero.users(`wrong-${i}`, address)).status).toBe(401);
    await vi.waitFor(async () => expect((await zero.users('key-one', address)).status).toBe(429), { timeout: 5000, interval: 10 });
    // A message from DB 0 would have arrived by now (it reached DB 0's own instance).
    await sleep(300);
    expect((await one.users('key-one', address)).status).toBe(200);
  });
});

describe.skipIf(!available)('no replay after Redis restarts from its snapshot, under a Node, a Bun and a Deno server', () => {
  const redis = useRedis({ persistence: 'rdb' });
  const { main } = MERCHANTS;
  const PUBLIC_URL = 'http://merchant-api.test';
  let seed: { path: string; remove(): void };
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    seed = writeSeed(largeSeed(3));
    for (const runtime of RUNTIMES) {
      // One public URL: a URL signed for it is the same request at every server.
      servers.push(await startServer(runtime, CLI[runtime], { SEED_FILE: seed.path, REDIS_URL: redis.url, PUBLIC_URL, ACCESS_LOG: 'false', THROTTLE_AUTH: 'false' }, ['serve']));
    }
  });
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    seed?.remove();
  });

  it('refuses at every runtime the URLs every runtime accepted after the snapshot, and says signing is held meanwhile (still ready)', async () => {
    const at = (server: ServerProcess, url: string) => send(url.replace(PUBLIC_URL, server.url));
    for (const server of servers) expect((await send(`${server.url}/readyz`)).status).toBe(200);
    redis.cli('save');
    const accepted = servers.map(() => signUrl(main.keys[0], `${PUBLIC_URL}/validatesignature`, { cp: main.id }));
    for (const [i, url] of accepted.entries()) expect((await at(servers[i]!, url)).body, RUNTIMES[i]).toBe('{"status":"ok","is_valid":true}');

    await redis.kill();
    await redis.restart();
    for (const [i, server] of servers.entries()) {
      for (const url of accepted) {
        const replay = await vi.waitFor(
          async () => {
            const answer = await at(server, url);
            expect(answer.status, RUNTIMES[i]).not.toBe(503);
            return answer;
          },
          { timeout: 10_000, interval: 100 },
        );
        expect(replay.status, RUNTIMES[i]).toBe(400);
        expect(JSON.parse(replay.body).message, RUNTIMES[i]).toMatch(/before the replay store began/);
      }
      // Every ts up to the tolerance past the detection is refused: the instance stays ready (the users endpoints work) and says signing is held.
      const readiness = await send(`${server.url}/readyz`);
      expect(readiness.status, RUNTIMES[i]).toBe(200);
      expect(JSON.parse(readiness.body).details.signing.problem, RUNTIMES[i]).toMatch(/^held: a ts before \d+ is refused.*; \d+ s left$/);
    }
  });
});
