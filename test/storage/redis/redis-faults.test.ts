/**
 * No replay, and no outage (docs/scaling.md#what-each-fault-costs), on real
 * redis-server processes under signed traffic from two instances: a durable
 * Redis (append-only file, `appendfsync always`) killed with SIGKILL and
 * restarted, its scripts flushed, or failed over by Sentinel to its replica
 * goes on signing (no `ts` refused by the markers); a real loss (a restart
 * from an RDB snapshot, a FLUSHALL, an append-only file that lost its tail
 * although the Redis was durable) refuses fresh URLs for at most
 * `timestampFutureTolerance` + 1 s. In every case each URL that got a 200 is
 * replayed at both instances and refused, the users endpoints answer 200
 * throughout, `/readyz` stays 200, and an honest merchant refused by the
 * markers is not blocked by the throttle. Each test prints how long the fault
 * refused signed requests (the figures of docs/scaling.md).
 */
import { readdirSync, statSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMerchantApi } from '../../../src/api.js';
import { silentLogger } from '../../../src/observe/logger.js';
import { MemoryStorage } from '../../../src/storage/memory/index.js';
import { redisConnectionFromClient, withRedisState, type RedisConnection } from '../../../src/storage/redis/index.js';
import { basic, call, ORIGIN, signedUrl } from '../../support/api.js';
import { basic as basicHeader } from '../../support/basic-auth.js';
import { send } from '../../support/http-client.js';
import { CLI, startServer, type ServerProcess } from '../../support/processes.js';
import { signUrl } from '../../../src/signing/index.js';
import { redisAvailable, sentinelAvailable, startRedis, startSentinel, useRedis, type RedisProcess, type SentinelProcess } from '../../support/redis.js';
import { contractSeed, largeSeed, MERCHANTS, writeSeed } from '../../support/seeds.js';
import { sleep } from '../../support/sleep.js';

const available = redisAvailable();
const seconds = () => Math.floor(Date.now() / 1000);
/** The merchant's own address, one per test (the throttle's counts live on Redis): the throttle counts what it gets wrong there. */
let addresses = 0;
const merchantAddress = () => ({ clientAddress: `203.0.113.${++addresses}` });
/** Each replay comes from an IPv6 network of its own, so that the throttle lets every one reach the salt's check. */
let replays = 0;
const replayAddress = () => ({ clientAddress: `2001:db8:${(++replays).toString(16)}::1` });
let MERCHANT = merchantAddress();
const BEFORE_MARKER = /before the replay store began/;
/** A window as the docs recommend with NTP: 300 s behind, 5 s ahead (short, so that a loss is waited out quickly). */
const TOLERANCE = 300;
const FUTURE = 5;

/** One instance: a memory storage of its own, salts and throttle on Redis through `connection`. */
function instanceOn(connection: RedisConnection) {
  const storage = withRedisState(new MemoryStorage(contractSeed()), connection, { timestampTolerance: TOLERANCE, timestampFutureTolerance: FUTURE });
  const api = createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false, timestampTolerance: TOLERANCE, timestampFutureTolerance: FUTURE });
  return { api, storage, connection };
}
type Instance = ReturnType<typeof instanceOn>;

/** Markers written and signing not held: a URL signed now validates. */
async function ready(instance: Instance) {
  await vi.waitFor(() => instance.storage.redisReady(), { timeout: 20_000, interval: 50 });
  await vi.waitFor(async () => expect(await call(instance.api, `${ORIGIN}/readyz`)).toMatchObject({ status: 200, body: { status: 'ok' } }), { timeout: 20_000, interval: 50 });
  await vi.waitFor(async () => expect((await call(instance.api, `${ORIGIN}/readyz`)).body.details).toBeUndefined(), { timeout: 20_000, interval: 50 });
}

interface Outcome {
  at: number;
  status: number;
  message?: string;
}

/**
 * Signed requests, each with a fresh URL signed now, sent in turn to the instances as fast as they
 * answer, with a users request and a readiness check beside each: what each got.
 */
class Traffic {
  readonly accepted: string[] = [];
  readonly outcomes: Outcome[] = [];
  readonly usersFailures: number[] = [];
  readonly readyFailures: number[] = [];
  #stopped = false;
  readonly #loop: Promise<void>;

  constructor(readonly instances: Instance[]) {
    MERCHANT = merchantAddress();
    this.#loop = this.#run();
  }

