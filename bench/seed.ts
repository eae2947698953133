/**
 * `npm run bench:seed`: the memory storage at a million users (issue 13).
 * 1. Loading: writes 1,000,000 users (`fake-users.ts`) as a seed document and as NDJSON, then
 *    times in separate processes the streamed loader (`loadMemoryStorage`) against plain Node
 *    reading and parsing the same file (JSON.parse of the whole document; readline + JSON.parse
 *    of each line), alternating, best of `--rounds`. Reports the ratio, peak RSS (VmHWM) against
 *    the settled RSS after full collections, and settled bytes per user.
 * 2. Listings: every filtered case of `listing-cases.ts` at its first, a middle and its last page,
 *    records examined and latency, in process and over HTTP (bench/memory-server.ts), each
 *    against the first unfiltered page of the same run.
 * Options: --users=N (default 1000000), --big=N (also load N users, e.g. 5000000; NDJSON only,
 * one round, Node's default heap limit), --rounds=N (default 2), --skip-listings, --keep-files.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, totalmem, tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadMemoryStorage } from '../src/storage/memory/index.js';
import { MemoryUserIndex } from '../src/storage/memory/users.js';
import { MERCHANT, writeUsersFile } from './fake-users.js';
import { casesTable, CURSOR_SECRET, runCases } from './listing-cases.js';

const args = new Map(process.argv.slice(2).map((arg) => [arg.replace(/=.*$/, ''), arg.includes('=') ? arg.replace(/^[^=]*=/, '') : 'true']));
const USERS = Number(args.get('--users') ?? process.env.BENCH_USERS ?? 1_000_000);
const BIG = Number(args.get('--big') ?? 0);
const ROUNDS = Number(args.get('--rounds') ?? 2);
const MiB = 2 ** 20;

interface ChildResult {
  mode: string;
  users: number;
  ms: number;
  baseline: number;
  peak: number;
  settled: number;
}

const dir = mkdtempSync(join(tmpdir(), 'merchant-api-bench-seed-'));
console.log(`bench:seed on ${availableParallelism()} cores (${cpus()[0]?.model ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, ${new Date().toISOString()}`);

function child(mode: string, file: string, heapMiB?: number): ChildResult {
  const flags = ['--expose-gc', ...(heapMiB ? [`--max-old-space-size=${heapMiB}`] : []), '--import', 'tsx', 'bench/seed-child.ts', mode, file];
  const run = spawnSync(process.execPath, flags, { encoding: 'utf8', maxBuffer: 1 << 20 });
  if (run.status !== 0) throw new Error(`${mode} ${file} failed: ${run.stderr}`);
  return JSON.parse(run.stdout.trim().split('\n').at(-1)!) as ChildResult;
}

function measureLoad(label: string, file: string, plainMode: string, rounds: number, heapMiB?: number) {
  let plain: ChildResult | undefined;
  let load: ChildResult | undefined;
  for (let round = 0; round < rounds; round++) {
    // Alternating, so drift on a shared machine hits both.
    const order = round % 2 === 0 ? (['plain', 'load'] as const) : (['load', 'plain'] as const);
    for (const which of order) {
      const result = child(which === 'plain' ? plainMode : 'load', file, heapMiB);
      process.stderr.write(`  ${label} ${which}: ${result.ms} ms, peak ${(result.peak / MiB).toFixed(0)} MiB, settled ${(result.settled / MiB).toFixed(0)} MiB\n`);
      if (which === 'plain' && (!plain || result.ms < plain.ms)) plain = result;
      if (which === 'load' && (!load || result.ms < load.ms)) load = result;
    }
  }
  return { plain: plain!, load: load! };
}

try {
  const jsonFile = join(dir, 'seed.json');
  const ndjsonFile = join(dir, 'seed.ndjson');
  let started = performance.now();
  const jsonBytes = await writeUsersFile(jsonFile, USERS, 'json');
  const ndjsonBytes = await writeUsersFile(ndjsonFile, USERS, 'ndjson-seed');
  console.log(`files: ${USERS.toLocaleString('en-US')} users, ${(jsonBytes / MiB).toFixed(0)} MiB as a seed document, ${(ndjsonBytes / MiB).toFixed(0)} MiB as NDJSON (written in ${((performance.now() - started) / 1000).toFixed(1)} s)`);

  const rows: string[] = [
    '| file | plain Node (same file) | streamed loader | loader / plain | loader peak RSS | loader settled RSS | peak / settled | settled bytes per user |',
    '|---|--:|--:|--:|--:|--:|--:|--:|',
  ];
  const row = (label: string, plainLabel: string, { plain, load }: ReturnType<typeof measureLoad>) => {
    const perUser = (load.settled - load.baseline) / load.users;
    rows.push(
      `| ${label} | ${(plain.ms / 1000).toFixed(2)} s (${plainLabel}, peak ${(plain.peak / MiB).toFixed(0)} MiB) | ${(load.ms / 1000).toFixed(2)} s | ${(load.ms / plain.ms).toFixed(2)}x | ${(load.peak / MiB).toFixed(0)} MiB | ${(load.settled / MiB).toFixed(0)} MiB | ${(load.peak / load.settled).toFixed(2)}x | ${Math.round(perUser)} |`,
    );
  };
  console.log('\nLoading (best of each over the rounds; separate processes):');
  row(`${USERS.toLocaleString('en-US')} users, seed document`, 'JSON.parse of the whole file', measureLoad('json', jsonFile, 'plain-json', ROUNDS));
  row(`${USERS.toLocaleString('en-US')} users, NDJSON`, 'readline + JSON.parse a line', measureLoad('ndjson', ndjsonFile, 'plain-ndjson', ROUNDS));

  if (BIG > 0) {
    const bigFile = join(dir, 'big.ndjson');
    started = performance.now();
    const bigBytes = await writeUsersFile(bigFile, BIG, 'ndjson-seed');
    console.log(`\n${BIG.toLocaleString('en-US')} users as NDJSON: ${(bigBytes / MiB).toFixed(0)} MiB (written in ${((performance.now() - started) / 1000).toFixed(1)} s)`);
    // Node's default heap limit, as `merchant-api serve` runs (4 GiB on this machine).
    const big = measureLoad('big ndjson', bigFile, 'plain-ndjson', 1);
    row(`${BIG.toLocaleString('en-US')} users, NDJSON (default heap limit)`, 'readline + JSON.parse a line', big);
    rmSync(bigFile, { force: true });
  }
  console.log(rows.join('\n'));

  if (!args.has('--skip-listings')) {
    console.log('\nListings on the memory storage (one merchant, 0.1% deactivated):');
    const { storage } = await loadMemoryStorage(ndjsonFile);
    const server = spawn(process.execPath, ['--import', 'tsx', 'bench/memory-server.ts'], { env: { ...process.env, SEED_FILE: ndjsonFile, CURSOR_SECRET }, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const base = await new Promise<string>((resolve, reject) => {
        server.stdout!.on('data', (chunk: Buffer) => {
          const match = /listening (\S+)/.exec(chunk.toString());
          if (match) resolve(match[1]!);
        });
        server.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
      });
      const headers = { authorization: `Basic ${Buffer.from(`${MERCHANT}:bench-key`).toString('base64')}` };
      const results = await runCases({
        storage,
        base,
        headers,
        users: USERS,
        examine: async (query) => {
          await storage.listUsers(query);
          return MemoryUserIndex.lastExamined;
        },
      });
      console.log(casesTable(results));
    } finally {
      server.kill('SIGTERM');
    }
  }
} finally {
  if (!args.has('--keep-files')) rmSync(dir, { recursive: true, force: true });
}
