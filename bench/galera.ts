/**
 * `npm run bench:galera`: the MySQL storage on a 3-node MariaDB Galera Cluster against one plain
 * MariaDB, same run, same data, same binary and settings (test/support/galera.ts starts both, on
 * this machine: the three nodes share its cores, as the plain server does not).
 * 1. Import: `--users` users of one merchant (`fake-users.ts`) as NDJSON through `importUserFile`
 *    (what `merchant-api import` runs), through node 1 and into the plain server, each into a fresh
 *    database, alternating, best of `--rounds`. Rows/s and the ratio (goal: at least 0.5x).
 * 2. validatesignature on MySQL (no Redis): `merchant-api serve` from dist/ on node 1 and on the
 *    plain server, `--concurrency` closed loops of freshly signed requests (each a new salt: one
 *    INSERT, one commit, on Galera one certification) for `--seconds`, alternating, `--rounds`
 *    rounds; the median rate, its spread, p50, and the cost of certification per salt.
 *    On node 1 it also prints what Galera did during each import (wsrep status deltas): the
 *    write-sets replicated and their mean size (the certification and replication per batch), and
 *    the time flow control paused replication (node 1 waiting for nodes 2 and 3 to apply).
 * Options: --users=N (default 100000), --rounds=N (default 3), --concurrency=N (16), --seconds=S (5),
 * --batch-size=N (the import's, default DEFAULT_BATCH_SIZE), --skip-import, --skip-serve.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { addMerchant, addMerchantKey, createMysqlKysely, generateMasterKey, importUserFile, migrateToLatest, parseMasterKey } from '../src/storage/mysql/index.js';
import { signUrl } from '../src/signing/index.js';
import { MERCHANT, writeUsersFile } from './fake-users.js';
import { StatementTimes } from './statement-times.js';
import { startGaleraCluster, startPlainMariadb, type GaleraNode } from '../test/support/galera.js';

const args = new Map(process.argv.slice(2).map((arg) => [arg.replace(/=.*$/, ''), arg.includes('=') ? arg.replace(/^[^=]*=/, '') : 'true']));
const USERS = Number(args.get('--users') ?? 100_000);
const ROUNDS = Number(args.get('--rounds') ?? 3);
const CONCURRENCY = Number(args.get('--concurrency') ?? 16);
const SECONDS = Number(args.get('--seconds') ?? 5);
const SKIP_IMPORT = args.has('--skip-import');
const SKIP_SERVE = args.has('--skip-serve');
const BATCH_SIZE = args.has('--batch-size') ? Number(args.get('--batch-size')) : undefined;

/** The wsrep counters an import moves on `node` (empty on the plain server). */
async function wsrepCounters(node: GaleraNode): Promise<Map<string, number>> {
  const rows = await node.query<{ Variable_name: string; Value: string }>(
    "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_replicated', 'wsrep_replicated_bytes', 'wsrep_flow_control_paused_ns', 'wsrep_flow_control_recv', 'wsrep_local_cert_failures')",
  );
  return new Map(rows.map((row) => [row.Variable_name, Number(row.Value)]));
}
const KEY = 'bench-galera-key-0123456789';
const PUBLIC_URL = 'http://api.bench.example';

/** --skip-serve: the import only. */
class Skip extends Error {}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const spread = (values: number[]) => `${Math.round(Math.min(...values))}-${Math.round(Math.max(...values))}`;

console.log(`bench:galera on ${availableParallelism()} cores (${cpus()[0]?.model ?? '?'}), Node ${process.version}, load ${loadavg().map((l) => l.toFixed(1)).join(' ')}, ${new Date().toISOString()}`);
const dir = mkdtempSync(join(tmpdir(), 'merchant-api-bench-galera-'));
const cluster = await startGaleraCluster();
const plain = await startPlainMariadb();
const targets: [string, GaleraNode][] = [
  ['galera node 1', cluster.nodes[0]],
  ['plain mariadb', plain.node],
];
const masterKeyText = generateMasterKey();
const masterKey = parseMasterKey(masterKeyText);

async function freshDatabase(node: GaleraNode): Promise<string> {
  const name = `bench_${randomBytes(4).toString('hex')}`;
  await node.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  const db = createMysqlKysely(node.url(name));
  try {
    await migrateToLatest(db);
    await addMerchant(db, masterKey, MERCHANT);
    await addMerchantKey(db, masterKey, MERCHANT, KEY);
  } finally {
    await db.destroy();
  }
  return name;
}

