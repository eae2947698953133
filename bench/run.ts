/**
 * `npm run bench`: each server in turn on loopback, pinned to core
 * 0, loaded from core 1 with the same connections and duration, in several
 * rounds whose order alternates; medians, ratios against the constant-JSON
 * Node server of the same round, the performance targets, and the streaming list.
 * Writes bench/results/bench-<time>.json. Never part of `npm test`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { hasWrk, runAutocannon, runWrk, type LoadSpec } from './load.js';
import { CASES, parseOptions, type BenchOptions, type CaseId } from './options.js';
import { summarizeProfile } from './profile.js';
import { aggregate, plainPeerTable, streamTable, table, targets, targetTable, type Measurement } from './report.js';
import { baselineCliServer, baselineServer, caseRequest, cpuSeconds, SERVERS, startServer, type Running, type ServerDef } from './servers.js';
import { MERCHANT_ID, MERCHANT_KEY, SINGLE_USER_ID, userCount } from './servers/data.mjs';
import { waitForQuietCore } from './quiet.js';
import { writeSignedPaths } from './signed-paths.js';
import { measureStream, type StreamResult } from './stream.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RESULTS = `${ROOT}bench/results/`;
const AUTHORIZATION = `Basic ${Buffer.from(`${MERCHANT_ID}:${MERCHANT_KEY}`).toString('base64')}`;
/** Lines of the signed-path file: a few for pre-flight checks, then warm-up, then measurement. */
const PREFLIGHT_LINES = 10;

const options = parseOptions(process.argv.slice(2), process.env);
const log = (text: string) => process.stderr.write(`${text}\n`);

function machine() {
  const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
  const version = (cmd: string, args: string[]) => {
    const r = spawnSync(cmd, args, { encoding: 'utf8' });
    return `${r.stdout ?? ''}${r.stderr ?? ''}`.split('\n')[0]!.trim() || undefined;
  };
  return {
    nproc: cpus().length,
    cpu: /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1] ?? cpus()[0]?.model,
    memGb: Math.round(totalmem() / 1e9),
    kernel: version('uname', ['-r']),
    node: process.version,
    bun: version(`${ROOT}node_modules/.bin/bun`, ['--version']),
    deno: version(`${ROOT}node_modules/.bin/deno`, ['--version']),
    wrk: version('wrk', ['-v']),
    /** Other work on this machine disturbs the numbers; the load average says how much there was. */
    loadAverageAtStart: loadavg(),
  };
}

/**
 * Other work in this checkout may rebuild dist/ (the build deletes it first)
 * while the bench runs; the servers load a private copy instead.
 */
function snapshotDist(): void {
  const target = `${ROOT}bench/.dist`;
  for (let attempt = 0; attempt < 3; attempt++) {
    rmSync(target, { recursive: true, force: true });
    if (existsSync(`${ROOT}dist/index.js`)) cpSync(`${ROOT}dist`, target, { recursive: true });
    if (['index.js', 'node.js', 'storage/memory.js'].every((f) => existsSync(`${target}/${f}`))) return;
    log('dist/ is incomplete (being rebuilt?); building again');
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'ignore' });
  }
  throw new Error('Could not snapshot a complete dist/; run npm run build.');
}

/** taskset pins servers to core 0 and the load generator (and this process) to core 1. */
function canPin(): boolean {
  if (cpus().length < 2 || spawnSync('taskset', ['-V']).status !== 0) return false;
  execFileSync('taskset', ['-pc', '1', String(process.pid)], { stdio: 'ignore' });
  return true;
}

/** One real request per case before loading it: a 200 with the expected body, or the bench stops. */
async function preflight(server: Running, caseId: CaseId | 'constant', signedFile: string): Promise<void> {
  const { path, headers } = caseRequest(caseId, AUTHORIZATION);
  const target = caseId === 'validatesignature' ? readFileSync(signedFile, 'utf8').slice(0, 4096).split('\n')[0]! : path;
  const response = await fetch(`${server.url}${target}`, { headers });
  const text = await response.text();
  const fail = (why: string) => new Error(`${server.def.id} / ${caseId}: ${why}: ${response.status} ${text.slice(0, 300)}`);
  if (response.status !== 200) throw fail('pre-flight request failed');
  if (!response.headers.get('content-type')?.startsWith('application/json')) throw fail('not JSON');
  const body = JSON.parse(text) as { status?: string; is_valid?: boolean; data?: { shared_user_id: string }[]; next_cursor?: unknown };
  if (caseId === 'validatesignature' && (body.status !== 'ok' || body.is_valid !== true)) throw fail('signature not accepted');
  if (caseId === 'user' && body.data?.[0]?.shared_user_id !== SINGLE_USER_ID) throw fail('wrong user');
  if (caseId === 'page' && (body.data?.length !== 100 || typeof body.next_cursor !== 'string')) throw fail('not a page of 100 with a cursor');
}

async function load(spec: Omit<LoadSpec, 'pin' | 'connections'>, pin: boolean, loader: 'wrk' | 'autocannon') {
  const full = { ...spec, pin, connections: options.connections };
  return loader === 'wrk' ? runWrk(full) : runAutocannon(full);
}

