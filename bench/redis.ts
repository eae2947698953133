/**
 * `npm run bench:redis`: what keeping salts and the throttle on Redis costs
 * and gives (docs/benchmarks.md#redis), as ratios taken in the same run,
 * case after case in each round, so that other load on the machine touches
 * them alike:
 * - signed requests per second through the handler (in process, 16 in
 *   flight, a fresh salt each) on MySQL alone and on MySQL with salts on
 *   Redis (goal: at least 2x), against a raw ioredis loop of `SET key 1 NX
 *   EX` with 16 in flight (goal: the handler at least 0.6x of it); memory
 *   alone and memory with Redis for reference;
 * - how long a block made on one instance takes to be refused on another:
 *   Redis (publish/subscribe) against MySQL (each instance reads changes
 *   every `pollIntervalMs`, 1000 by default);
 * - the bytes one salt takes in Redis against a bare key of the same length
 *   (INFO used_memory over many keys, and MEMORY USAGE of one; goal: 1.5x);
 * - what a durable Redis costs (docs/scaling.md#a-restart-that-lost-nothing):
 *   memory with salts on a Redis with `appendfsync always`, and on one with
 *   a replica each salt waits for (`WAIT`), against memory with Redis.
 * `--rounds=N --requests=N` scale it. Starts its own redis-server; needs
 * MariaDB at MYSQL_URL for the MySQL cases.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { createMerchantApi, type MerchantApi } from '../src/api.js';
import { silentLogger } from '../src/observe/logger.js';
import type { Storage } from '../src/storage/contract.js';
import { MemoryStorage } from '../src/storage/memory/index.js';
import { importSeed, MysqlStorage } from '../src/storage/mysql/index.js';
import { createRedisConnection, withRedisState, type RedisConnection } from '../src/storage/redis/index.js';
import { basic, ORIGIN, signedUrl } from '../test/support/api.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../test/support/mysql.js';
import { startRedis, type RedisProcess } from '../test/support/redis.js';
import { contractSeed } from '../test/support/seeds.js';
import { median } from './report.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, requests: { type: 'string', default: '4000' } } });
const ROUNDS = Number(values.rounds);
const REQUESTS = Number(values.requests);
const IN_FLIGHT = 16;

const redis = await startRedis();
// A durable Redis, and a durable one with a replica in sync, for the cost of durability.
const durable = await startRedis([], undefined, 'durable');
const replicated = await startRedis([], undefined, 'durable');
const replica: RedisProcess = await startRedis(['--replicaof', '127.0.0.1', String(replicated.port)], undefined, 'durable');
while (!/connected_slaves:1[\s\S]*state=online/.test(replicated.cli('info', 'replication'))) await new Promise((resolve) => setTimeout(resolve, 100));
const mysql = await mysqlAvailable();
const database: TestDatabase | undefined = mysql ? await createTestDatabase() : undefined;
if (database) await importSeed(database.db, database.masterKey, contractSeed());
const connections: RedisConnection[] = [];
const closers: (() => Promise<void>)[] = [];

function connect(url = redis.url): RedisConnection {
  const connection = createRedisConnection(url);
  connections.push(connection);
  return connection;
}

function handler(storage: Storage): MerchantApi {
  closers.push(() => storage.close());
  // The real clock: salts expire and markers are written as in production. An address is blocked after 10 failures.
  return createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false, throttle: { addressFailures: 10 } });
}

/** `SET key 1 NX EX 302` with keys as long as a salt's, IN_FLIGHT at once: what the client and server alone allow. */
async function rawRate(client: Redis, keyLength: number): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next++ < REQUESTS) {
        if ((await client.set(randomBytes(keyLength).toString('base64url').slice(0, keyLength), '1', 'EX', 302, 'NX')) !== 'OK') throw new Error('a fresh key existed');
      }
    }),
  );
  return REQUESTS / ((performance.now() - started) / 1000);
}

const CASES: Record<string, () => Storage> = {
  memory: () => new MemoryStorage(contractSeed()),
  'memory + Redis': () => withRedisState(new MemoryStorage(contractSeed()), connect()),
  'memory + durable Redis': () => withRedisState(new MemoryStorage(contractSeed()), connect(durable.url)),
  'memory + durable Redis + replica': () => withRedisState(new MemoryStorage(contractSeed()), connect(replicated.url)),
  ...(database && {
    MySQL: () => new MysqlStorage({ db: database.db, masterKey: database.masterKey }),
    'MySQL + Redis': () => withRedisState(new MysqlStorage({ db: database.db, masterKey: database.masterKey }), connect(), { closeStorage: false }),
  }),
};

