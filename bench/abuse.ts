/**
 * `npm run bench:abuse`: a flood of fresh salts against the memory replay store
 * (docs/protocol.md#a-bounded-replay-store). The standalone server runs as
 * `node --max-old-space-size=256 dist/cli.js serve` pinned to core 0; wrk, pinned
 * to core 1, sends validly signed requests with a new salt each, as fast as the
 * server answers them, from two merchants, for 120 s. MAX_SALTS is set as an
 * operator expecting that rate would: rate x TIMESTAMP_TOLERANCE (300 s), with
 * the rate measured by a short calibration flood first, plus a quarter.
 *
 * Measured in the one run and printed: the flood's rate and answers, the
 * server's RSS at the start, middle and end of the flood (goal: alive, flat),
 * and a third merchant's validatesignature latency, first unloaded and then
 * during the flood (goal: p99 within 2x of unloaded). Then, as a control, the
 * same latency during an equally fast flood of replays (no new salt): what
 * sharing the server's one core with any flood costs, store or not.
 *
 * Options: --seconds=S (flood length, default 120), --connections=N (flood
 * connections, default 4), --max-salts=N (skip the calibration),
 * --cli=path/to/cli.js (another build, e.g. a worktree of an older commit, for
 * before/after figures), --runtime=node|deno, --fair-share=off (FAIR_SHARE=false:
 * the replay store alone takes the flood; by default fair sharing refuses the
 * two flooding merchants their excess while the bystander is served,
 * docs/security.md#fair-sharing).
 * Needs `npm run build` and wrk.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { runWrk, type LoadResult } from './load.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '120' },
    connections: { type: 'string', default: '4' },
    'max-salts': { type: 'string' },
    cli: { type: 'string', default: 'dist/cli.js' },
    runtime: { type: 'string', default: 'node' },
    'fair-share': { type: 'string', default: 'on' },
  },
});
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
const ROOT = new URL('../', import.meta.url).pathname;
const CLI = resolve(ROOT, values.cli!);
const RUNTIME = values.runtime as 'node' | 'deno';
const TOLERANCE = 300;
const HEAP_MB = 256;
const PUBLIC_URL = 'http://abuse.bench.example';
/** Seconds the bystander is timed, unloaded and then under the flood. */
const BYSTANDER_SECONDS = Math.max(5, Math.min(30, Math.floor(SECONDS / 4)));

const FLOOD = [
  { id: 'flood-a', key: 'flood-a-key-0123456789' },
  { id: 'flood-b', key: 'flood-b-key-0123456789' },
];
const BYSTANDER = { id: 'bystander', key: 'bystander-key-0123456789' };

