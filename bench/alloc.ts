/**
 * `npm run bench:alloc`: bytes of JavaScript heap allocated per request by a
 * bench server, and where (by function). Unlike req/s, the figure does not
 * depend on what else runs on the machine, so it can compare two builds on
 * a loaded one.
 *
 * Each server runs with bench/alloc-probe.mjs preloaded: V8's sampling heap
 * profiler, started after a warm-up, keeps the samples of objects the GC has
 * collected since, so the sum of its samples estimates every byte the
 * process allocated on its heap while the load ran (one sample per
 * `--interval` bytes on average, scaled by V8). Divided by the requests wrk
 * completed in that window; a few connections keep the requests in flight
 * at its edges negligible. Memory outside the JS heap (Buffers, Node's
 * parser) is not counted.
 *
 *   npm run bench:alloc [-- --servers=merchant-api-node,node-plain --cases=validatesignature,user
 *                          --baseline-dist=bench/results/base-dist --seconds=3 --top=15 --rounds=1]
 */
import { readFileSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { runWrk } from './load.js';
import { caseRequest, SERVERS, startServer, type ServerDef } from './servers.js';
import { writeSignedPaths } from './signed-paths.js';
import { MERCHANT_ID, MERCHANT_KEY } from './servers/data.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RESULTS = `${ROOT}bench/results/`;

const { values } = parseArgs({
  options: {
    servers: { type: 'string', default: 'merchant-api-node,merchant-api-node-nolog,node-plain' },
    cases: { type: 'string', default: 'validatesignature,user' },
    'baseline-dist': { type: 'string' },
    seconds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '4' },
    interval: { type: 'string', default: '512' },
    top: { type: 'string', default: '15' },
    rounds: { type: 'string', default: '1' },
  },
});
const seconds = Number(values.seconds);
const warmup = Number(values.warmup);
const connections = Number(values.connections);
const cases = values.cases!.split(',') as ('validatesignature' | 'user')[];

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

/** Bytes by allocating function (name and place), and their sum. */
function sites(head: ProfileNode): { total: number; byFunction: Map<string, number> } {
  const byFunction = new Map<string, number>();
  let total = 0;
  const walk = (node: ProfileNode) => {
    if (node.selfSize > 0) {
      const { functionName, url, lineNumber } = node.callFrame;
      const where = url ? `${url.replace(/^.*\/(node_modules|\.dist|dist|base-dist|bench)\//, '$1/')}:${lineNumber + 1}` : '';
      const key = `${functionName || '(anonymous)'} ${where}`;
      byFunction.set(key, (byFunction.get(key) ?? 0) + node.selfSize);
      total += node.selfSize;
    }
    for (const child of node.children) walk(child);
  };
  walk(head);
  return { total, byFunction };
}

// Built copies: this checkout's dist/ and, with --baseline-dist, another.
const defs: { def: ServerDef; dist?: string; label: string }[] = [];
for (const id of values.servers!.split(',')) {
  const def = SERVERS.find((s) => s.id === id);
  if (!def) throw new Error(`unknown server ${id}`);
  const ours = def.command.includes('bench/servers/merchant-api.mjs');
  defs.push({ def, dist: ours ? `${ROOT}dist` : undefined, label: def.id });
  if (ours && values['baseline-dist']) defs.push({ def, dist: resolve(values['baseline-dist']), label: `${def.id} (baseline)` });
}

const pathsFile = `${RESULTS}alloc-signed-paths.txt`;
const perRun = 100_000;
await writeSignedPaths(pathsFile, perRun * defs.length * 2 * Number(values.rounds));
let region = 0;

const authorization = `Basic ${Buffer.from(`${MERCHANT_ID}:${MERCHANT_KEY}`).toString('base64')}`;
const rows: string[] = [];
const rounds = Number(values.rounds);
for (let round = 0; round < rounds; round++) {
  for (const caseId of cases) {
    // Every other round in the reverse order, so that no server is always measured first.
    for (const { def, dist, label } of round % 2 === 0 ? defs : [...defs].reverse()) {
      const out = `${RESULTS}alloc-${label.replace(/\W+/g, '-')}-${caseId}.heapprofile`;
      const env: Record<string, string> = { BENCH_ALLOC_OUT: out, BENCH_ALLOC_INTERVAL: values.interval! };
      if (dist) env.BENCH_DIST = dist;
      const server = await startServer(def, { pin: false, runtimeArgs: ['--import', './bench/alloc-probe.mjs'], env });
      const said = (text: string) =>
        new Promise<void>((resolve) => {
          const listener = (d: Buffer) => {
            if (d.toString().includes(text)) {
              server.child.stderr!.off('data', listener);
              resolve();
            }
          };
          server.child.stderr!.on('data', listener);
        });
      const request = caseRequest(caseId, authorization);
      const load = (s: number) => {
        const paths = caseId === 'validatesignature' ? { file: pathsFile, first: region * perRun + 1, count: perRun } : undefined;
        if (paths) region++;
        return runWrk({ url: server.url, path: request.path, headers: request.headers, connections, seconds: s, paths, pin: false });
      };
      try {
        await load(warmup);
        let started = said('ALLOC STARTED');
        server.child.kill('SIGUSR2');
        await started;
        const result = await load(seconds);
        started = said('ALLOC WRITTEN');
        server.child.kill('SIGUSR2');
        await started;
        if (result.non2xx || result.socketErrors) throw new Error(`${label} ${caseId}: ${result.non2xx} non-2xx, ${result.socketErrors} socket errors`);
        const { total, byFunction } = sites((JSON.parse(readFileSync(out, 'utf8')) as { head: ProfileNode }).head);
        const perRequest = total / result.requests;
        rows.push(`| ${label} | ${caseId} | ${Math.round(perRequest)} | ${result.requests} |`);
        console.log(`\n## ${label}, ${caseId}: ${Math.round(perRequest)} bytes/request over ${result.requests} requests (${Math.round(result.rps)} req/s under the profiler)\n`);
        console.log('| bytes/request | function |\n|--:|---|');
        for (const [key, bytes] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) console.log(`| ${Math.round(bytes / result.requests)} | ${key} |`);
      } finally {
        await server.stop();
      }
    }
  }
}
rmSync(pathsFile, { force: true });
console.log(`\n| server | case | JS heap bytes/request | requests |\n|---|---|--:|--:|\n${rows.join('\n')}`);
