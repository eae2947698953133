/**
 * `npm run bench:workers`: the standalone server on MySQL with WORKERS=1
 * against WORKERS=2 (docs/runtimes.md#workers), in the same run. Each round
 * starts `merchant-api serve` (the built dist/) with one worker count, then
 * the other, in alternating order, and loads each with autocannon from this
 * process: `validatesignature` (a new pre-signed salt per request, so every
 * request writes a salt row) and `user` (one user, HTTP Basic). It prints
 * req/s per round with the cores the server, MariaDB and the load generator
 * used meanwhile (from /proc), the medians, and the 2/1 ratio of the medians.
 *
 * Server, workers, MariaDB and the load generator share the machine: on two
 * cores a second worker competes with the load generator and MariaDB for
 * the second core. The figures say what that machine gives, nothing more.
 *
 * MYSQL_URL (default mysql://root@127.0.0.1:3306/test) names the server; a
 * scratch database is created there and dropped at the end. Options:
 * --runtime=node|bun|deno (default node), --rounds=N (default 3),
 * --duration=S (default 6), --warmup=S (default 2), --connections=N
 * (default 50), --cases=validatesignature,user.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createConnection } from 'mysql2/promise';
import { createMysqlKysely, generateMasterKey, importSeed, migrateToLatest, parseMasterKey } from '../src/storage/mysql/index.js';
import { fakeUser, idOf, MERCHANT } from './fake-users.js';
import { runAutocannon, type LoadResult } from './load.js';
import { databasePid } from './servers.js';
import { MERCHANT_ID, MERCHANT_KEY, PUBLIC_URL, TIMESTAMP_TOLERANCE } from './servers/data.mjs';
import { writeSignedPaths } from './signed-paths.js';

type Runtime = 'node' | 'bun' | 'deno';
type CaseId = 'validatesignature' | 'user';
/** A load run with the cores each party used meanwhile. */
type Measured = LoadResult & { server: number; database: number; loader: number };

const args = new Map(process.argv.slice(2).map((arg) => [arg.replace(/=.*$/, ''), arg.includes('=') ? arg.replace(/^[^=]*=/, '') : 'true']));
const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const RUNTIME = (args.get('--runtime') ?? 'node') as Runtime;
const ROUNDS = Number(args.get('--rounds') ?? 3);
const DURATION = Number(args.get('--duration') ?? 6);
const WARMUP = Number(args.get('--warmup') ?? 2);
const CONNECTIONS = Number(args.get('--connections') ?? 50);
const CASES = (args.get('--cases') ?? 'validatesignature,user').split(',') as CaseId[];
const WORKER_COUNTS = [1, 2] as const;
const USERS = 1000;
const SINGLE_USER = idOf(42);
/** The most requests/s one measurement may reach before pre-signed salts would repeat (a repeat is a 400, counted as a failure). */
const MAX_RATE = 12_000;

if (!['node', 'bun', 'deno'].includes(RUNTIME)) throw new Error(`--runtime must be node, bun or deno (got ${RUNTIME})`);
if (MERCHANT !== MERCHANT_ID) throw new Error('bench/fake-users.ts and bench/servers/data.mjs must name the same merchant');
const ROOT = new URL('../', import.meta.url).pathname;
const CLI: Record<Runtime, [string, string[]]> = {
  node: [process.execPath, ['dist/cli.js', 'serve']],
  bun: [`${ROOT}node_modules/.bin/bun`, ['dist/cli-bun.js', 'serve']],
  deno: [`${ROOT}node_modules/.bin/deno`, ['run', '--allow-net', '--allow-read', '--allow-env', '--allow-run', 'dist/cli-deno.js', 'serve']],
};
if (!existsSync(`${ROOT}dist/cli.js`)) throw new Error('dist/ is missing: run npm run build first.');