try {
  // 1. Import.
  if (!SKIP_IMPORT) await benchImport();

  // 2. validatesignature through `serve` on each.
  if (SKIP_SERVE) throw new Skip();
  const servers: { label: string; url: string; child: ChildProcess }[] = [];
  for (const [label, node] of targets) {
    const name = await freshDatabase(node);
    servers.push({ label, ...(await serve(node.url(name))) });
  }
  const rates = new Map<string, number[]>(targets.map(([label]) => [label, []]));
  const p50s = new Map<string, number[]>(targets.map(([label]) => [label, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const server of round % 2 ? [...servers].reverse() : servers) {
      const result = await closedLoop(server.url);
      if (result.failures > 0) console.log(`  (${server.label}: ${result.failures} answers were not 200)`);
      rates.get(server.label)!.push(result.rate);
      p50s.get(server.label)!.push(result.p50);
    }
  }
  for (const server of servers) server.child.kill('SIGTERM');
  console.log(`\nvalidatesignature on MySQL (no Redis), ${CONCURRENCY} closed loops x ${SECONDS} s, ${ROUNDS} rounds, alternating:`);
  for (const [label] of targets) console.log(`  ${label.padEnd(14)} median ${Math.round(median(rates.get(label)!))} req/s (spread ${spread(rates.get(label)!)}), p50 ${median(p50s.get(label)!).toFixed(2)} ms`);
  const [galeraRate, plainRate] = targets.map(([label]) => median(rates.get(label)!));
  const [galeraP50, plainP50] = targets.map(([label]) => median(p50s.get(label)!));
  console.log(`  ratio galera/plain: ${(galeraRate! / plainRate!).toFixed(2)}x`);
  console.log(`  certification per salt: ${(galeraP50! - plainP50!).toFixed(2)} ms of latency at p50 (galera minus plain)`);
  console.log(`load at the end: ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
} catch (error) {
  if (!(error instanceof Skip)) throw error;
} finally {
  await plain.stop();
  await cluster.stop();
  rmSync(dir, { recursive: true, force: true });
}

/** The import through node 1 and into the plain server, alternating, best of ROUNDS. */
async function benchImport(): Promise<void> {
  const file = join(dir, 'users.ndjson');
  await writeUsersFile(file, USERS, 'ndjson');
  const importRates = new Map<string, number[]>(targets.map(([label]) => [label, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [label, node] of round % 2 ? [...targets].reverse() : targets) {
      const name = await freshDatabase(node);
      const db = createMysqlKysely(node.url(name), { queryTimeout: 0 });
      try {
        const times = new StatementTimes();
        times.start();
        const before = await wsrepCounters(node);
        const started = performance.now();
        const summary = await importUserFile(db.withPlugin(times), file, { batchSize: BATCH_SIZE });
        const seconds = (performance.now() - started) / 1000;
        const after = await wsrepCounters(node);
        const delta = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
        if (after.size > 0) {
          const sets = delta('wsrep_replicated');
          console.log(`  ${label}: ${sets} write-sets replicated, ${(delta('wsrep_replicated_bytes') / 1048576).toFixed(1)} MiB (mean ${(delta('wsrep_replicated_bytes') / Math.max(1, sets) / 1048576).toFixed(2)} MiB), flow control paused ${(delta('wsrep_flow_control_paused_ns') / 1e9).toFixed(1)} s of ${seconds.toFixed(1)} s (${delta('wsrep_flow_control_recv')} pauses), ${delta('wsrep_local_cert_failures')} certification failures; load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
        }
        if (summary.usersInserted !== USERS) throw new Error(`${label}: ${summary.usersInserted} of ${USERS} users imported`);
        importRates.get(label)!.push(USERS / seconds);
        console.log(`  round ${round + 1}: ${label} ${Math.round(USERS / seconds)} users/s (${seconds.toFixed(1)} s)`);
        // Where the time went on each, once (the last round).
        if (round === ROUNDS - 1) console.log(`\n${times.table(`import into ${label}: where the time went`)}\n`);
      } finally {
        await db.destroy();
      }
      await node.query(`DROP DATABASE ${name}`);
    }
  }
  const [galeraImport, plainImport] = targets.map(([label]) => Math.max(...importRates.get(label)!));
  console.log(`\nimport of ${USERS} users (importUserFile), best of ${ROUNDS}:`);
  for (const [label] of targets) console.log(`  ${label.padEnd(14)} ${Math.round(Math.max(...importRates.get(label)!))} users/s (rounds: ${importRates.get(label)!.map(Math.round).join(', ')})`);
  console.log(`  ratio galera/plain: ${(galeraImport! / plainImport!).toFixed(2)}x (goal >= 0.5x)`);
}

/** `merchant-api serve` (dist/cli.js) on `url`, without the throttle, fair sharing or the access log. */
function serve(url: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['dist/cli.js', 'serve'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATABASE_URL: url, MASTER_KEY: masterKeyText, PUBLIC_URL, ACCESS_LOG: 'false', FAIR_SHARE: 'false', THROTTLE_AUTH: 'false', NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) resolve({ url: match[1]!, child });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}:\n${output}`)));
  });
}

/** CONCURRENCY closed loops of freshly signed /validatesignature requests for SECONDS. */
async function closedLoop(base: string): Promise<{ rate: number; p50: number; failures: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const times: number[] = [];
  let failures = 0;
  const end = performance.now() + SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const signed = new URL(signUrl(KEY, `${PUBLIC_URL}/validatesignature`, { cp: MERCHANT }));
        const t = performance.now();
        const status = await get(agent, `${base}${signed.pathname}${signed.search}`);
        times.push(performance.now() - t);
        if (status !== 200) failures++;
      }
    }),
  );
  agent.destroy();
  return { rate: times.length / ((performance.now() - started) / 1000), p50: median(times), failures };
}

function get(agent: Agent, url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request(url, { agent }, (response) => {
      response.resume();
      response.once('end', () => resolve(response.statusCode ?? 0));
    })
      .once('error', reject)
      .end();
  });
}