  async #run() {
    for (let i = 0; !this.#stopped; i++) {
      const instance = this.instances[i % this.instances.length]!;
      const url = signedUrl({ ts: seconds() });
      const answer = await call(instance.api, url, undefined, MERCHANT);
      if (answer.status === 200) this.accepted.push(url);
      this.outcomes.push({ at: performance.now(), status: answer.status, message: answer.body?.message });
      const users = await instance.api.fetch(new Request(`${ORIGIN}/merchant/users?limit=1`, { headers: basic('m1', 'key-one') }), MERCHANT);
      await users.body?.cancel();
      if (users.status !== 200) this.usersFailures.push(users.status);
      const readiness = await instance.api.fetch(new Request(`${ORIGIN}/readyz`));
      await readiness.body?.cancel();
      if (readiness.status !== 200) this.readyFailures.push(readiness.status);
      await sleep(20);
    }
  }

  /** Resolves once a signed request after `since` (performance.now()) got 200: its time. */
  async validatesAfter(since: number, timeout = 60_000): Promise<number> {
    return vi.waitFor(
      () => {
        const ok = this.outcomes.find((outcome) => outcome.at > since && outcome.status === 200);
        if (!ok) throw new Error('no signed request validated yet');
        return ok.at;
      },
      { timeout, interval: 50 },
    );
  }

  /** Refusals by the markers (the 400 "before the replay store began") after `since`. */
  heldAfter(since: number): Outcome[] {
    return this.outcomes.filter((outcome) => outcome.at > since && outcome.status === 400 && BEFORE_MARKER.test(outcome.message ?? ''));
  }

  /** Answers other than 200, the markers' 400 and a 503 (Redis away): none may come. */
  unexpected(): Outcome[] {
    return this.outcomes.filter((outcome) => outcome.status !== 200 && outcome.status !== 503 && !(outcome.status === 400 && BEFORE_MARKER.test(outcome.message ?? '')));
  }

  async stop() {
    this.#stopped = true;
    await this.#loop;
  }
}

/** Every URL that got a 200, sent again to every instance: those accepted again (none may be). */
async function replaysAccepted(instances: Instance[], urls: string[]): Promise<string[]> {
  const again: string[] = [];
  for (const url of urls) {
    for (const instance of instances) {
      const answer = await vi.waitFor(
        async () => {
          const replay = await call(instance.api, url, undefined, replayAddress());
          expect(replay.status).not.toBe(503);
          return replay;
        },
        { timeout: 10_000, interval: 50 },
      );
      // A replay (or a ts before the markers): never a 200, nor a 429 that would not have checked it.
      if (answer.status !== 400) again.push(`${answer.status} ${url}`);
    }
  }
  return again;
}

/**
 * What a fault cost, printed for docs/scaling.md: the longest stretch without a 200 from the last one
 * before the fault on, how long after Redis was back the first one came, and the refusals.
 */
function report(traffic: Traffic, fault: string, faultAt: number, backAt: number, validAt: number) {
  const after = traffic.outcomes.filter((outcome) => outcome.at > faultAt);
  const oks = [traffic.outcomes.filter((outcome) => outcome.at <= faultAt && outcome.status === 200).at(-1)?.at ?? faultAt, ...after.filter((outcome) => outcome.status === 200).map((outcome) => outcome.at)];
  const gap = Math.max(...oks.slice(1).map((at, i) => at - oks[i]!));
  const held = traffic.heldAfter(faultAt);
  const span = held.length === 0 ? 0 : held.at(-1)!.at - held[0]!.at;
  const unavailable = after.filter((outcome) => outcome.status === 503).length;
  console.log(
    `[fault] ${fault}: longest stretch without a 200 ${(gap / 1000).toFixed(2)} s; first 200 ${((validAt - backAt) / 1000).toFixed(2)} s after Redis was back; ` +
      `${unavailable} answers 503; ${held.length} refused by the markers, over ${(span / 1000).toFixed(2)} s`,
  );
}

/** The traffic runs until `count` URLs validated. */
async function accepted(traffic: Traffic, count: number) {
  await vi.waitFor(() => expect(traffic.accepted.length).toBeGreaterThanOrEqual(count), { timeout: 20_000, interval: 20 });
}

/** The checks every fault must pass once it is over: no replay, the users endpoints and /readyz 200 throughout, nothing else refused. */
async function noReplayNoOutage(traffic: Traffic) {
  await traffic.stop();
  expect(traffic.unexpected()).toEqual([]);
  expect(traffic.usersFailures).toEqual([]);
  expect(traffic.readyFailures).toEqual([]);
  expect(traffic.accepted.length).toBeGreaterThan(0);
  expect(await replaysAccepted(traffic.instances, traffic.accepted)).toEqual([]);
}