const admin = await createConnection({ uri: MYSQL_URL });
const [[version]] = (await admin.query('SELECT VERSION() AS v')) as unknown as [[{ v: string }]];
const database = `merchant_api_bench_workers_${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'merchant-api-bench-workers-'));
let server: ChildProcess | undefined;

/** Starts `serve` with `workers` and resolves with its URL once it prints its `listening on` line. */
function startServer(workers: number, env: Record<string, string>): Promise<{ url: string; child: ChildProcess }> {
  const [command, argv] = CLI[RUNTIME];
  const child = spawn(command, argv, { cwd: ROOT, env: { ...process.env, ...env, WORKERS: String(workers), PORT: '0', HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const url = /listening on (http:\/\/\S+)/.exec(output)?.[1];
      if (url) {
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        resolve({ url, child });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => process.stderr.write(chunk));
    child.once('exit', (code) => reject(new Error(`serve exited with ${code} before listening:\n${output}`)));
  });
}

async function stopServer(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

const TICKS_PER_SECOND = 100;

/** CPU seconds (user + system) of `pid` and every process under it, from /proc; 0 for what has gone. */
function treeCpuSeconds(pid: number): number {
  let ticks = 0;
  const visit = (each: number) => {
    try {
      const fields = readFileSync(`/proc/${each}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
      for (const task of readdirSync(`/proc/${each}/task`)) {
        for (const child of readFileSync(`/proc/${each}/task/${task}/children`, 'utf8').split(' ').filter(Boolean)) visit(Number(child));
      }
    } catch {
      // Gone meanwhile.
    }
  };
  visit(pid);
  return ticks / TICKS_PER_SECOND;
}

/** Cores each party used over a measurement: the server (primary and workers), MariaDB and this load generator. */
async function measuredCpu<T>(serverPid: number, work: () => Promise<T>): Promise<{ result: T; server: number; database: number; loader: number }> {
  const dbPid = databasePid();
  const before = { server: treeCpuSeconds(serverPid), database: dbPid ? treeCpuSeconds(dbPid) : 0, loader: process.cpuUsage(), at: performance.now() };
  const result = await work();
  const seconds = (performance.now() - before.at) / 1000;
  const loader = process.cpuUsage(before.loader);
  return {
    result,
    server: (treeCpuSeconds(serverPid) - before.server) / seconds,
    database: dbPid ? (treeCpuSeconds(dbPid) - before.database) / seconds : NaN,
    loader: (loader.user + loader.system) / 1e6 / seconds,
  };
}

function runtimeVersion(): string {
  if (RUNTIME === 'node') return process.version;
  return execFileSync(CLI[RUNTIME][0], ['--version'], { encoding: 'utf8' }).split('\n')[0]!.replace(/^deno /, '');
}

/** Line `line` (1-based) of the signed-paths file, whose lines all have the same length. */
function signedPathAt(file: string, line: number): string {
  const fd = openSync(file, 'r');
  try {
    const head = Buffer.alloc(512);
    readSync(fd, head, 0, head.length, 0);
    const width = head.indexOf(10) + 1;
    const text = Buffer.alloc(width - 1);
    readSync(fd, text, 0, text.length, (line - 1) * width);
    return text.toString('latin1');
  } finally {
    closeSync(fd);
  }
}

const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
const median = (values: number[]) => sorted(values)[Math.floor(values.length / 2)]!;
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

