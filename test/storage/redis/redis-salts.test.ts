/**
 * Salts on a real redis-server (docs/scaling.md#salts): two handlers, each
 * with its own connection, accept a signed URL exactly once between them; the
 * life marker refuses a ts older than the salts Redis still has, after a
 * restart or a FLUSHALL; salts fail closed (503) when Redis is down, full, or
 * set to evict, while readiness stays with the inner storage; each salt is
 * one fixed-length key, hashed, expiring with its window, whose memory is
 * within 1.5x of a bare key of the same length (MEMORY USAGE and INFO).
 */
import { describe, expect, it, vi } from 'vitest';
import { createMerchantApi } from '../../../src/api.js';
import { silentLogger } from '../../../src/observe/logger.js';
import { MemoryStorage } from '../../../src/storage/memory/index.js';
import { redisConnectionFromClient, withRedisState, type RedisConnection, type RedisStateOptions } from '../../../src/storage/redis/index.js';
import { Redis } from 'ioredis';
import { SALT_GROUPS } from '../../../src/storage/redis/keys.js';
import { call, NOW, NOW_MS, signedUrl } from '../../support/api.js';
import { blind, redisAvailable, useRedis } from '../../support/redis.js';
import { contractSeed } from '../../support/seeds.js';
import { sleep } from '../../support/sleep.js';

const available = redisAvailable();

