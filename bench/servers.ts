/**
 * The servers under test and how to start one: pinned to core 0 with
 * `taskset`, on a free loopback port, ready once it prints `READY <port>`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CaseId } from './options.js';
import { CURSOR_SECRET, makeUsers, MERCHANT_ID, MERCHANT_KEY, PUBLIC_URL, SINGLE_USER_ID, TIMESTAMP_TOLERANCE } from './servers/data.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = `${ROOT}node_modules/.bin/`;

export interface ServerDef {
  id: string;
  label: string;
  /** Command and arguments, relative paths from the project root. */
  command: string[];
  /** Cases it answers; the constant server answers one fixed body for anything. */
  cases: 'constant' | 'all';
  /** Why it cannot run here, if it cannot. */
  unavailable?: () => string | undefined;
  env?: Record<string, string>;
  /** The line that says it listens, its port in the first group; default `READY <port>` (bench/servers/data.mjs). */
  ready?: RegExp;
  /** Done once before the server is first started (the CLI's seed file). */
  prepare?: () => void;
}

const runtimeMissing = (bin: string, dist: string) => () =>
  !existsSync(`${BIN}${bin}`) ? `${bin} is not installed (npm install)` : !existsSync(`${ROOT}bench/.dist/${dist}`) ? `dist/${dist} was not built (adapters/${bin}.ts missing?)` : undefined;

/**
 * The standalone server as a user deploys it (`npm start`: `node dist/cli.js
 * serve`), every default on, the bench's merchant and users in a seed file,
 * standard output (its access log) sent to a file like every server's here.
 * Only what the bench needs is set: the public URL the paths are signed for,
 * the wide `ts` window, the cursor secret, the address, and the merchant's
 * listings uncapped as on (2) (MERCHANT_CONCURRENCY caps only listings, the
 * page case: one merchant is the whole load here).
 */
export function cliServer(id: string, label: string, dist: string, env: Record<string, string> = {}): ServerDef {
  return {
    id,
    label,
    command: ['node', `${dist}/cli.js`, 'serve'],
    cases: 'all',
    // Settings of the caller's environment that would make it another server (MySQL, Redis, workers, metrics) are emptied, which the CLI reads as unset.
    env: { DATABASE_URL: '', REDIS_URL: '', WORKERS: '', METRICS_PORT: '', SEED_FILE: CLI_SEED, PUBLIC_URL, TIMESTAMP_TOLERANCE: String(TIMESTAMP_TOLERANCE), CURSOR_SECRET, HOST: '127.0.0.1', MERCHANT_CONCURRENCY: '10000', ...env },
    // The banner on standard error (stdout is a file): `merchant-api listening on http://127.0.0.1:<port> (...)`.
    ready: /listening on https?:\/\/[^\s]*:(\d+) /,
    prepare: writeCliSeed,
  };
}

/** The seed the CLI servers load: the merchant and the users every other server holds (bench/servers/data.mjs). */
const CLI_SEED = `${ROOT}bench/results/cli-seed.json`;

function writeCliSeed(): void {
  mkdirSync(`${ROOT}bench/results`, { recursive: true });
  const users = makeUsers().map((user) => ({ merchant_id: MERCHANT_ID, ...user }));
  writeFileSync(CLI_SEED, JSON.stringify({ merchants: [{ id: MERCHANT_ID, status: 'active', keys: [MERCHANT_KEY] }], users }));
}

export const SERVERS: ServerDef[] = [
  { id: 'node-constant', label: '(0) node:http, constant JSON', command: ['node', 'bench/servers/constant-node.mjs'], cases: 'constant' },
  { id: 'fetch-constant', label: '(0b) fetch handler on @hono/node-server, constant JSON', command: ['node', 'bench/servers/fetch-constant-node.mjs'], cases: 'constant' },
  { id: 'node-plain', label: '(1) node:http, the plain peer (access line by process.stdout.write)', command: ['node', 'bench/servers/plain-node.mjs'], cases: 'all' },
  { id: 'node-plain-stream', label: '(1b) node:http, access line through an fs.WriteStream', command: ['node', 'bench/servers/plain-node-stream.mjs'], cases: 'all' },
  { id: 'merchant-api-node', label: '(2) merchant-api, Node', command: ['node', 'bench/servers/merchant-api.mjs'], cases: 'all' },
  {
    id: 'merchant-api-node-fetch',
    label: '(2f) merchant-api, Node, through Request and Response (MERCHANT_API_FETCH_OBJECTS=1)',
    command: ['node', 'bench/servers/merchant-api.mjs'],
    cases: 'all',
    env: { MERCHANT_API_FETCH_OBJECTS: '1' },
  },
  {
    id: 'merchant-api-node-nolog',
    label: '(2n) merchant-api, Node, every default but the access log',
    command: ['node', 'bench/servers/merchant-api.mjs'],
    cases: 'all',
    // Tracing hooks and fair sharing on, the access log off (bench/servers/merchant-api.mjs).
    env: { BENCH_OBSERVABILITY: 'trace' },
  },
  {
    id: 'merchant-api-node-quiet',
    label: "(2q) merchant-api, Node, no access log and no tracing hooks",
    command: ['node', 'bench/servers/merchant-api.mjs'],
    cases: 'all',
    env: { BENCH_OBSERVABILITY: 'off' },
  },
  cliServer('merchant-api-cli', '(6) merchant-api serve (the CLI, every default on)', 'bench/.dist'),
  cliServer('merchant-api-cli-nolog', '(6n) merchant-api serve, ACCESS_LOG=false', 'bench/.dist', { ACCESS_LOG: 'false' }),
  { id: 'hono-node', label: '(3) Hono app, Node', command: ['node', 'bench/servers/hono-node.mjs'], cases: 'all' },
  {
    id: 'merchant-api-bun',
    label: '(4) merchant-api, Bun',
    command: [`${BIN}bun`, 'bench/servers/merchant-api.mjs'],
    cases: 'all',
    unavailable: runtimeMissing('bun', 'bun.js'),
  },
  {
    id: 'merchant-api-deno',
    label: '(5) merchant-api, Deno',
    // BENCH_DENO_V8_FLAGS, e.g. --trace-gc or --single-threaded-gc, to investigate Deno's latency tail.
    command: [`${BIN}deno`, 'run', '-A', ...(process.env.BENCH_DENO_V8_FLAGS ? [`--v8-flags=${process.env.BENCH_DENO_V8_FLAGS}`] : []), 'bench/servers/merchant-api.mjs'],
    cases: 'all',
    unavailable: runtimeMissing('deno', 'deno.js'),
  },
];