try {
  await admin.query(`CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4`);
  const url = new URL(MYSQL_URL);
  url.pathname = `/${database}`;
  const masterKey = generateMasterKey();
  const db = createMysqlKysely(url.toString(), { queryTimeout: 0 });
  await migrateToLatest(db);
  const users = Array.from({ length: USERS }, (_, i) => fakeUser(i));
  await importSeed(db, parseMasterKey(masterKey), { merchants: [{ id: MERCHANT_ID, status: 'active', keys: [MERCHANT_KEY] }], users });
  await db.destroy();

  // One distinct signed path per request of every validatesignature run, warm-ups included, and one for its pre-flight.
  const perRun = MAX_RATE * (WARMUP + DURATION) + 1;
  const runs = ROUNDS * WORKER_COUNTS.length;
  const pathsFile = join(dir, 'signed-paths.txt');
  await writeSignedPaths(pathsFile, perRun * runs);
  let nextPath = 1;

  const env = {
    DATABASE_URL: url.toString(),
    MASTER_KEY: masterKey,
    PUBLIC_URL,
    TIMESTAMP_TOLERANCE: String(TIMESTAMP_TOLERANCE),
    CURSOR_SECRET: 'bench-cursor-secret-0123456789abcdef',
    // One JSON line per request would measure the pipe to this process as much as the server.
    ACCESS_LOG: 'false',
    LOG_LEVEL: 'warn',
  };
  const authorization = `Basic ${Buffer.from(`${MERCHANT_ID}:${MERCHANT_KEY}`).toString('base64')}`;
  const results = new Map<string, Measured[]>();

  console.log(
    `bench:workers on ${availableParallelism()} cores (${cpus()[0]?.model ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, ${RUNTIME} ${runtimeVersion()}, ` +
      `${version.v}, autocannon ${CONNECTIONS} connections, ${ROUNDS} rounds of ${DURATION} s after ${WARMUP} s warm-up, ${new Date().toISOString()}`,
  );
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? [...WORKER_COUNTS] : [...WORKER_COUNTS].reverse();
    for (const workers of order) {
      const started = await startServer(workers, env);
      server = started.child;
      const first = nextPath;
      nextPath += perRun;
      for (const caseId of CASES) {
        const spec: { url: string; path: string; headers: Record<string, string>; paths?: { file: string; first: number; count: number } } =
          caseId === 'validatesignature'
            ? { url: started.url, path: '/', headers: {}, paths: { file: pathsFile, first, count: perRun } }
            : { url: started.url, path: `/merchant/users/${SINGLE_USER}`, headers: { authorization } };
        // One real request first: a 200 that accepts the signature or finds the user, or the bench stops.
        const check = await fetch(`${started.url}${spec.paths ? signedPathAt(pathsFile, first + perRun - 1) : spec.path}`, { headers: spec.headers });
        const body = await check.text();
        if (check.status !== 200 || !(caseId === 'validatesignature' ? body === '{"status":"ok","is_valid":true}' : body.includes(SINGLE_USER))) {
          throw new Error(`${caseId} with WORKERS=${workers}: pre-flight ${check.status} ${body.slice(0, 300)}`);
        }
        // The warm-up takes the first paths of the run's slice, the measurement the rest.
        const warmupPaths = spec.paths && { ...spec.paths, count: MAX_RATE * WARMUP };
        await runAutocannon({ ...spec, paths: warmupPaths, connections: CONNECTIONS, seconds: WARMUP, pin: false });
        const measuredPaths = spec.paths && { ...spec.paths, first: first + MAX_RATE * WARMUP, count: MAX_RATE * DURATION };
        const { result, ...cores } = await measuredCpu(started.child.pid!, () => runAutocannon({ ...spec, paths: measuredPaths, connections: CONNECTIONS, seconds: DURATION, pin: false }));
        const key = `${caseId}/${workers}`;
        results.set(key, [...(results.get(key) ?? []), { ...result, ...cores }]);
        console.log(
          `round ${round + 1} WORKERS=${workers} ${caseId}: ${fmt(result.rps)} req/s, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, failures ${result.non2xx + result.socketErrors}${result.wrapped ? ` (salts repeated ${result.wrapped}x)` : ''}; ` +
            `cores used: server ${cores.server.toFixed(2)}, MariaDB ${cores.database.toFixed(2)}, load generator ${cores.loader.toFixed(2)}`,
        );
      }
      await stopServer(started.child);
      server = undefined;
    }
  }

  console.log(`\n| case | WORKERS=1 req/s | WORKERS=2 req/s | 2/1 | p99 ms (1 / 2) | cores: server / MariaDB / load generator (1) | (2) | failures |`);
  console.log('|---|--:|--:|--:|--:|--:|--:|--:|');
  for (const caseId of CASES) {
    const [one, two] = WORKER_COUNTS.map((workers) => results.get(`${caseId}/${workers}`)!);
    const rps = (list: Measured[]) => median(list.map((r) => r.rps));
    const p99 = (list: Measured[]) => median(list.map((r) => r.p99Ms));
    const cores = (list: Measured[]) => (['server', 'database', 'loader'] as const).map((party) => median(list.map((r) => r[party])).toFixed(2)).join(' / ');
    const failures = [...one!, ...two!].reduce((sum, r) => sum + r.non2xx + r.socketErrors, 0);
    console.log(`| ${caseId} | ${fmt(rps(one!))} | ${fmt(rps(two!))} | ${(rps(two!) / rps(one!)).toFixed(2)}x | ${p99(one!)} / ${p99(two!)} | ${cores(one!)} | ${cores(two!)} | ${failures} |`);
  }
  console.log(`\nper round, req/s: ${CASES.map((caseId) => `${caseId} ${WORKER_COUNTS.map((w) => `${w}: ${results.get(`${caseId}/${w}`)!.map((r) => fmt(r.rps)).join(', ')}`).join('; ')}`).join(' | ')}`);
} finally {
  if (server) await stopServer(server);
  await admin.query(`DROP DATABASE IF EXISTS \`${database}\``);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
}
