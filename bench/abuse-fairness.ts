/**
 * Part of `npm run bench:abuse`: one merchant's abuse must not starve
 * another, and credentials cannot be tried at speed. Against the standalone
 * server on Node (memory storage, a generated seed, pinned to core 0),
 * measured in one run:
 *
 * 1. Heavy listings: merchant A runs 24 concurrent listings with a filter
 *    that matches nothing (`joined_after=2099-...`), again and again, from a
 *    process of its own pinned to core 1; merchant B's single-user reads are
 *    timed, one at a time, from this process, before (unloaded) and during,
 *    2 s after A started. A's 24 clients three ways: through the merchant
 *    client (bench/abuse-heavy-clients.ts: waits as Retry-After says, but one
 *    Node process of it cannot fill the server's core); wrk with 24
 *    connections that wait as Retry-After says (bench/wrk/retry-after.lua:
 *    fast enough to fill it; the goal's figure); and the same wrk ignoring
 *    Retry-After. Each against the server with fair sharing (the default)
 *    and with FAIR_SHARE=false, one server after the other. Goal: B's p50
 *    and p99 within 2x of unloaded. (Before, A's clients ran in this process,
 *    so B's timing also measured this process's own event loop.)
 * 2. Brute force: 1,000 wrong keys for merchant A from one address. Goal:
 *    429 after the limit, and no storage read for the refused ones (counted
 *    on the metrics endpoint).
 *
 * Options: --users=N (A's users, default 200000), --seconds=S (per phase,
 * default 10), --only=on|off (one server only), --cli=path/to/cli.js (another
 * build, for before/after figures; one that predates FAIR_SHARE ignores it).
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { users: { type: 'string', default: '200000' }, seconds: { type: 'string', default: '10' }, only: { type: 'string' }, cli: { type: 'string', default: 'dist/cli.js' } } });
const USERS = Number(values.users);
const SECONDS = Number(values.seconds);
const ROOT = new URL('../', import.meta.url).pathname;

const A = { id: 'heavy', key: 'heavy-key' };
const B = { id: 'bystander', key: 'bystander-key' };
const auth = (m: { id: string; key: string }) => ({ authorization: `Basic ${Buffer.from(`${m.id}:${m.key}`).toString('base64')}` });

function seedFile(): { path: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'merchant-api-abuse-'));
  const path = join(dir, 'seed.json');
  const user = (merchant: string, i: number) =>
    JSON.stringify({
      merchant_id: merchant, shared_user_id: `u-${String(i).padStart(8, '0')}`, first_name: 'Ada', last_name: 'Lovelace', email_address: `u${i}@example.com`,
      street: 'Street 1', zip_code: '10000', city: 'Berlin', state: null, country: 'de', preferred_language: 'de',
      date_joined: new Date(Date.UTC(2015, 0, 1) + i * 60_000).toISOString(), deactivated_at: null, agreed_to_terms_and_conditions: null, agreed_to_marketing: null,
    });
  const users: string[] = [];
  for (let i = 0; i < USERS; i++) users.push(user(A.id, i));
  for (let i = 0; i < 100; i++) users.push(user(B.id, i));
  writeFileSync(path, `{"merchants":[${JSON.stringify({ id: A.id, keys: [A.key] })},${JSON.stringify({ id: B.id, keys: [B.key] })}],"users":[${users.join(',')}]}`);
  return { path, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

async function startServer(seed: string, fairShare: boolean): Promise<{ url: string; metrics: string; pid: number; stop(): Promise<void> }> {
  const child = spawn('taskset', ['-c', '0', process.execPath, values.cli!, 'serve'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', METRICS_PORT: '0', SEED_FILE: seed, ACCESS_LOG: 'false', LOG_LEVEL: 'error', FAIR_SHARE: String(fairShare), ...(process.env.FAIR_SHARE_CPU ? { FAIR_SHARE_CPU: process.env.FAIR_SHARE_CPU } : {}) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const [url, metrics] = await new Promise<[string, string]>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const main = /listening on (http:\/\/\S+)/.exec(out);
      const scrape = /Metrics: (http:\/\/\S+)/.exec(out);
      if (main && scrape) resolve([main[1]!, scrape[1]!]);
    });
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${out}`)));
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { url, metrics, pid: child.pid!, stop: async () => void (child.kill('SIGTERM'), await exited) };
}

/** CPU seconds the process used so far (user + system, from /proc). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

/** Times B's single-user reads, one at a time, for `seconds`; answers other than 200 are counted (and timed). */
async function timeBystander(url: string, seconds: number): Promise<{ p50: number; p99: number; count: number; other: Record<string, number> }> {
  const times: number[] = [];
  const other: Record<string, number> = {};
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    const started = performance.now();
    const response = await fetch(`${url}/merchant/users/u-00000042`, { headers: auth(B) });
    await response.arrayBuffer();
    if (response.status !== 200) other[response.status] = (other[response.status] ?? 0) + 1;
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 0.5), p99: percentile(times, 0.99), count: times.length, other };
}