/** merchant-api on Node from another build, for before/after comparisons. */
export function baselineServer(dist: string): ServerDef {
  return { id: 'merchant-api-node-baseline', label: "(2') merchant-api, Node, baseline build", command: ['node', 'bench/servers/merchant-api.mjs'], cases: 'all', env: { BENCH_DIST: dist } };
}

/** The CLI server (6) from another build, for before/after comparisons. */
export function baselineCliServer(dist: string): ServerDef {
  return cliServer('merchant-api-cli-baseline', "(6') merchant-api serve, baseline build", dist.replace(/\/$/, ''));
}

export interface Running {
  def: ServerDef;
  child: ChildProcess;
  pid: number;
  url: string;
  stop(): Promise<void>;
}

/** Starts `def` on core 0 (when taskset is there) and waits for its READY line. */
export async function startServer(def: ServerDef, options: { pin: boolean; runtimeArgs?: string[]; env?: Record<string, string> }): Promise<Running> {
  let command = [...def.command];
  // Runtime flags (--cpu-prof...) go right after the node or bun binary.
  if (options.runtimeArgs) command = [command[0]!, ...options.runtimeArgs, ...command.slice(1)];
  // taskset execs the server, so the child's pid is the server's (RSS is read from /proc/<pid>).
  if (options.pin) command = ['taskset', '-c', '0', ...command];
  // Standard output (merchant-api's access log) goes to a file, as a deploy
  // would send it to a file or a log collector; the harness reads only stderr.
  mkdirSync(`${ROOT}bench/results`, { recursive: true });
  const stdout = openSync(`${ROOT}bench/results/${def.id}.stdout.log`, 'w');
  const child = spawn(command[0]!, command.slice(1), {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', NO_COLOR: '1', ...def.env, ...options.env },
    stdio: ['ignore', stdout, 'pipe'],
  });
  closeSync(stdout);
  let stderr = '';
  const port = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${def.id} did not start within 60 s: ${stderr}`)), 60_000);
    let ready = false;
    child.stderr!.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
      if (ready) return;
      const match = (def.ready ?? /READY (\d+)/).exec(stderr);
      if (match) {
        ready = true;
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${def.id} exited with ${code} before it was ready: ${stderr}`));
    });
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    def,
    child,
    pid: child.pid!,
    url: `http://127.0.0.1:${port}`,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The case's request: path and headers (the validatesignature path comes from the signed file). */
export function caseRequest(caseId: CaseId | 'constant', authorization: string): { path: string; headers: Record<string, string> } {
  switch (caseId) {
    case 'constant':
      return { path: '/', headers: {} };
    case 'validatesignature':
      return { path: '/validatesignature', headers: {} };
    case 'user':
      return { path: `/merchant/users/${SINGLE_USER_ID}`, headers: { authorization } };
    case 'page':
      return { path: '/merchant/users?limit=100', headers: { authorization } };
  }
}

/**
 * CPU seconds the process has used (user + system, all threads), from
 * /proc/<pid>/stat. Other work on the machine can take the server's core;
 * CPU used per request stays meaningful when req/s does not.
 */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces), 1-based: utime is 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

/** The MariaDB/MySQL server process on this machine, if one runs here, to account for its CPU. */
export function databasePid(): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (/^(mariadbd|mysqld)$/.test(readFileSync(`/proc/${entry}/comm`, 'utf8').trim())) return Number(entry);
    } catch {
      // Gone meanwhile.
    }
  }
  return undefined;
}