interface Regions {
  file: string;
  warm: { first: number; count: number };
  main: { first: number; count: number };
}

async function measureCase(server: Running, caseId: CaseId | 'constant', regions: Regions, pin: boolean, loader: 'wrk' | 'autocannon') {
  await preflight(server, caseId, regions.file);
  const { path, headers } = caseRequest(caseId, AUTHORIZATION);
  const paths = (region: { first: number; count: number }) => (caseId === 'validatesignature' ? { file: regions.file, ...region } : undefined);
  await load({ url: server.url, path, headers, seconds: options.warmup, paths: paths(regions.warm) }, pin, loader);
  const otherLoad = pin ? await waitForQuietCore(0) : undefined;
  const cpuBefore = cpuSeconds(server.pid);
  const result = await load({ url: server.url, path, headers, seconds: options.duration, paths: paths(regions.main) }, pin, loader);
  const cpu = cpuSeconds(server.pid) - cpuBefore;
  return { ...result, serverCpu: cpu / result.seconds, cpuUsPerRequest: (cpu * 1e6) / result.requests, core0BusyBefore: otherLoad };
}

function selectedServers(): ServerDef[] {
  const chosen = SERVERS.filter((s) => !options.servers || options.servers.includes(s.id));
  const cli = chosen.some((s) => s.id === 'merchant-api-cli');
  if (options.baselineDist && (!cli || chosen.some((s) => s.id === 'merchant-api-node'))) chosen.splice(chosen.findIndex((s) => s.id === 'merchant-api-node') + 1, 0, baselineServer(options.baselineDist));
  if (options.baselineDist && cli) chosen.splice(chosen.findIndex((s) => s.id === 'merchant-api-cli') + 1, 0, baselineCliServer(options.baselineDist));
  for (const id of options.servers ?? []) if (!SERVERS.some((s) => s.id === id)) throw new Error(`Unknown server ${id}`);
  return chosen.filter((s) => {
    const why = s.unavailable?.();
    if (why) log(`skipping ${s.id}: ${why}`);
    return !why;
  });
}

async function comparison(servers: ServerDef[], regions: Regions, pin: boolean, loader: 'wrk' | 'autocannon'): Promise<Measurement[]> {
  const measurements: Measurement[] = [];
  for (const prepare of new Set(servers.map((s) => s.prepare))) prepare?.();
  for (let round = 1; round <= options.rounds; round++) {
    // Alternate the order so drift (thermal, noisy neighbours) does not always favour the same server.
    const order = round % 2 ? servers : [...servers].reverse();
    const roundStart = measurements.length;
    for (const def of order) {
      const server = await startServer(def, { pin });
      try {
        for (const caseId of def.cases === 'constant' ? (['constant'] as const) : options.cases) {
          const result = await measureCase(server, caseId, regions, pin, loader);
          measurements.push({ ...result, round, server: def.id, label: def.label, case: caseId });
          log(`round ${round} ${def.id.padEnd(18)} ${caseId.padEnd(17)} ${Math.round(result.rps).toString().padStart(7)} req/s  p99 ${result.p99Ms.toFixed(2)} ms  cpu ${Math.round((result.serverCpu ?? NaN) * 100)}% ${Math.round(result.cpuUsPerRequest ?? NaN)} us/req${result.non2xx + result.socketErrors ? `  FAILURES ${result.non2xx + result.socketErrors}` : ''}`);
        }
      } finally {
        await server.stop();
      }
    }
    const limit = measurements.slice(roundStart).find((m) => m.server === 'node-constant');
    if (limit) {
      for (const m of measurements.slice(roundStart)) {
        m.ratio = m.rps / limit.rps;
        m.cpuRatio = limit.cpuUsPerRequest! / m.cpuUsPerRequest!;
      }
    }
  }
  return measurements;
}

async function streams(servers: ServerDef[], pin: boolean): Promise<StreamResult[]> {
  const results: StreamResult[] = [];
  for (const def of servers.filter((s) => s.id.startsWith('merchant-api-'))) {
    const server = await startServer(def, { pin });
    try {
      const result = await measureStream(server, AUTHORIZATION, userCount(), options.quick ? 2 : 3);
      results.push(result);
      log(`stream ${def.id.padEnd(18)} ${Math.round(result.usersPerSecond)} users/s, peak RSS +${result.peakRssGrowthMb.toFixed(1)} MB (${result.peakSource})`);
    } finally {
      await server.stop();
    }
  }
  return results;
}