if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first.`);
if (!/^wrk /m.test(`${spawnSync('wrk', ['-v'], { encoding: 'utf8' }).stdout ?? ''}`)) throw new Error('wrk is not installed.');

const work = mkdtempSync(join(tmpdir(), 'merchant-api-abuse-'));
const seedPath = join(work, 'seed.json');
writeFileSync(seedPath, JSON.stringify({ merchants: [...FLOOD, BYSTANDER].map(({ id, key }) => ({ id, keys: [key] })), users: [] }));

interface Server {
  url: string;
  pid: number;
  child: ChildProcess;
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

async function startServer(maxSalts: number): Promise<Server> {
  const command =
    RUNTIME === 'deno'
      ? [join(ROOT, 'node_modules/.bin/deno'), 'run', '--allow-net', '--allow-read', '--allow-env', `--v8-flags=--max-old-space-size=${HEAP_MB}`, CLI.replace(/cli\.js$/, 'cli-deno.js'), 'serve']
      : [process.execPath, `--max-old-space-size=${HEAP_MB}`, CLI, 'serve'];
  // taskset execs the server, so the child's pid is the server's.
  const child = spawn('taskset', ['-c', '0', ...command], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', SEED_FILE: seedPath, PUBLIC_URL, TIMESTAMP_TOLERANCE: String(TOLERANCE), MAX_SALTS: String(maxSalts), THROTTLE_AUTH: 'false', FAIR_SHARE: String(values['fair-share'] !== 'off'), ACCESS_LOG: 'false', LOG_LEVEL: 'error', DENO_NO_UPDATE_CHECK: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null))));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      output += d.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) resolve(match[1]!);
    });
    void exited.then((code) => reject(new Error(`server exited with ${code}: ${output}`)));
  });
  child.stdout!.resume();
  return {
    url,
    pid: child.pid!,
    child,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Resident memory of a process in MB, or undefined once it is gone. */
function rssMb(pid: number): number | undefined {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'));
    return line ? Number(line.split(/\s+/)[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Writes `count` signed validatesignature paths to a file, all of one length (bench/wrk/paths.lua
 * reads them by offset), each with its own salt, with a ts of now (so after the server started:
 * the memory store refuses a ts from before its start). Merchants alternate line by line.
 */
async function signPaths(file: string, merchants: { id: string; key: string }[], count: number): Promise<void> {
  const ts = Math.floor(Date.now() / 1000);
  const run = Date.now().toString(36);
  const base = encodeURIComponent(`${PUBLIC_URL}/validatesignature`);
  const out = createWriteStream(file);
  let chunk = '';
  for (let i = 0; i < count; i++) {
    const { id, key } = merchants[i % merchants.length]!;
    // Every character is unreserved, so the canonical query is the sorted pairs as they are.
    const query = `cp=${id}&salt=${run}-${i.toString(36).padStart(8, '0')}&ts=${ts}`;
    const hmac = createHmac('sha224', key).update(`GET&${base}&${encodeURIComponent(query)}`).digest('hex');
    chunk += `/validatesignature?${query}&hmac=${hmac}\n`;
    if (chunk.length > 1 << 20 || i === count - 1) {
      if (!out.write(chunk)) await once(out, 'drain');
      chunk = '';
    }
  }
  out.end();
  await once(out, 'finish');
}

/** wrk on core 1 through lines `first`.. of `file` (no line twice: each is a new salt). */
function load(url: string, file: string, first: number, count: number, seconds: number, connections: number): Promise<LoadResult> {
  return runWrk({ url, path: '', headers: {}, connections, seconds, paths: { file, first, count }, pin: true });
}

const ms = (n: number) => `${n.toFixed(2)} ms`;
const mb = (n: number | undefined) => (n === undefined ? 'gone' : `${n.toFixed(0)} MB`);

try {
  console.log(`salt flood on ${RUNTIME} (${CLI.replace(ROOT, '')}), fair sharing ${values['fair-share'] !== 'off' ? 'on' : 'off'}, heap limit ${HEAP_MB} MB, TIMESTAMP_TOLERANCE ${TOLERANCE} s, flood ${SECONDS} s with ${CONNECTIONS} connections\n`);

  // 1. Calibration: how fast does a flood go? An operator sizes MAX_SALTS for the rate it expects.
  let maxSalts: number;
  let expectedRate: number;
  if (values['max-salts'] === undefined) {
    const calibration = await startServer(2_000_000);
    const file = join(work, 'calibration.txt');
    await signPaths(file, FLOOD, 400_000);
    const result = await load(calibration.url, file, 1, 400_000, 5, CONNECTIONS);
    await calibration.stop();
    expectedRate = result.rps;
    maxSalts = Math.ceil((expectedRate * TOLERANCE * 1.25) / 100_000) * 100_000;
    console.log(`calibration: ${Math.round(expectedRate)} fresh salts/s -> MAX_SALTS=${maxSalts} (rate x ${TOLERANCE} s x 1.25), ${((maxSalts * 24) / 2 ** 20).toFixed(0)} MB of table`);
  } else {
    maxSalts = Number(values['max-salts']);
    expectedRate = maxSalts / TOLERANCE;
  }

  // 2. The measured server, and the signed paths it will be sent.
  const server = await startServer(maxSalts);
  const floodFile = join(work, 'flood.txt');
  const floodCount = Math.ceil(expectedRate * 1.3 * SECONDS);
  const bystanderFile = join(work, 'bystander.txt');
  // A warm-up, then the unloaded, the loaded and the control phase, each in lines of its own.
  const WARMUP = 20_000;
  const phase = 15_000 * BYSTANDER_SECONDS;
  const bystanderCount = WARMUP + 3 * phase;
  await signPaths(floodFile, FLOOD, floodCount);
  await signPaths(bystanderFile, [BYSTANDER], bystanderCount);
  console.log(`server ${server.url} (pid ${server.pid}); ${floodCount} flood paths and ${bystanderCount} bystander paths signed\n`);

  // 3. The bystander unloaded (after a short warm-up).
  await load(server.url, bystanderFile, 1, WARMUP, 2, 1);
  const unloaded = await load(server.url, bystanderFile, WARMUP + 1, phase, BYSTANDER_SECONDS, 1);
  const rssStart = rssMb(server.pid);
  console.log(`bystander unloaded: p50 ${ms(unloaded.p50Ms)}, p99 ${ms(unloaded.p99Ms)}, ${Math.round(unloaded.rps)} req/s, ${unloaded.non2xx} non-2xx`);
  console.log(`RSS before the flood: ${mb(rssStart)}`);

  // 4. The flood, with RSS sampled every second and the bystander timed in the middle of it.
  const samples: { t: number; rss: number | undefined }[] = [];
  const started = Date.now();
  let died: number | undefined;
  void server.exited.then(() => (died = (Date.now() - started) / 1000));
  const sampler = setInterval(() => samples.push({ t: (Date.now() - started) / 1000, rss: rssMb(server.pid) }), 1000);
  const flooding = load(server.url, floodFile, 1, floodCount, SECONDS, CONNECTIONS).catch((error: Error) => error);
  const lead = Math.max(2, Math.floor((SECONDS - BYSTANDER_SECONDS) / 2));
  await sleep(lead * 1000);
  const loaded = await load(server.url, bystanderFile, WARMUP + phase + 1, phase, BYSTANDER_SECONDS, 1).catch((error: Error) => error);
  const floodResult = await flooding;
  clearInterval(sampler);
  const alive = died === undefined && (await fetch(`${server.url}/healthz`).then((r) => r.status === 200, () => false));

  // 5. Control: the same flood, but of replays (the first 1,000 flood paths again: 400, no new
  // salt), so the share of the bystander's latency that any flood costs on a shared core shows.
  let control: LoadResult | Error | undefined;
  if (alive) {
    const replays = load(server.url, floodFile, 1, 1000, BYSTANDER_SECONDS + 4, CONNECTIONS).catch((error: Error) => error);
    await sleep(2000);
    control = await load(server.url, bystanderFile, WARMUP + 2 * phase + 1, phase, BYSTANDER_SECONDS, 1).catch((error: Error) => error);
    await replays;
  }
  const rssAt = (t: number) => samples.reduce<{ t: number; rss: number | undefined } | undefined>((best, s) => (best === undefined || Math.abs(s.t - t) < Math.abs(best.t - t) ? s : best), undefined)?.rss;
  const live = samples.filter((s) => s.rss !== undefined).map((s) => s.rss!);

  console.log('\nthe flood:');
  if (floodResult instanceof Error) console.log(`  wrk failed: ${floodResult.message.split('\n')[0]}`);
  else
    console.log(
      `  ${floodResult.requests} requests in ${floodResult.seconds.toFixed(0)} s: ${Math.round(floodResult.rps)}/s fresh salts, ${floodResult.non2xx} non-2xx (429/503 once MAX_SALTS is reached), ${floodResult.socketErrors} socket errors${floodResult.wrapped ? `, paths wrapped ${floodResult.wrapped} times` : ''}`,
    );
  console.log(`  server ${alive ? 'alive at the end' : `DIED after ${died?.toFixed(0) ?? '?'} s`}`);
  console.log(`  RSS: start ${mb(rssAt(1))}, middle ${mb(rssAt(SECONDS / 2))}, end ${mb(rssAt(SECONDS - 1))}; max ${mb(Math.max(...live))}`);
  const afterWarmup = samples.filter((s) => s.t >= Math.min(10, SECONDS / 4) && s.rss !== undefined).map((s) => s.rss!);
  if (afterWarmup.length > 1) console.log(`  RSS from ${Math.min(10, SECONDS / 4).toFixed(0)} s to the end: ${mb(Math.min(...afterWarmup))} to ${mb(Math.max(...afterWarmup))}`);
  console.log(`  (one line every 10 s: ${samples.filter((s, i) => i % 10 === 9).map((s) => `${s.t.toFixed(0)}s ${mb(s.rss)}`).join(', ')})`);

  console.log('\nthe bystander (another merchant, one connection):');
  console.log(`  unloaded: p50 ${ms(unloaded.p50Ms)}, p99 ${ms(unloaded.p99Ms)}`);
  if (loaded instanceof Error) console.log(`  during the flood: failed (${loaded.message.split('\n')[0]})`);
  else {
    console.log(`  during the flood: p50 ${ms(loaded.p50Ms)}, p99 ${ms(loaded.p99Ms)}, max ${ms(loaded.maxMs)}, ${loaded.non2xx} non-2xx, ${loaded.socketErrors} socket errors`);
    const ratio = loaded.p99Ms / unloaded.p99Ms;
    console.log(`  p99 ratio during/unloaded: ${ratio.toFixed(2)}x (goal <= 2x): ${ratio <= 2 && loaded.non2xx === 0 ? 'met' : 'MISSED'}; p50 ratio ${(loaded.p50Ms / unloaded.p50Ms).toFixed(2)}x`);
  }
  if (control !== undefined && !(control instanceof Error)) {
    console.log(
      `  control, during a flood of replays (no new salt): p50 ${ms(control.p50Ms)}, p99 ${ms(control.p99Ms)} (${(control.p99Ms / unloaded.p99Ms).toFixed(2)}x unloaded): what sharing one core with any flood costs`,
    );
  }

  const results = join(ROOT, 'bench/results');
  mkdirSync(results, { recursive: true });
  const file = join(results, `abuse-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(
    file,
    JSON.stringify(
      { runtime: RUNTIME, cli: CLI.replace(ROOT, ''), seconds: SECONDS, connections: CONNECTIONS, maxSalts, alive, died, flood: floodResult instanceof Error ? floodResult.message : floodResult, unloaded, loaded: loaded instanceof Error ? loaded.message : loaded, control: control instanceof Error ? control.message : control, rss: samples },
      null,
      2,
    ),
  );
  console.log(`\n${file.replace(ROOT, '')}`);
  await server.stop();
} finally {
  rmSync(work, { recursive: true, force: true });
}