async function storageReads(metrics: string): Promise<number> {
  const text = await (await fetch(metrics)).text();
  const line = text.split('\n').find((l) => l.startsWith('merchant_api_storage_operation_duration_seconds_count{operation="getMerchant"}'));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

interface HeavyResult {
  seconds: number;
  calls: number;
  failedCalls: number;
  answers: Record<string, number>;
}

type HeavyMode = 'sdk' | 'wrk-honour' | 'wrk-ignore';

/** Starts A's 24 clients in their own process on core 1; `stop()` ends them and returns their counts. */
function startHeavy(url: string, mode: HeavyMode, seconds: number): { stop(): Promise<HeavyResult> } {
  if (mode !== 'sdk') {
    const args = ['-c', '1', 'wrk', '-t1', '-c24', `-d${seconds}s`, '--timeout', '10s', '-s', join(ROOT, 'bench/wrk/retry-after.lua'), '-H', `Authorization: ${auth(A).authorization}`];
    args.push(`${url}/merchant/users?limit=1&joined_after=2099-01-01T00:00:00Z`, '--', mode === 'wrk-honour' ? 'honour' : 'ignore');
    const done = new Promise<HeavyResult>((resolve, reject) =>
      execFile('taskset', args, { timeout: (seconds + 30) * 1000 }, (error, out) => {
        const line = /WRKSTATUS (\{.*\})/.exec(out);
        if (error || !line) return reject(error ?? new Error(`wrk printed no summary: ${out}`));
        const r = JSON.parse(line[1]!) as { requests: number; duration_us: number; answers: Record<string, number> };
        resolve({ seconds: r.duration_us / 1e6, calls: r.requests, failedCalls: 0, answers: r.answers });
      }),
    );
    return { stop: () => done };
  }
  const child = spawn('taskset', ['-c', '1', process.execPath, '--import', 'tsx', 'bench/abuse-heavy-clients.ts', `--url=${url}`, '--connections=24', `--id=${A.id}`, `--key=${A.key}`], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    async stop() {
      child.stdin!.end();
      await exited;
      return JSON.parse(out.trim().split('\n').at(-1)!) as HeavyResult;
    },
  };
}

const ratio = (a: number, b: number) => (a / b).toFixed(2);
const statuses = (answers: Record<string, number>) =>
  Object.entries(answers)
    .map(([s, n]) => `${n} x ${s}`)
    .join(', ');

const seed = seedFile();
try {
  console.log(`merchant ${A.id} has ${USERS.toLocaleString('en')} users; ${SECONDS} s per phase\n`);
  console.log('1. 24 concurrent heavy listings by one merchant against another merchant\'s single-user reads');
  const rows: string[] = [];
  for (const fairShare of values.only === 'off' ? [false] : values.only === 'on' ? [true] : [false, true]) {
    const server = await startServer(seed.path, fairShare);
    try {
      const label = fairShare ? 'FAIR_SHARE=true' : 'FAIR_SHARE=false';
      // Warm up, then the unloaded figures.
      await timeBystander(server.url, 2);
      const idleCpu = cpuSeconds(server.pid);
      const unloaded = await timeBystander(server.url, SECONDS);
      console.log(`   ${label}: bystander unloaded p50 ${unloaded.p50.toFixed(2)} ms, p99 ${unloaded.p99.toFixed(2)} ms (${unloaded.count} requests), server CPU ${Math.round(((cpuSeconds(server.pid) - idleCpu) / SECONDS) * 100)}% of a core`);
      for (const mode of ['sdk', 'wrk-honour', 'wrk-ignore'] as const) {
        const heavy = startHeavy(server.url, mode, SECONDS + 2);
        await sleep(2000);
        const cpuBefore = cpuSeconds(server.pid);
        const loaded = await timeBystander(server.url, SECONDS);
        const cpu = (cpuSeconds(server.pid) - cpuBefore) / SECONDS;
        const result = await heavy.stop();
        const met = loaded.p50 <= 2 * unloaded.p50 && loaded.p99 <= 2 * unloaded.p99 && Object.keys(loaded.other).length === 0;
        const who = { sdk: 'the merchant client (honours Retry-After)', 'wrk-honour': 'wrk honouring Retry-After', 'wrk-ignore': 'wrk ignoring Retry-After' }[mode];
        console.log(`   ${label}, ${who}:`);
        console.log(`     heavy merchant: ${Math.round((result.answers['200'] ?? 0) / result.seconds)} listings/s answered 200; answers ${statuses(result.answers)} in ${result.seconds.toFixed(1)} s; server CPU ${Math.round(cpu * 100)}% of a core${mode === 'sdk' ? ` (${result.failedCalls} of ${result.calls} calls still refused after the client's retries)` : ''}`);
        console.log(`     bystander: p50 ${loaded.p50.toFixed(2)} ms, p99 ${loaded.p99.toFixed(2)} ms (${loaded.count} requests${Object.keys(loaded.other).length ? `, NOT 200: ${statuses(loaded.other)}` : ''}): ${ratio(loaded.p50, unloaded.p50)}x and ${ratio(loaded.p99, unloaded.p99)}x unloaded (goal <= 2x): ${met ? 'met' : 'MISSED'}`);
        rows.push(`| ${label} | ${who} | ${unloaded.p50.toFixed(2)} / ${unloaded.p99.toFixed(2)} | ${loaded.p50.toFixed(2)} / ${loaded.p99.toFixed(2)} | ${ratio(loaded.p50, unloaded.p50)}x / ${ratio(loaded.p99, unloaded.p99)}x | ${Math.round((result.answers['200'] ?? 0) / result.seconds)}/s | ${Math.round(cpu * 100)}% |`);
        await sleep(1000);
      }
      if (fairShare) await bruteForce(server);
    } finally {
      await server.stop();
    }
  }
  console.log('\n| server | heavy clients | bystander unloaded p50 / p99 ms | loaded p50 / p99 ms | ratio | heavy 200s | server CPU |');
  console.log('|---|---|--:|--:|--:|--:|--:|');
  for (const row of rows) console.log(row);
} finally {
  seed.remove();
}

async function bruteForce(server: { url: string; metrics: string }): Promise<void> {
  const readsBefore = await storageReads(server.metrics);
  const counts = new Map<number, number>();
  const started = performance.now();
  // A new connection for each guess: on a kept connection, each 429 after the first would come only
  // when its Retry-After is up (src/limits/tarpit.ts; bench/abuse-auth.ts measures that).
  for (let i = 0; i < 1000; i++) {
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(`${server.url}/merchant/users?limit=1`, { agent: false, headers: auth({ id: A.id, key: `guess-${i}` }) }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      req.on('error', reject);
      req.end();
    });
    counts.set(status, (counts.get(status) ?? 0) + 1);
  }
  const elapsed = (performance.now() - started) / 1000;
  const reads = (await storageReads(server.metrics)) - readsBefore;
  console.log('\n2. brute force: 1,000 wrong keys for one merchant from one address, a new connection each');
  console.log(`   answers: ${[...counts].map(([s, n]) => `${n} x ${s}`).join(', ')} in ${elapsed.toFixed(1)} s`);
  console.log(`   storage reads (getMerchant) for them: ${reads} (goal: only the ones before the block, 10): ${reads === (counts.get(401) ?? 0) && reads <= 10 ? 'met' : 'MISSED'}\n`);
}