describe.skipIf(!available)('salts on Redis', () => {
  const redis = useRedis({ flushAfterEach: true });

  /** One instance: a memory storage of its own, salts on Redis through a connection of its own. */
  function instance(options: RedisStateOptions & { clock?: () => number; url?: string; blind?: boolean } = {}) {
    const connection = options.blind ? blind(redis.connect(options.url)) : redis.connect(options.url);
    const clock = options.clock ?? (() => NOW_MS);
    const storage = withRedisState(new MemoryStorage(contractSeed()), connection, { now: clock, ...options });
    const api = createMerchantApi({ storage, now: clock, logger: silentLogger, throttle: false });
    return { api, storage, connection };
  }

  async function connected(connection: RedisConnection) {
    for (let waited = 0; ; waited += 20) {
      try {
        return await connection.ping();
      } catch (error) {
        if (waited > 5000) throw error;
        await sleep(20);
      }
    }
  }

  it('accepts a signed URL once across two instances, even sent to both at once', async () => {
    const a = instance();
    const b = instance();
    await Promise.all([connected(a.connection), connected(b.connection)]);
    const url = signedUrl();
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => call(i % 2 ? a.api : b.api, url)));
    const accepted = answers.filter((answer) => answer.body?.is_valid === true);
    expect(accepted).toHaveLength(1);
    expect(answers.filter((answer) => answer.status === 401 || answer.status === 400 || answer.status === 409).length + accepted.length).toBe(24);
    const again = await call(a.api, url);
    expect(again.body?.is_valid).not.toBe(true);
    // A different salt is a different request.
    expect((await call(b.api, signedUrl())).body).toEqual({ status: 'ok', is_valid: true });
  });

  it('works on an ioredis client of the caller\'s own, and closes it with the storage', async () => {
    const client = new Redis(redis.url, { enableOfflineQueue: false, commandTimeout: 1000, maxRetriesPerRequest: 0 });
    const storage = withRedisState(new MemoryStorage(contractSeed()), redisConnectionFromClient(client), { now: () => NOW_MS, closeConnection: true });
    const api = createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, throttle: false });
    await storage.redisReady();
    const url = signedUrl();
    expect((await call(api, url)).body?.is_valid).toBe(true);
    expect((await call(api, url)).status).toBe(400);
    await storage.close();
    await vi.waitFor(() => expect(client.status).toBe('end'), { timeout: 2000 });
  });

  it('keeps each merchant apart: the same salt for another merchant is new', async () => {
    const a = instance();
    await connected(a.connection);
    const salt = `shared-${Math.random()}`;
    expect((await call(a.api, signedUrl({ salt }))).body?.is_valid).toBe(true);
    expect((await call(a.api, signedUrl({ salt, cp: 'm2', key: 'key-two' }))).body?.is_valid).toBe(true);
    expect((await call(a.api, signedUrl({ salt, cp: 'M1', key: 'case-differs' }))).body?.is_valid).toBe(true);
    expect((await call(a.api, signedUrl({ salt, cp: 'm2', key: 'key-two' }))).body?.is_valid).not.toBe(true);
  });

  it('writes every group\'s life marker at the first salt, and each salt as one fixed-length hashed key expiring with its window', async () => {
    const a = instance();
    await connected(a.connection);
    const longId = 'x'.repeat(128);
    await call(a.api, signedUrl());
    await call(a.api, signedUrl({ salt: longId }));
    const keys = redis.cli('--scan').trim().split('\n');
    const markers = keys.filter((key) => key.endsWith('life'));
    expect(markers).toHaveLength(SALT_GROUPS);
    for (const marker of markers) expect(marker).toMatch(/^merchant-api:\{[0-9a-f]{3}\}life$/);
    // Beside each, the run_id of the Redis that holds the group's salts (a restart from a snapshot is told by it).
    const boots = keys.filter((key) => key.endsWith('boot'));
    expect(boots).toHaveLength(SALT_GROUPS);
    expect(redis.cli('get', 'merchant-api:{000}boot').trim()).toBe(/run_id:(\w+)/.exec(redis.cli('info', 'server'))![1]);
    const salts = keys.filter((key) => !key.endsWith('life') && !key.endsWith('boot') && !key.endsWith('seq'));
    expect(salts).toHaveLength(2);
    for (const key of salts) {
      // No merchant id or salt in the clear, and the same length whatever the client sent.
      expect(key).toMatch(/^merchant-api:\{[0-9a-f]{3}\}[A-Za-z0-9_-]{22}$/);
      expect(key).not.toContain('m1');
      expect(key).not.toContain('xxxx');
      expect(redis.cli('get', key).trim()).toBe('1');
      // ts + tolerance (300 s) plus the margin of two seconds, from now.
      expect(Number(redis.cli('ttl', key))).toBeGreaterThan(295);
      expect(Number(redis.cli('ttl', key))).toBeLessThanOrEqual(302);
      const marker = key.replace(/^(merchant-api:\{[0-9a-f]{3}\}).*$/, '$1life');
      expect(redis.cli('ttl', marker).trim()).toBe('-1');
      expect(redis.cli('get', marker).trim()).toBe(`${NOW}.000`);
    }
  });

  it('holds a salt in memory within 1.5x of a bare key of the same length', async () => {
    const a = instance();
    await connected(a.connection);
    const raw = new Redis(redis.url);
    try {
      const count = 20_000;
      const used = async () => Number(/used_memory:(\d+)/.exec(await raw.info('memory'))![1]);
      await a.storage.recordSalt({ merchantId: 'm1', salt: 'first', expiresAt: NOW + 300, now: NOW, ts: NOW });
      // Each group's sequence, a fixed key per group as its marker is (written by the first salt of the group): not a salt's cost.
      const sequences = raw.pipeline();
      for (let group = 0; group < SALT_GROUPS; group++) sequences.set(`merchant-api:{${group.toString(16).padStart(3, '0')}}seq`, '1', 'NX');
      await sequences.exec();
      const before = await used();
      for (let i = 0; i < count; i += 1000) {
        await Promise.all(Array.from({ length: 1000 }, (_, j) => a.storage.recordSalt({ merchantId: 'm1', salt: `salt-${i + j}`, expiresAt: NOW + 300, now: NOW, ts: NOW })));
      }
      const salts = (await used()) - before;
      const sample = redis.cli('--scan').trim().split('\n').find((key) => !key.endsWith('life') && !key.endsWith('boot') && !key.endsWith('seq'))!;
      const bare = (i: number) => `bare-key-${String(i).padStart(8, '0')}`.padEnd(sample.length, 'x');
      const beforeBare = await used();
      for (let i = 0; i < count; i += 1000) {
        const pipeline = raw.pipeline();
        for (let j = 0; j < 1000; j++) pipeline.set(bare(i + j), '1');
        await pipeline.exec();
      }
      const bareBytes = (await used()) - beforeBare;
      const ratio = salts / bareBytes;
      console.log(`bytes per salt ${(salts / count).toFixed(1)}, per bare key of ${sample.length} characters ${(bareBytes / count).toFixed(1)}: ${ratio.toFixed(2)}x`);
      expect(ratio).toBeLessThanOrEqual(1.5);
      const usage = Number(await raw.memory('USAGE', sample));
      const usageBare = Number(await raw.memory('USAGE', bare(0)));
      expect(usage / usageBare).toBeLessThanOrEqual(1.5);
    } finally {
      raw.disconnect();
    }
  });

  it('accepts a merchant\'s first signature of a ts older than now, once the markers were written before it', async () => {
    let clock = NOW_MS;
    const a = instance({ clock: () => clock });
    await connected(a.connection);
    // The markers are written when the instance starts (`redisReady()`, which serve runs), with its clock.
    await a.storage.redisReady();
    clock += 60_000;
    for (const [cp, key] of [['m2', 'key-two'], ['M1', 'case-differs']]) expect((await call(a.api, signedUrl({ cp, key, ts: NOW + 30 }))).body?.is_valid).toBe(true);
  });

  it('refuses, after Redis lost its data, every ts an instance may have accepted before the loss, and marks every group again', async () => {
    let clock = NOW_MS;
    const a = instance({ clock: () => clock });
    await connected(a.connection);
    const url = signedUrl({ ts: NOW });
    expect((await call(a.api, url)).body?.is_valid).toBe(true);

    // A crash without persistence: every salt is gone.
    await redis.kill();
    await redis.restart();
    clock += 5000;
    await connected(a.connection);
    // Redis's clock before the loss is noticed: the markers are written from a second no earlier than this one.
    const time = Number(redis.cli('time').trim().split('\n')[0]);
    const replay = await call(a.api, url);
    expect(replay.status).toBe(400);
    expect(replay.body.message).toMatch(/before the replay store began/);
    // The markers after a loss lie past every ts accepted before it, on Redis's clock (this instance's is years behind):
    // redis-replay.test.ts shows on the real clock that URLs signed after the tolerance pass again.
    expect(Number(redis.cli('get', 'merchant-api:{000}life'))).toBeGreaterThan(time + 300);
    expect((await call(a.api, signedUrl({ ts: NOW + 6 }))).status).toBe(400);

    // A FLUSHALL the same: noticed at the next salt, every group's marker is written again at once, not at each group's next request.
    redis.cli('flushall');
    clock += 5000;
    expect((await call(a.api, signedUrl({ cp: 'm2', key: 'key-two', ts: NOW + 10 }))).status).toBe(400);
    await vi.waitFor(() => expect(Number(redis.cli('dbsize'))).toBeGreaterThanOrEqual(2 * SALT_GROUPS), { timeout: 5000 });
    expect((await call(a.api, url)).status).toBe(400);
  });

  it('refuses a URL accepted before a loss when an instance starting in the same second writes the markers (to the millisecond)', async () => {
    let clock = NOW_MS - 5000;
    const a = instance({ clock: () => clock });
    await connected(a.connection);
    await a.storage.redisReady();
    clock = NOW_MS + 100;
    const url = signedUrl({ ts: NOW });
    expect((await call(a.api, url)).body?.is_valid).toBe(true);
    // Redis loses everything; 0.5 s later, in the same second, another instance starts and writes the markers first;
    // one that cannot see a running (blind: the running one would make it a loss, the test before the next).
    redis.cli('flushall');
    clock = NOW_MS + 600;
    const b = instance({ clock: () => clock, blind: true });
    await connected(b.connection);
    await b.storage.redisReady();
    expect(redis.cli('get', 'merchant-api:{000}life').trim()).toBe(`${NOW}.600`);
    const replay = await call(b.api, url);
    expect(replay.status).toBe(400);
    expect(replay.body.message).toMatch(/before the replay store began/);
    expect((await call(b.api, signedUrl({ ts: NOW + 1 }))).body?.is_valid).toBe(true);
    // a verified another first marker: the Redis was emptied since, a loss; the replay is refused there too.
    expect((await call(a.api, url)).status).toBe(400);
  });

  it('an instance that starts on a flushed Redis while another runs takes it for a loss, not for a new Redis', async () => {
    let clock = NOW_MS - 5000;
    const a = instance({ clock: () => clock });
    await connected(a.connection);
    await a.storage.redisReady();
    clock = NOW_MS + 100;
    const url = signedUrl({ ts: NOW + 100 });
    expect((await call(a.api, url)).body?.is_valid).toBe(true);
    redis.cli('flushall');
    const b = instance({ clock: () => clock });
    await connected(b.connection);
    await b.storage.redisReady();
    // The after-loss marker: past every ts accepted before (Redis's TIME is today, the test's clock 2023).
    expect(Number(redis.cli('get', 'merchant-api:{000}life'))).toBeGreaterThan(NOW + 300);
    expect((await call(b.api, url)).status).toBe(400);
  });

  it('fails closed: Redis away is a 503 for signed requests, and they work again when it is back', async () => {
    let clock = NOW_MS;
    const a = instance({ clock: () => clock });
    await connected(a.connection);
    await redis.kill();
    const down = await call(a.api, signedUrl());
    expect(down.status).toBe(503);
    expect(down.body).toEqual({ status: 'error', message: expect.any(String), is_valid: false });
    // Readiness is the inner storage's: the users endpoints work without Redis; the health details say what fails.
    expect((await a.api.fetch(new Request('http://api.test/readyz'))).status).toBe(200);
    expect(await a.storage.redisHealth()).toEqual({ ok: false, problem: expect.stringMatching(/^Redis ping failed: /) });
    // /healthz stays 200 and says what the last salt found, with no host, port or driver message.
    const live = await a.api.fetch(new Request('http://api.test/healthz'));
    expect(live.status).toBe(200);
    const details = ((await live.json()) as { details: { redis: { ok: boolean; problem: string } } }).details;
    // Redis killed: unreachable, as docs/scaling.md#redis shows, never a bare "failed".
    expect(details.redis).toEqual({ ok: false, problem: expect.stringMatching(/^unreachable \((E[A-Z]+|not connected)\)$/) });
    await redis.restart();
    clock += 2000;
    await connected(a.connection);
    // Redis came back empty: a loss, so every ts up to the tolerance past it is refused (redis-replay.test.ts), but Redis answers.
    expect((await call(a.api, signedUrl({ ts: NOW + 1 }))).status).toBe(400);
    expect(await a.storage.redisHealth()).toEqual({ ok: true });
    expect(await (await a.api.fetch(new Request('http://api.test/healthz'))).text()).toBe('{"status":"ok","details":{"redis":{"ok":true}}}');
  });

  it('refuses to record salts while any eviction policy could drop them, and records them once it is noeviction', async () => {
    redis.cli('config', 'set', 'maxmemory-policy', 'volatile-lru');
    const a = instance();
    await connected(a.connection);
    const refused = await call(a.api, signedUrl());
    expect(refused.status).toBe(503);
    expect(await a.storage.redisHealth()).toEqual({ ok: false, problem: expect.stringContaining('maxmemory-policy is volatile-lru on a master') });
    redis.cli('config', 'set', 'maxmemory-policy', 'noeviction');
    // A bad verdict is read again within a second.
    await sleep(1100);
    expect((await call(a.api, signedUrl())).body?.is_valid).toBe(true);
  });

  it('answers 503 when Redis is at its maxmemory, never accepting without recording', async () => {
    const a = instance();
    await connected(a.connection);
    expect((await call(a.api, signedUrl())).body?.is_valid).toBe(true);
    redis.cli('config', 'set', 'maxmemory', '1');
    try {
      const full = await call(a.api, signedUrl());
      expect(full.status).toBe(503);
    } finally {
      redis.cli('config', 'set', 'maxmemory', '256mb');
    }
  });
});
