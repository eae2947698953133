/**
 * Real redis-server processes for the Redis suites, each on a free port,
 * without persistence unless asked (`persistence`: RDB snapshots or an
 * append-only file, in the server's own temporary folder, so that a restart
 * after a SIGKILL loads them as a crashed production Redis does), stopped
 * after the suite: a single server
 * (`startRedis`), a replica of one (`--replicaof`), a Sentinel watching a
 * master (`startSentinel`), or a three-master Redis Cluster
 * (`startRedisCluster`). Without redis-server: in CI (any `CI` but empty, `false` or `0`: test/support/ci.ts) the suites
 * fail; locally they skip loudly, saying how to install it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { createRedisConnection, type RedisConnection } from '../../src/storage/redis/index.js';
import { inCi } from './ci.js';
import { freePort } from './ports.js';
import { sleep } from './sleep.js';

export const REDIS_SERVER = process.env.REDIS_SERVER ?? '/usr/bin/redis-server';
export const REDIS_CLI = process.env.REDIS_CLI ?? '/usr/bin/redis-cli';
export const REDIS_SENTINEL = process.env.REDIS_SENTINEL ?? '/usr/bin/redis-sentinel';

/** True when redis-server is installed; in CI its absence throws instead. */
export function redisAvailable(): boolean {
  if (existsSync(REDIS_SERVER) && existsSync(REDIS_CLI)) {
    // The scripts declare their flags (#!lua), which Redis reads from 7.0 on.
    const version = /v=(\d+)\./.exec(spawnSync(REDIS_SERVER, ['--version'], { encoding: 'utf8' }).stdout)?.[1];
    if (Number(version) >= 7) return true;
    throw new Error(`${REDIS_SERVER} is version ${version ?? 'unknown'}; the Redis suites need Redis 7 or newer.`);
  }
  if (inCi()) throw new Error(`Redis suites must run in CI, but ${REDIS_SERVER} is missing (.ci/run installs it).`);
  console.warn(['', `!!! Redis suites SKIPPED: ${REDIS_SERVER} is missing`, '!!! Install it with: apt-get install redis-server (or set REDIS_SERVER and REDIS_CLI)', ''].join('\n'));
  return false;
}