describe.skipIf(!available)('a durable Redis (append-only file, appendfsync always) that lost nothing', () => {
  const redis = useRedis({ persistence: 'durable' });

  it('killed with SIGKILL and restarted from its append-only file: signing goes on, no ts refused, no replay', async () => {
    const instances = [instanceOn(redis.connect()), instanceOn(redis.connect())];
    for (const instance of instances) await ready(instance);
    const traffic = new Traffic(instances);
    await accepted(traffic, 20);
    const faultAt = performance.now();
    await redis.kill();
    await redis.restart();
    const backAt = performance.now();
    const validAt = await traffic.validatesAfter(backAt);
    await accepted(traffic, traffic.accepted.length + 20);
    report(traffic, 'SIGKILL + restart, appendfsync always', faultAt, backAt, validAt);
    expect(traffic.heldAfter(faultAt)).toEqual([]);
    await noReplayNoOutage(traffic);
  }, 120_000);

  it('its scripts flushed (SCRIPT FLUSH): signing goes on, no ts refused, no replay', async () => {
    const instances = [instanceOn(redis.connect()), instanceOn(redis.connect())];
    for (const instance of instances) await ready(instance);
    const traffic = new Traffic(instances);
    await accepted(traffic, 20);
    const faultAt = performance.now();
    redis.cli('script', 'flush');
    const validAt = await traffic.validatesAfter(faultAt);
    await accepted(traffic, traffic.accepted.length + 20);
    report(traffic, 'SCRIPT FLUSH', faultAt, faultAt, validAt);
    expect(traffic.heldAfter(faultAt)).toEqual([]);
    await noReplayNoOutage(traffic);
  }, 120_000);
});

describe.skipIf(!available)('a real loss: refused for the future tolerance and a second, no more, and never a replay', () => {
  describe('a restart from an RDB snapshot that lacks the last writes', () => {
    const redis = useRedis({ persistence: 'rdb' });

    it('refuses every URL accepted after the snapshot, and fresh ones for at most the future tolerance + 1 s', async () => {
      const instances = [instanceOn(redis.connect()), instanceOn(redis.connect())];
      for (const instance of instances) await ready(instance);
      const traffic = new Traffic(instances);
      await accepted(traffic, 10);
      redis.cli('save');
      await accepted(traffic, traffic.accepted.length + 20);
      const faultAt = performance.now();
      await redis.kill();
      await redis.restart();
      const backAt = performance.now();
      const detected = seconds();
      const validAt = await traffic.validatesAfter(backAt);
      await accepted(traffic, traffic.accepted.length + 10);
      report(traffic, 'restart from an RDB snapshot (a loss)', faultAt, backAt, validAt);
      // The marker after the loss lies the future tolerance and a second past its detection, not the whole tolerance.
      expect(Number(redis.cli('get', 'merchant-api:{000}life'))).toBeLessThanOrEqual(detected + FUTURE + 1 + 1);
      expect(traffic.heldAfter(faultAt).length).toBeGreaterThan(0);
      await noReplayNoOutage(traffic);
    }, 120_000);
  });

  describe('a FLUSHALL', () => {
    const redis = useRedis({ persistence: 'durable' });

    it('refuses every URL accepted before it, and fresh ones for at most the future tolerance + 1 s', async () => {
      const instances = [instanceOn(redis.connect()), instanceOn(redis.connect())];
      for (const instance of instances) await ready(instance);
      const traffic = new Traffic(instances);
      await accepted(traffic, 20);
      const faultAt = performance.now();
      const detected = seconds();
      redis.cli('flushall');
      const validAt = await traffic.validatesAfter(faultAt + 1);
      await vi.waitFor(() => expect(traffic.heldAfter(faultAt).length).toBeGreaterThan(0), { timeout: 10_000 });
      report(traffic, 'FLUSHALL (a loss)', faultAt, faultAt, validAt);
      expect(Number(redis.cli('get', 'merchant-api:{000}life'))).toBeLessThanOrEqual(detected + FUTURE + 1 + 1);
      await noReplayNoOutage(traffic);
    }, 120_000);
  });

  describe('an append-only file that lost its tail although Redis is durable (a disk that lied)', () => {
    const redis = useRedis({ persistence: 'durable' });

    function appendOnlyFile(): string {
      const dir = join(redis.cli('config', 'get', 'dir').trim().split('\n')[1]!, 'appendonlydir');
      return join(dir, readdirSync(dir).find((name) => name.endsWith('.incr.aof'))!);
    }

    it('is told by the sequence: the instance that acknowledged a lost salt refuses it, and the markers go up for every group', async () => {
      const a = instanceOn(redis.connect());
      await ready(a);
      const before = signedUrl({ ts: seconds() });
      expect((await call(a.api, before, undefined, MERCHANT)).status).toBe(200);
      const file = appendOnlyFile();
      const kept = statSync(file).size;
      const lost = Array.from({ length: 5 }, () => signedUrl({ ts: seconds() }));
      for (const url of lost) expect((await call(a.api, url, undefined, MERCHANT)).status).toBe(200);
      await redis.kill();
      truncateSync(file, kept);
      await redis.restart();
      const detected = seconds();
      for (const url of [before, ...lost]) {
        const replay = await vi.waitFor(
          async () => {
            const answer = await call(a.api, url, undefined, MERCHANT);
            expect(answer.status).not.toBe(503);
            return answer;
          },
          { timeout: 10_000, interval: 50 },
        );
        expect(replay.status).toBe(400);
      }
      // Every group, not only those of the lost salts: the other instances' lost salts may be anywhere.
      const markers = ['000', '155', '2aa', '3ff'].map((group) => Number(redis.cli('get', `merchant-api:{${group}}life`)));
      for (const marker of markers) expect(marker).toBeGreaterThanOrEqual(detected + FUTURE);
      expect(Math.max(...markers)).toBeLessThanOrEqual(detected + FUTURE + 1 + 1);
    }, 120_000);
  });
});

