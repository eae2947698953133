/**
 * `exportUsers()` of merchant-api/client on 1,000,000 users: the rate and
 * the client's memory. A child process serves the users from the memory
 * storage (the library's MemoryStorage and Node adapter); this process runs
 * the client, so its RSS and CPU time are the client's alone (the two share
 * the machine's cores, so the rate is the pair's). The peak is the kernel's
 * high-water mark (VmHWM, reset just before the export), with polling as a
 * fallback. For comparison, the same list through `users()` (pages of 1000).
 *
 *   npm run bench:client                       # 1,000,000 users
 *   BENCH_USERS=200000 npm run bench:client    # fewer
 *
 * Writes bench/results/client-export-<time>.json and prints a summary.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { createMerchantApi, silentLogger } from '../src/index.js';
import { createMerchantClient, type UserRecord } from '../src/client/index.js';
import { MemoryStorage } from '../src/storage/memory/index.js';
import { serve } from '../adapters/node.js';
import { makeUsers, MERCHANT_ID, MERCHANT_KEY } from './servers/data.mjs';

const USERS = Number(process.env.BENCH_USERS ?? 1_000_000);
const WARM_MERCHANT = 'warm-up-merchant';
const WARM_USERS = 20_000;
const MB = 1_000_000;

if (process.argv.includes('--serve')) await runServer();
else await runBench();

/** The child: USERS users of the bench merchant, and a small merchant for the warm-up. */
async function runServer(): Promise<void> {
  const users = makeUsers(USERS).map((user) => ({ merchant_id: MERCHANT_ID, ...user }));
  const warm = makeUsers(WARM_USERS).map((user) => ({ merchant_id: WARM_MERCHANT, ...user }));
  const storage = new MemoryStorage({
    merchants: [
      { id: MERCHANT_ID, status: 'active', keys: [MERCHANT_KEY] },
      { id: WARM_MERCHANT, status: 'active', keys: [MERCHANT_KEY] },
    ],
    users: [...users, ...warm] as never,
  });
  users.length = 0;
  const api = createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false });
  const served = await serve(api, { port: 0, hostname: '127.0.0.1' });
  console.log(`READY ${served.url}`);
  process.on('SIGTERM', () => void served.close().finally(() => process.exit(0)));
}

function memory(): { rss: number; hwm: number } {
  try {
    const text = readFileSync('/proc/self/status', 'utf8');
    const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(text)?.[1] ?? NaN) * 1024;
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch {
    const rss = process.memoryUsage.rss();
    return { rss, hwm: Number.NaN };
  }
}

/** Resets VmHWM to the current RSS (Linux >= 4.0); false where it cannot. */
function resetPeak(): boolean {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch {
    return false;
  }
}

interface Measured {
  users: number;
  seconds: number;
  usersPerSecond: number;
  rssBeforeMb: number;
  peakRssGrowthMb: number;
  peakSource: 'VmHWM' | 'polling';
  heapUsedAfterMb: number;
  /** CPU time of this process (the client) per user, and the rate one core would give if the server cost nothing. */
  clientCpuSeconds: number;
  usersPerClientCpuSecond: number;
}

async function measure(label: string, iterate: () => AsyncIterable<UserRecord>, expected: number): Promise<Measured> {
  const before = memory().rss;
  const viaHwm = resetPeak();
  let polled = before;
  const poll = setInterval(() => (polled = Math.max(polled, memory().rss)), 20);
  const started = performance.now();
  const cpu = process.cpuUsage();
  let count = 0;
  let previous = '';
  for await (const user of iterate()) {
    // Strictly increasing ids: every user once, in order.
    if (!(user.shared_user_id > previous)) throw new Error(`${label}: ${user.shared_user_id} after ${previous}`);
    previous = user.shared_user_id;
    count++;
  }
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const cpuSeconds = (used.user + used.system) / 1e6;
  clearInterval(poll);
  const after = memory();
  polled = Math.max(polled, after.rss);
  if (count !== expected) throw new Error(`${label}: ${count} users, expected ${expected}`);
  const peak = viaHwm && Number.isFinite(after.hwm) ? after.hwm : polled;
  return {
    users: count,
    seconds: round(seconds, 2),
    usersPerSecond: Math.round(count / seconds),
    rssBeforeMb: round(before / MB, 1),
    peakRssGrowthMb: round((peak - before) / MB, 1),
    peakSource: viaHwm && Number.isFinite(after.hwm) ? 'VmHWM' : 'polling',
    heapUsedAfterMb: round(process.memoryUsage().heapUsed / MB, 1),
    clientCpuSeconds: round(cpuSeconds, 2),
    usersPerClientCpuSecond: Math.round(count / cpuSeconds),
  };
}

async function runBench(): Promise<void> {
  const script = fileURLToPath(import.meta.url);
  const startedServer = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx', script, '--serve'], { env: { ...process.env, BENCH_USERS: String(USERS) }, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /READY (\S+)/.exec(output);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`the server exited with ${code}:\n${output}`)));
  });
  console.log(`server with ${USERS.toLocaleString('en')} users ready in ${((Date.now() - startedServer) / 1000).toFixed(1)} s at ${url}`);
  try {
    const client = createMerchantClient({ baseUrl: url, merchantId: MERCHANT_ID, apiKey: MERCHANT_KEY, timeoutMs: 60_000 });
    const warm = createMerchantClient({ baseUrl: url, merchantId: WARM_MERCHANT, apiKey: MERCHANT_KEY });
    // Warm-up: the parser and the fetch path compiled, on a small list.
    for (let i = 0; i < 3; i++) await measure('warm-up', () => warm.exportUsers(), WARM_USERS);

    const exported = await measure('exportUsers()', () => client.exportUsers(), USERS);
    const paged = await measure('users()', () => client.users({ pageSize: 1000 }), USERS);
    const result = {
      date: new Date().toISOString(),
      users: USERS,
      node: process.version,
      machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, memoryGb: round(os.totalmem() / 1e9, 1), platform: `${os.platform()} ${os.release()}` },
      exportUsers: exported,
      usersPaged1000: paged,
    };
    mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
    const file = new URL(`./results/client-export-${result.date.replace(/[:.]/g, '-')}.json`, import.meta.url);
    writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
    console.log('');
    console.log('| method | users | seconds | users/s | client CPU s | users per client CPU s | RSS before (MB) | peak RSS growth (MB) |');
    console.log('|---|---|---|---|---|---|---|---|');
    for (const [name, m] of [['exportUsers()', exported], ['users() (pages of 1000)', paged]] as const) {
      console.log(
        `| ${name} | ${m.users.toLocaleString('en')} | ${m.seconds} | ${m.usersPerSecond.toLocaleString('en')} | ${m.clientCpuSeconds} | ${m.usersPerClientCpuSecond.toLocaleString('en')} | ${m.rssBeforeMb} | ${m.peakRssGrowthMb} (${m.peakSource}) |`,
      );
    }
    console.log(`\n${process.version}, ${result.machine.cpus} × ${result.machine.cpu}; written to ${fileURLToPath(file)}`);
    if (exported.peakRssGrowthMb >= 100) {
      console.error(`exportUsers() grew RSS by ${exported.peakRssGrowthMb} MB: over the 100 MB budget.`);
      process.exitCode = 1;
    }
  } finally {
    child.kill('SIGTERM');
  }
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