export interface RedisProcess {
  port: number;
  url: string;
  /** Runs redis-cli against this server; resolves with its output. */
  cli(...args: string[]): string;
  /** SIGKILL: a crash. Without persistence the data is gone; with it, what the last snapshot or fsync held remains. */
  kill(): Promise<void>;
  /** SIGSTOP: a hung server, its connections open and silent, until `resume()` (SIGCONT). */
  pause(): void;
  resume(): void;
  /** Starts it again on the same port and folder: empty, or from its snapshot or append-only file. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * How a server persists its data: `rdb` as Redis's default (`save 3600 1`: a test takes the snapshot
 * itself with `SAVE`), `aof` an append-only file fsynced every second (up to a second of writes lost),
 * `durable` one fsynced before every answer (`appendfsync always`: nothing acknowledged is lost).
 */
export type RedisPersistence = 'none' | 'rdb' | 'aof' | 'durable';

const PERSISTENCE: Record<RedisPersistence, string[]> = {
  none: ['--save', '', '--appendonly', 'no'],
  rdb: ['--save', '3600 1', '--appendonly', 'no'],
  aof: ['--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec'],
  durable: ['--save', '', '--appendonly', 'yes', '--appendfsync', 'always'],
};

/** Starts redis-server with `extra` arguments (e.g. `--requirepass`), on `chosenPort` or a free one. */
export async function startRedis(extra: string[] = [], chosenPort?: number, persistence: RedisPersistence = 'none'): Promise<RedisProcess> {
  const port = chosenPort ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'merchant-api-redis-'));
  let child: ChildProcess;
  const launch = async () => {
    child = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', ...PERSISTENCE[persistence], '--dir', dir, '--maxmemory-policy', 'noeviction', '--maxmemory', '256mb', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    for (let waited = 0; !/Ready to accept connections/.test(output); waited += 20) {
      if (child.exitCode !== null || waited > 10_000) throw new Error(`redis-server on ${port} did not start:\n${output}`);
      await sleep(20);
    }
  };
  const halt = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    await exited;
  };
  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    cli: (...args) => redisCli(port, args),
    kill: () => halt('SIGKILL'),
    pause: () => void child.kill('SIGSTOP'),
    resume: () => void child.kill('SIGCONT'),
    restart: launch,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGCONT');
      await halt('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** True when redis-sentinel is installed; in CI its absence throws instead (.ci/run installs it). */
export function sentinelAvailable(): boolean {
  if (existsSync(REDIS_SENTINEL)) return true;
  if (inCi()) throw new Error(`The Sentinel suite must run in CI, but ${REDIS_SENTINEL} is missing (.ci/run installs it).`);
  console.warn(['', `!!! Sentinel suite SKIPPED: ${REDIS_SENTINEL} is missing`, '!!! Install it with: apt-get install redis-sentinel (or set REDIS_SENTINEL)', ''].join('\n'));
  return false;
}

export interface SentinelProcess {
  port: number;
  /** The master's name it watches. */
  name: string;
  cli(...args: string[]): string;
  stop(): Promise<void>;
}

/**
 * One redis-sentinel watching the master on `masterPort` as `mymaster` (a quorum of one: it alone
 * decides, enough for a failover the test asks for with `SENTINEL FAILOVER`).
 */
export async function startSentinel(masterPort: number): Promise<SentinelProcess> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'merchant-api-sentinel-'));
  const conf = join(dir, 'sentinel.conf');
  writeFileSync(
    conf,
    [`port ${port}`, 'bind 127.0.0.1', `dir ${dir}`, `sentinel monitor mymaster 127.0.0.1 ${masterPort} 1`, 'sentinel down-after-milliseconds mymaster 2000', 'sentinel failover-timeout mymaster 10000', ''].join('\n'),
  );
  const child = spawn(REDIS_SENTINEL, [conf], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  for (let waited = 0; !/\+monitor master mymaster/.test(output); waited += 20) {
    if (child.exitCode !== null || waited > 10_000) throw new Error(`redis-sentinel on ${port} did not start:\n${output}`);
    await sleep(20);
  }
  return {
    port,
    name: 'mymaster',
    cli: (...args) => redisCli(port, args),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function redisCli(port: number, args: string[]): string {
  const result = spawnSync(REDIS_CLI, ['-p', String(port), ...args], { encoding: 'utf8', timeout: 30_000 });
  if (result.status !== 0) throw new Error(`redis-cli ${args.join(' ')} failed: ${result.stderr}${result.stdout}`);
  return result.stdout;
}

export interface RedisCluster {
  nodes: RedisProcess[];
  /** The seed URLs, comma-separated, as REDIS_URL takes them. */
  urls: string[];
  stop(): Promise<void>;
}

/** Three masters, no replicas, every slot covered, waited for until the cluster says ok. */
export async function startRedisCluster(): Promise<RedisCluster> {
  const nodes: RedisProcess[] = [];
  try {
    for (let i = 0; i < 3; i++) nodes.push(await startRedis(['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${i}.conf`]));
    redisCli(nodes[0]!.port, ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes']);
    for (let waited = 0; ; waited += 100) {
      if (nodes.every((n) => /cluster_state:ok/.test(n.cli('cluster', 'info')))) break;
      if (waited > 20_000) throw new Error('the Redis cluster did not reach cluster_state:ok');
      await sleep(100);
    }
  } catch (error) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw error;
  }
  return { nodes, urls: nodes.map((n) => n.url), stop: () => Promise.all(nodes.map((n) => n.stop())).then(() => undefined) };
}

/** A Redis of the enclosing suite (`useRedis`): the server's members, and connections that last one test. */
export interface SuiteRedis extends RedisProcess {
  /** A connection to `url` (this server by default) with timeouts of 1 s, closed after the test. */
  connect(url?: string): RedisConnection;
}

/**
 * A redis-server for the enclosing suite: started (with `extra` arguments and `persistence`) in beforeAll, stopped in
 * afterAll; call it before the suite's own beforeAll that uses it. Connections from `connect` are
 * closed after each test, and with `flushAfterEach` the data is flushed too, so that every test
 * starts on an empty server.
 */
export function useRedis(options: { extra?: string[]; flushAfterEach?: boolean; persistence?: RedisPersistence } = {}): SuiteRedis {
  let server: RedisProcess | undefined;
  const connections: RedisConnection[] = [];
  const started = (): RedisProcess => {
    if (!server) throw new Error('redis-server has not started');
    return server;
  };
  beforeAll(async () => {
    server = await startRedis(options.extra, undefined, options.persistence);
  });
  afterEach(async () => {
    await Promise.all(connections.splice(0).map((c) => c.close()));
    if (options.flushAfterEach) started().cli('flushall');
  });
  afterAll(async () => {
    await server?.stop();
  });
  return {
    get port() {
      return started().port;
    },
    get url() {
      return started().url;
    },
    cli: (...args) => started().cli(...args),
    kill: () => started().kill(),
    pause: () => started().pause(),
    resume: () => started().resume(),
    restart: () => started().restart(),
    stop: () => started().stop(),
    connect(url) {
      const connection = createRedisConnection(url ?? started().url, { connectTimeout: 1000, commandTimeout: 1000 });
      connections.push(connection);
      return connection;
    },
  };
}

/** `connection` without `subscribersOfEveryMaster`, as a connection of an embedder's own may be: the instance cannot see the others. */
export function blind(connection: RedisConnection): RedisConnection {
  return {
    database: connection.database,
    run: (script, keys, args, options) => connection.run(script, keys, args, options),
    infoOfEveryMaster: () => connection.infoOfEveryMaster(),
    configOfEveryMaster: (parameter) => connection.configOfEveryMaster(parameter),
    ping: () => connection.ping(),
    subscribe: (channel, subscriber) => connection.subscribe(channel, subscriber),
    close: () => connection.close(),
  };
}