/** Profiles one server per case: merchant-api on Node by default; any Node or Bun server with --servers. */
async function profile(regions: Regions, pin: boolean, loader: 'wrk' | 'autocannon') {
  const id = options.servers?.[0] ?? 'merchant-api-node';
  const def = SERVERS.find((s) => s.id === id);
  if (!def || def.id.endsWith('-deno')) throw new Error(`--profile runs Node and Bun servers (--cpu-prof), not ${id}`);
  def.prepare?.();
  const out: Record<string, unknown> = {};
  for (const caseId of def.cases === 'constant' ? (['constant'] as const) : options.cases) {
    const name = `profile-${def.id}-${caseId}.cpuprofile`;
    const server = await startServer(def, { pin, runtimeArgs: ['--cpu-prof', `--cpu-prof-dir=${RESULTS}`, `--cpu-prof-name=${name}`] });
    let result;
    try {
      result = await measureCase(server, caseId, regions, pin, loader);
    } finally {
      await server.stop();
    }
    const summary = summarizeProfile(`${RESULTS}${name}`, 20);
    out[caseId] = { rps: result.rps, ...summary };
    console.log(`\n## ${def.id}, ${caseId}: ${Math.round(result.rps)} req/s under the profiler (bench/results/${name})\n`);
    console.log(summary.areas.map((a) => `- ${a.area}: ${a.percent}%`).join('\n'));
    console.log(`\n| self % | function | where | area |\n|--:|---|---|---|`);
    for (const f of summary.functions) console.log(`| ${f.percent} | ${f.name} | ${f.where} | ${f.area} |`);
  }
  return out;
}

async function main(options: BenchOptions): Promise<void> {
  mkdirSync(RESULTS, { recursive: true });
  snapshotDist();
  const pin = canPin();
  if (!pin) log('warning: taskset or a second core is missing; server and load generator share the CPU');
  const loader = options.loader === 'auto' ? (hasWrk() ? 'wrk' : 'autocannon') : options.loader;
  if (loader === 'wrk' && !hasWrk()) throw new Error('--loader=wrk but wrk is not installed (apt-get install wrk)');
  if (loader === 'autocannon') {
    log(`${options.loader === 'auto' ? 'wrk not installed: using' : 'using'} autocannon, which runs in this process and may cap the fastest servers (apt-get install wrk)`);
  }
  const info = machine();
  log(`machine: ${info.nproc} cores, ${info.cpu}; node ${info.node}, bun ${info.bun ?? '-'}, ${info.deno ?? 'deno -'}; load: ${loader}`);

  // Each server process is fresh for every round, so one file of distinct salts serves them all.
  const warmCount = Math.ceil(options.warmup * options.maxRate);
  const mainCount = Math.ceil(options.duration * options.maxRate);
  const regions: Regions = {
    file: `${RESULTS}signed-paths.txt`,
    warm: { first: PREFLIGHT_LINES + 1, count: warmCount },
    main: { first: PREFLIGHT_LINES + warmCount + 1, count: mainCount },
  };
  if (options.cases.includes('validatesignature')) {
    log(`signing ${(PREFLIGHT_LINES + warmCount + mainCount).toLocaleString('en-US')} request paths`);
    await writeSignedPaths(regions.file, PREFLIGHT_LINES + warmCount + mainCount);
  }

  const started = new Date();
  const stamp = started.toISOString().replace(/[:.]/g, '-');
  if (options.profile) {
    const profiles = await profile(regions, pin, loader);
    writeFileSync(`${RESULTS}profile-${stamp}.json`, `${JSON.stringify({ started, machine: info, options, loader, profiles }, null, 2)}\n`);
    return;
  }

  const servers = selectedServers();
  const measurements = await comparison(servers, regions, pin, loader);
  const streamResults = options.stream ? await streams(servers, pin) : [];
  const rows = aggregate(measurements);
  const ids = servers.map((s) => s.id);
  const order = (r: { case: string; server: string }) => [...CASES, 'constant'].indexOf(r.case) * 100 + ids.indexOf(r.server);
  rows.sort((a, b) => order(a) - order(b));
  const goals = targets(rows, measurements, streamResults);

  const header =
    `${info.nproc} cores (${info.cpu}), Node ${info.node}, Bun ${info.bun ?? '-'}, ${info.deno ?? ''}; ` +
    `${loader}, ${options.connections} connections, ${options.duration} s per run after ${options.warmup} s warm-up, median of ${options.rounds} round(s)` +
    `${pin ? '; server on core 0, load on core 1' : ''}`;
  // First what the goal is measured against: the server a team would write (bench/servers/plain-node.mjs).
  const vsPlain = plainPeerTable(measurements, servers);
  console.log(`\n${header}\n`);
  if (vsPlain) console.log(`Against the plain peer (req/s, same round):\n\n${vsPlain}\n`);
  console.log(table(rows));
  if (streamResults.length) console.log(`\nStreaming list of ${userCount().toLocaleString('en-US')} users:\n\n${streamTable(streamResults)}`);
  console.log(`\nTargets:\n\n${targetTable(goals)}`);

  const file = `${RESULTS}bench-${stamp}.json`;
  writeFileSync(file, `${JSON.stringify({ started, finished: new Date(), loadAverageAtEnd: loadavg(), machine: info, options, loader, pinned: pin, rows, streams: streamResults, targets: goals, measurements }, null, 2)}\n`);
  console.log(`\nWrote ${file.slice(ROOT.length)}`);
}

main(options).catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