describe.skipIf(!available)('an honest merchant refused by the markers after a loss', () => {
  const redis = useRedis({ flushAfterEach: true });

  it('is not blocked by the failed-authentication throttle: those refusals are the server\'s, not its failures', async () => {
    const a = instanceOn(redis.connect());
    await ready(a);
    redis.cli('flushall');
    // More fresh URLs than the throttle's 10 failures per merchant and address, all refused by the markers.
    const statuses: number[] = [];
    for (let i = 0; i < 15; i++) statuses.push((await call(a.api, signedUrl({ ts: seconds() }), undefined, MERCHANT)).status);
    expect(statuses).toEqual(Array.from({ length: 15 }, () => 400));
    const held = await call(a.api, `${ORIGIN}/readyz`);
    expect(held.status).toBe(200);
    expect(held.body.details.signing.problem).toMatch(/^held: /);
    // Once the hold passes, the next fresh URL validates: no 429.
    await vi.waitFor(async () => expect((await call(a.api, signedUrl({ ts: seconds() }), undefined, MERCHANT)).status).toBe(200), { timeout: 20_000, interval: 200 });
    // What the caller gets wrong still counts: a wrong signature 10 times, then 429.
    for (let i = 0; i < 10; i++) expect((await call(a.api, signedUrl({ ts: seconds(), key: 'wrong' }), undefined, MERCHANT)).status).toBe(400);
    await vi.waitFor(async () => expect((await call(a.api, signedUrl({ ts: seconds() }), undefined, MERCHANT)).status).toBe(429), { timeout: 5000, interval: 20 });
  }, 120_000);
});

