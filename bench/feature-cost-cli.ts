/**
 * `npm run bench:features -- --server=cli`: the per-feature table through the
 * standalone server as deployed (`node dist/cli.js serve`, the bench's seed
 * file, standard output to a file; bench/servers.ts), over HTTP: for each
 * configuration a fresh server on core 0, loaded from core 1 (wrk, else
 * autocannon) with distinct signed URLs or the single user, and its CPU time
 * per request read from /proc. Configurations run in alternating order round
 * by round; the table gives medians and the spread of the same-round
 * difference to "everything off". What the environment cannot turn off
 * (tracing without an SDK, late refusals) stays on in every row: their cost
 * is in the in-process table (`npm run bench:features`).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { hasWrk, runAutocannon, runWrk, type LoadSpec } from './load.js';
import { caseRequest, cliServer, cpuSeconds, startServer } from './servers.js';
import { MERCHANT_ID, MERCHANT_KEY } from './servers/data.mjs';
import { writeSignedPaths } from './signed-paths.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface CliFeatureOptions {
  rounds: number;
  /** Seconds measured per configuration and round (after `warmup`). */
  seconds: number;
  warmup: number;
  caseId: 'user' | 'validatesignature';
}

/** Everything the environment turns off: the access log, the throttle, fair sharing, the webhook dispatcher (metrics are off unless METRICS_PORT is set). */
const OFF = { ACCESS_LOG: 'false', THROTTLE_AUTH: 'false', FAIR_SHARE: 'false', WEBHOOKS: 'false' };
const CONFIGS: [string, Record<string, string>][] = [
  ['everything off', OFF],
  ['everything off, again', OFF],
  ['throttle (THROTTLE_AUTH)', { ...OFF, THROTTLE_AUTH: 'true' }],
  ['fair sharing (FAIR_SHARE)', { ...OFF, FAIR_SHARE: 'true' }],
  ['webhook dispatcher (WEBHOOKS)', { ...OFF, WEBHOOKS: 'true' }],
  ['access log, to a file (ACCESS_LOG)', { ...OFF, ACCESS_LOG: 'true' }],
  ['metrics (METRICS_PORT)', { ...OFF, METRICS_PORT: '0' }],
  ['every default', {}],
  ['every default and metrics', { METRICS_PORT: '0' }],
];

export async function featureCostThroughCli(options: CliFeatureOptions): Promise<void> {
  const pin = cpus().length >= 2 && spawnSync('taskset', ['-V']).status === 0;
  if (pin) execFileSync('taskset', ['-pc', '1', String(process.pid)], { stdio: 'ignore' });
  const loader = hasWrk() ? runWrk : runAutocannon;
  const authorization = `Basic ${Buffer.from(`${MERCHANT_ID}:${MERCHANT_KEY}`).toString('base64')}`;
  const { path, headers } = caseRequest(options.caseId, authorization);
  // Distinct signed paths, enough for every run at 120,000 req/s; each server is fresh, so one file serves all.
  const perRun = Math.ceil((options.warmup + options.seconds) * 120_000);
  const file = `${ROOT}bench/results/feature-paths.txt`;
  mkdirSync(`${ROOT}bench/results`, { recursive: true });
  if (options.caseId === 'validatesignature') await writeSignedPaths(file, perRun);
  const defs = CONFIGS.map(([name, env], i) => cliServer(`features-cli-${i}`, name, 'dist', env));
  defs[0]!.prepare?.();
  const samples = new Map<string, number[]>(CONFIGS.map(([name]) => [name, []]));
  const load = (url: string, seconds: number, first: number, count: number) => {
    const spec: LoadSpec = { url, path, headers, seconds, pin, connections: 50, paths: options.caseId === 'validatesignature' ? { file, first, count } : undefined };
    return loader(spec);
  };
  for (let round = 0; round < options.rounds; round++) {
    const order = round % 2 ? [...defs].reverse() : defs;
    for (const def of order) {
      const server = await startServer(def, { pin });
      try {
        const warmCount = Math.ceil(options.warmup * 120_000);
        await load(server.url, options.warmup, 1, warmCount);
        const before = cpuSeconds(server.pid);
        const result = await load(server.url, options.seconds, warmCount + 1, perRun - warmCount);
        const micros = ((cpuSeconds(server.pid) - before) * 1e6) / result.requests;
        if (result.non2xx + result.socketErrors > 0) throw new Error(`${def.label}: ${result.non2xx} answers not 2xx, ${result.socketErrors} socket errors`);
        samples.get(def.label)!.push(micros);
        process.stderr.write(`round ${round + 1} ${def.label.padEnd(36)} ${Math.round(result.rps)} req/s, ${micros.toFixed(1)} CPU µs/req\n`);
      } finally {
        await server.stop();
      }
    }
  }
  const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;
  const quantile = (list: number[], q: number) => [...list].sort((a, b) => a - b)[Math.min(list.length - 1, Math.floor(q * list.length))]!;
  const offs = samples.get('everything off')!;
  const base = median(offs);
  const fmt = (n: number) => `${n >= 0 ? '+' : ''}${n.toFixed(1)}`;
  console.log(`\n${options.caseId} through merchant-api serve (node dist/cli.js serve, HTTP, 50 connections), ${options.rounds} rounds of ${options.seconds} s, server CPU µs per request (median), Node ${process.version}\n`);
  console.log('| configuration | µs/request | vs everything off | same-round difference, 25th-75th percentile |');
  console.log('|---|--:|--:|--:|');
  for (const [name] of CONFIGS) {
    const list = samples.get(name)!;
    const value = median(list);
    const differences = list.map((v, i) => v - offs[i]!);
    const spread = name === 'everything off' ? '-' : `${fmt(quantile(differences, 0.25))} to ${fmt(quantile(differences, 0.75))}`;
    console.log(`| ${name} | ${value.toFixed(1)} | ${name === 'everything off' ? '-' : fmt(value - base)} | ${spread} |`);
  }
}