/**
 * A new storage refuses URLs signed up to the second its replay store began (the memory storage's
 * creation, the first marker written in Redis: docs/scaling.md), as `/readyz` waits out in `serve`:
 * one request starts the store, then the bench waits past that second.
 */
async function pastFirstSecond(api: MerchantApi): Promise<void> {
  await (await api.fetch(new Request(signedUrl({ ts: Math.floor(Date.now() / 1000) })))).arrayBuffer();
  await new Promise((resolve) => setTimeout(resolve, 1050 - (Date.now() % 1000)));
}

/** Signed requests per second: REQUESTS of them, IN_FLIGHT at once, each with a fresh salt and the current ts. */
async function signedRate(api: MerchantApi): Promise<number> {
  let next = 0;
  let refused = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next++ < REQUESTS) {
        const response = await api.fetch(new Request(signedUrl({ ts: Math.floor(Date.now() / 1000) })));
        if (response.status !== 200) refused++;
        await response.arrayBuffer();
      }
    }),
  );
  if (refused > 0) throw new Error(`${refused} signed requests were refused`);
  return REQUESTS / ((performance.now() - started) / 1000);
}

/**
 * ms from the failure that blocks an address on `a` until `b` refuses it. The failures name merchants that do not
 * exist; `b` is probed with another merchant's right key, which touches no store, so `b` can only learn the block
 * from the store's own propagation (a request that fails or resets a count on `b` would fetch it too).
 */
async function propagation(a: MerchantApi, b: MerchantApi, address: string): Promise<number> {
  const as = (api: MerchantApi, id: string, key: string) => api.fetch(new Request(`${ORIGIN}/merchant/users?limit=1`, { headers: basic(id, key) }), { clientAddress: address });
  for (let i = 0; i < 9; i++) await (await as(a, `nobody-${i}`, 'x')).arrayBuffer();
  // Every earlier failure written and learned first: only the tenth is measured. The random part puts it
  // anywhere in the MySQL instance's reading interval, so the median is the delay a block meets on average.
  await new Promise((resolve) => setTimeout(resolve, 1500 + Math.random() * 1000));
  const started = performance.now();
  await (await as(a, 'nobody-9', 'x')).arrayBuffer();
  for (;;) {
    const response = await as(b, 'm2', 'key-two');
    await response.arrayBuffer();
    if (response.status === 429) return performance.now() - started;
    if (performance.now() - started > 10_000) throw new Error('the block never reached the other instance');
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

async function usedMemory(): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(redis.cli('info', 'memory'))![1]);
}

/** Bytes per salt recorded through the storage, and per bare `SET key 1` of the same length, over `count` of each. */
async function bytesPerSalt(count: number): Promise<{ salt: number; bare: number; usage: number; usageBare: number; keyLength: number }> {
  redis.cli('flushall');
  const storage = withRedisState(new MemoryStorage(), connect());
  const now = Math.floor(Date.now() / 1000);
  await storage.recordSalt({ merchantId: 'warm-up', salt: 'x', expiresAt: now + 300, now });
  const before = await usedMemory();
  for (let i = 0; i < count; i += 100) {
    await Promise.all(Array.from({ length: 100 }, (_, n) => storage.recordSalt({ merchantId: `merchant-${(i + n) % 1000}`, salt: `${(i + n).toString(16).padStart(32, '0')}`, expiresAt: now + 300, now })));
  }
  const salt = ((await usedMemory()) - before) / count;
  const client = new Redis(redis.url);
  let sample: string | undefined;
  for (let cursor = '0'; sample === undefined; ) {
    const [next, keys] = await client.scan(cursor, 'COUNT', 1000);
    sample = keys.find((key) => !/(life|boot|seq)$/.test(key));
    cursor = next;
  }
  const bareKey = (i: number) => `bare:${i.toString(16)}`.padEnd(sample.length, '_');
  const beforeBare = await usedMemory();
  for (let i = 0; i < count; i += 1000) {
    const pipeline = client.pipeline();
    for (let n = 0; n < 1000; n++) pipeline.set(bareKey(i + n), '1');
    await pipeline.exec();
  }
  const bare = ((await usedMemory()) - beforeBare) / count;
  const usage = Number(await client.memory('USAGE', sample));
  const usageBare = Number(await client.memory('USAGE', bareKey(0)));
  client.disconnect();
  await storage.close();
  return { salt, bare, usage, usageBare, keyLength: sample.length };
}