describe.skipIf(!available || !sentinelAvailable())('a Sentinel failover to a durable replica that has every salt', () => {
  let master: RedisProcess;
  let replica: RedisProcess;
  let sentinel: SentinelProcess;
  const clients: RedisConnection[] = [];

  beforeAll(async () => {
    master = await startRedis([], undefined, 'durable');
    replica = await startRedis(['--replicaof', '127.0.0.1', String(master.port)], undefined, 'durable');
    sentinel = await startSentinel(master.port);
    // The replica in sync, and known to the Sentinel as one it may promote.
    await vi.waitFor(() => expect(master.cli('info', 'replication')).toMatch(/connected_slaves:1[\s\S]*state=online/), { timeout: 20_000, interval: 100 });
    await vi.waitFor(() => expect(sentinel.cli('sentinel', 'replicas', 'mymaster')).toContain(String(replica.port)), { timeout: 30_000, interval: 200 });
  }, 60_000);
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close()));
    await sentinel?.stop();
    await replica?.stop();
    await master?.stop();
  });

  /** A connection through the Sentinel, with the options createRedisConnection sets. */
  function viaSentinel(): RedisConnection {
    const client = new Redis({
      sentinels: [{ host: '127.0.0.1', port: sentinel.port }],
      name: 'mymaster',
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: 1000,
      connectTimeout: 1000,
      enableAutoPipelining: false,
      retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
      // Told by the Sentinel of a switch (+switch-master), at once: connect to the new master.
      failoverDetector: true,
      // The old master, made a replica, answers READONLY: connect again, through the Sentinel, to the new one.
      reconnectOnError: (error) => (error.message.startsWith('READONLY') ? 1 : false),
    });
    client.on('error', () => undefined);
    const connection = redisConnectionFromClient(client, { connectTimeout: 1000 });
    clients.push(connection);
    return connection;
  }

  it('goes on signing: fresh URLs validate soon after, no ts refused, no replay, each salt waited for on the replica', async () => {
    const instances = [instanceOn(viaSentinel()), instanceOn(viaSentinel())];
    for (const instance of instances) await ready(instance);
    const traffic = new Traffic(instances);
    await accepted(traffic, 20);
    // Each new salt waited for the replica (WAIT), so the replica holds every one acknowledged.
    expect(Number(replica.cli('dbsize'))).toBeGreaterThanOrEqual(1024 + 20);
    const faultAt = performance.now();
    sentinel.cli('sentinel', 'failover', 'mymaster');
    await vi.waitFor(() => expect(sentinel.cli('sentinel', 'get-master-addr-by-name', 'mymaster')).toContain(String(replica.port)), { timeout: 30_000, interval: 50 });
    const switchedAt = performance.now();
    const validAt = await traffic.validatesAfter(switchedAt);
    // The old master made a replica of the new one: from now on a salt can be written on the new master alone.
    await vi.waitFor(() => expect(master.cli('info', 'replication')).toMatch(/role:slave/), { timeout: 60_000, interval: 50 });
    await traffic.validatesAfter(performance.now());
    await accepted(traffic, traffic.accepted.length + 20);
    // Both instances checked the new master and found it durable, with every salt: its run_id is now each group's.
    const newRun = /run_id:(\w+)/.exec(replica.cli('info', 'server'))![1];
    expect(replica.cli('get', 'merchant-api:{000}boot').trim()).toBe(newRun);
    report(traffic, 'Sentinel failover to a durable replica', faultAt, switchedAt, validAt);
    expect(traffic.heldAfter(faultAt)).toEqual([]);
    await noReplayNoOutage(traffic);
  }, 120_000);
});

describe.skipIf(!available)('merchant-api serve with TIMESTAMP_FUTURE_TOLERANCE=5, after a FLUSHALL', () => {
  const redis = useRedis();
  const { main } = MERCHANTS;
  let seed: { path: string; remove(): void };
  let server: ServerProcess;

  beforeAll(async () => {
    seed = writeSeed(largeSeed(3));
    server = await startServer('node', CLI.node, { SEED_FILE: seed.path, REDIS_URL: redis.url, ACCESS_LOG: 'false', TIMESTAMP_FUTURE_TOLERANCE: '5' }, ['serve']);
  });
  afterAll(async () => {
    await server?.stop();
    seed?.remove();
  });

  it('refuses a ts 6 s ahead, holds signing for the future tolerance + 1 s after the loss, stays ready, and serves the users endpoints', async () => {
    const signed = (ts?: number) => signUrl(main.keys[0], `${server.url}/validatesignature`, { cp: main.id, ...(ts === undefined ? {} : { ts }) });
    const ahead = await send(signed(seconds() + 6));
    expect(ahead.status).toBe(400);
    expect(JSON.parse(ahead.body).message).toBe("Invalid timestamp: ts is outside the accepted window of 300 seconds before and 5 seconds after the server's time.");
    const accepted = signed();
    expect((await send(accepted)).body).toBe('{"status":"ok","is_valid":true}');
    redis.cli('flushall');
    const detected = seconds();
    const held = await send(signed());
    expect(held.status).toBe(400);
    expect(JSON.parse(held.body).message).toMatch(BEFORE_MARKER);
    const readiness = await send(`${server.url}/readyz`);
    expect(readiness.status).toBe(200);
    expect(JSON.parse(readiness.body).details.signing.problem).toMatch(/^held: /);
    expect((await send(`${server.url}/merchant/users?limit=1`, { headers: basicHeader(main.id, main.keys[0]) })).status).toBe(200);
    expect(Number(redis.cli('get', 'merchant-api:{000}life'))).toBeLessThanOrEqual(detected + 5 + 1 + 1);
    await vi.waitFor(async () => expect((await send(signed())).body).toBe('{"status":"ok","is_valid":true}'), { timeout: 30_000, interval: 200 });
    expect((await send(accepted)).status).toBe(400);
    // Readiness says the hold is over once its own reading of the marker catches up (at most a probe later).
    await vi.waitFor(async () => expect((await send(`${server.url}/readyz`)).body).toBe('{"status":"ok"}'), { timeout: 10_000, interval: 200 });
  }, 120_000);
});
