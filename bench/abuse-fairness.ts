/**
 * Part of `npm run bench:abuse`: one merchant's abuse must not starve
 * another, and credentials cannot be tried at speed. Against the standalone
 * server on Node (memory storage, a generated seed), measured in one run:
 *
 * 1. Heavy listings: merchant A runs 24 concurrent listings with a filter
 *    that matches nothing (`joined_after=2099-...`), again and again; merchant
 *    B's single-user reads are timed before (unloaded) and during. Goal: B's
 *    p50 and p99 within 2x of unloaded.
 * 2. Brute force: 1,000 wrong keys for merchant A from one address. Goal:
 *    429 after the limit, and no storage read for the refused ones (counted
 *    on the metrics endpoint).
 *
 * Options: --users=N (A's users, default 200000), --seconds=S (per phase, default 10).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { users: { type: 'string', default: '200000' }, seconds: { type: 'string', default: '10' } } });
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

async function startServer(seed: string): Promise<{ url: string; metrics: string; stop(): Promise<void> }> {
  const child = spawn('taskset', ['-c', '0', process.execPath, 'dist/cli.js', 'serve'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', METRICS_PORT: '0', SEED_FILE: seed, ACCESS_LOG: 'false', LOG_LEVEL: 'error' },
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
  return { url, metrics, stop: async () => void (child.kill('SIGTERM'), await exited) };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

/** Times B's single-user reads, one at a time, for `seconds`. */
async function timeBystander(url: string, seconds: number): Promise<{ p50: number; p99: number; count: number }> {
  const times: number[] = [];
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    const started = performance.now();
    const response = await fetch(`${url}/merchant/users/u-00000042`, { headers: auth(B) });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`bystander got ${response.status}`);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 0.5), p99: percentile(times, 0.99), count: times.length };
}

async function storageReads(metrics: string): Promise<number> {
  const text = await (await fetch(metrics)).text();
  const line = text.split('\n').find((l) => l.startsWith('merchant_api_storage_operation_duration_seconds_count{operation="getMerchant"}'));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

const seed = seedFile();
const server = await startServer(seed.path);
try {
  console.log(`server ${server.url}; merchant ${A.id} has ${USERS.toLocaleString('en')} users\n`);
  // Warm up, then the unloaded figures.
  await timeBystander(server.url, 2);
  const unloaded = await timeBystander(server.url, SECONDS);

  let stop = false;
  const statuses = new Map<number, number>();
  const heavy = Array.from({ length: 24 }, async () => {
    while (!stop) {
      const response = await fetch(`${server.url}/merchant/users?limit=1&joined_after=2099-01-01T00:00:00Z`, { headers: auth(A) });
      await response.arrayBuffer();
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      if (response.status === 429) await new Promise((resolve) => setTimeout(resolve, 5));
    }
  });
  const loaded = await timeBystander(server.url, SECONDS);
  stop = true;
  await Promise.all(heavy);

  const ratio = (a: number, b: number) => (a / b).toFixed(2);
  console.log('1. 24 concurrent heavy listings by one merchant');
  console.log(`   heavy merchant's answers: ${[...statuses].map(([s, n]) => `${n} x ${s}`).join(', ')}`);
  console.log(`   bystander single user, unloaded: p50 ${unloaded.p50.toFixed(2)} ms, p99 ${unloaded.p99.toFixed(2)} ms (${unloaded.count} requests)`);
  console.log(`   bystander single user, loaded:   p50 ${loaded.p50.toFixed(2)} ms, p99 ${loaded.p99.toFixed(2)} ms (${loaded.count} requests)`);
  console.log(`   ratio loaded/unloaded: p50 ${ratio(loaded.p50, unloaded.p50)}x, p99 ${ratio(loaded.p99, unloaded.p99)}x (goal <= 2x): ${loaded.p50 <= 2 * unloaded.p50 && loaded.p99 <= 2 * unloaded.p99 ? 'met' : 'MISSED'}`);

  const readsBefore = await storageReads(server.metrics);
  const counts = new Map<number, number>();
  const started = performance.now();
  for (let i = 0; i < 1000; i++) {
    const response = await fetch(`${server.url}/merchant/users?limit=1`, { headers: auth({ id: A.id, key: `guess-${i}` }) });
    await response.arrayBuffer();
    counts.set(response.status, (counts.get(response.status) ?? 0) + 1);
  }
  const elapsed = (performance.now() - started) / 1000;
  const reads = (await storageReads(server.metrics)) - readsBefore;
  console.log('\n2. brute force: 1,000 wrong keys for one merchant from one address');
  console.log(`   answers: ${[...counts].map(([s, n]) => `${n} x ${s}`).join(', ')} in ${elapsed.toFixed(1)} s`);
  console.log(`   storage reads (getMerchant) for them: ${reads} (goal: only the ones before the block, 10): ${reads === (counts.get(401) ?? 0) && reads <= 10 ? 'met' : 'MISSED'}`);
} finally {
  await server.stop();
  seed.remove();
}