try {
  const raw = new Redis(redis.url);
  const keyLength = 'merchant-api:{000}'.length + 22;
  const rates: Record<string, number[]> = Object.fromEntries([...Object.keys(CASES), 'raw SET NX EX'].map((name) => [name, []]));
  const ratios: Record<string, number[]> = Object.fromEntries(Object.keys(CASES).map((name) => [name, []]));
  const againstMysql: number[] = [];
  const againstRaw: Record<string, number[]> = { 'memory + Redis': [], 'MySQL + Redis': [] };
  const delays: Record<string, number[]> = { Redis: [], MySQL: [] };
  for (let round = 1; round <= ROUNDS; round++) {
    const measured: Record<string, number> = {};
    for (const [name, make] of Object.entries(CASES)) {
      const api = handler(make());
      await pastFirstSecond(api);
      await signedRate(api); // warm-up: connections, scripts, JIT
      measured[name] = await signedRate(api);
      rates[name]!.push(measured[name]!);
      ratios[name]!.push(measured[name]! / measured.memory!);
    }
    await rawRate(raw, keyLength);
    measured['raw SET NX EX'] = await rawRate(raw, keyLength);
    rates['raw SET NX EX']!.push(measured['raw SET NX EX']!);
    for (const name of Object.keys(againstRaw)) if (measured[name] !== undefined) againstRaw[name]!.push(measured[name]! / measured['raw SET NX EX']!);
    if (database) againstMysql.push(measured['MySQL + Redis']! / measured.MySQL!);
    delays.Redis!.push(await propagation(handler(CASES['memory + Redis']!()), handler(CASES['memory + Redis']!()), `198.51.100.${round}`));
    if (database) {
      const shared = () => handler(new MysqlStorage({ db: database.db, masterKey: database.masterKey, throttleSharing: { pollIntervalMs: 1000 } }));
      delays.MySQL!.push(await propagation(shared(), shared(), `198.51.100.${100 + round}`));
    }
    console.log(`round ${round}: ${Object.entries(measured).map(([name, rate]) => `${name} ${Math.round(rate)}/s`).join(', ')}; block seen after ${delays.Redis!.at(-1)!.toFixed(1)} ms on Redis${database ? `, ${delays.MySQL!.at(-1)!.toFixed(0)} ms on MySQL` : ''}`);
    await Promise.all(closers.splice(0).map((close) => close().catch(() => undefined)));
  }

  console.log(`\nSigned requests through the handler, ${IN_FLIGHT} in flight, median of ${ROUNDS} rounds (ratio: against memory alone, same round):`);
  for (const name of Object.keys(CASES)) console.log(`  ${name.padEnd(32)} ${String(Math.round(median(rates[name]!))).padStart(6)}/s   ratio ${median(ratios[name]!).toFixed(2)}`);
  for (const name of ['memory + durable Redis', 'memory + durable Redis + replica']) {
    console.log(`  ${name} / memory + Redis: ${median(ratios[name]!.map((ratio, i) => ratio / ratios['memory + Redis']![i]!)).toFixed(2)}x`);
  }
  console.log(`  ${'raw SET NX EX'.padEnd(14)} ${String(Math.round(median(rates['raw SET NX EX']!))).padStart(6)}/s   (ioredis alone, ${keyLength}-character keys)`);
  if (database) console.log(`  MySQL + Redis / MySQL alone: ${median(againstMysql).toFixed(2)}x (goal >= 2)`);
  for (const [name, values] of Object.entries(againstRaw)) if (values.length > 0) console.log(`  ${name} / raw SET NX EX loop: ${median(values).toFixed(2)}x${name === 'MySQL + Redis' ? ' (goal >= 0.6)' : ''}`);
  raw.disconnect();
  console.log(`\nA block made on one instance, refused on another after (median of ${ROUNDS}):`);
  console.log(`  Redis (publish/subscribe)  ${median(delays.Redis!).toFixed(1)} ms`);
  if (database) {
    console.log(`  MySQL (read every 1000 ms) ${median(delays.MySQL!).toFixed(0)} ms   (${(median(delays.MySQL!) / median(delays.Redis!)).toFixed(0)} x the Redis delay)`);
  }
  const memory = await bytesPerSalt(100_000);
  console.log(`\nRedis memory per salt (${memory.keyLength}-character keys, 100,000 of each, INFO used_memory):`);
  console.log(`  salt ${memory.salt.toFixed(0)} bytes, bare SET key 1 ${memory.bare.toFixed(0)} bytes: ${(memory.salt / memory.bare).toFixed(2)}x (goal <= 1.5; the difference is the key's expiry)`);
  console.log(`  MEMORY USAGE of one: salt ${memory.usage} bytes, bare key ${memory.usageBare} bytes: ${(memory.usage / memory.usageBare).toFixed(2)}x`);
} finally {
  await Promise.all(closers.map((close) => close().catch(() => undefined)));
  await Promise.all(connections.map((connection) => connection.close()));
  await database?.drop();
  await redis.stop();
  await Promise.all([durable.stop(), replica.stop(), replicated.stop()]);
}
