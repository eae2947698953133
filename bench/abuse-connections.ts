/**
 * Part of `npm run bench:abuse`: connections held open. Against the
 * standalone server (memory storage, pinned to core 0, its defaults:
 * MAX_CONNECTIONS 10000, HEADERS_TIMEOUT 10 s, KEEP_ALIVE_TIMEOUT 5 s), with
 * this VM's file-descriptor limit of 20,000 for every process (the hard limit
 * too: it cannot be raised here):
 *
 * 1. 20,000 idle connections that never send a byte, from three processes
 *    (bench/abuse-idle-clients.ts) on 127.0.0.1; meanwhile a legitimate
 *    GET /healthz from another client (127.0.0.2) on a new connection every
 *    second for 40 s: its answer or error and time; how many idle connections
 *    the server still holds; its open descriptors.
 * 2. A slowloris client: a request line and then one header byte a second,
 *    never the blank line; how long the server holds it (cut at 150 s).
 *
 * Options: --idle=N (default 20000), --cli=path/to/cli.js (another build, for
 * before/after figures).
 */
import { spawn } from 'node:child_process';
import { readdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { ROOT, startAbuseServer } from './abuse-server.js';

const { values } = parseArgs({ options: { idle: { type: 'string', default: '20000' }, cli: { type: 'string', default: 'dist/cli.js' } } });
const IDLE = Number(values.idle);
const PROCESSES = 3;
/** How long the legitimate requests are sent: past the header timeout of the last idle connection opened. */
const PROBE_SECONDS = 40;

const work = mkdtempSync(join(tmpdir(), 'merchant-api-abuse-conn-'));
const seed = join(work, 'seed.json');
writeFileSync(seed, JSON.stringify({ merchants: [{ id: 'm', keys: ['k'] }], users: [] }));

/** A legitimate request from another client address on a new connection: its status or error, and how long it took. */
function probe(url: string): Promise<string> {
  const started = performance.now();
  const took = () => `${(performance.now() - started).toFixed(0)} ms`;
  return new Promise((done) => {
    const req = request(`${url}/healthz`, { agent: false, timeout: 3000, localAddress: '127.0.0.2' }, (res) => {
      res.resume();
      res.on('end', () => done(`${res.statusCode} in ${took()}`));
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 3 s')));
    req.on('error', (error: NodeJS.ErrnoException) => done(`${error.code ?? error.message} after ${took()}`));
    req.end();
  });
}

function descriptors(pid: number): number | string {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 'gone';
  }
}

try {
  console.log(`connections held open (${values.cli})\n`);
  const server = await startAbuseServer(values.cli!, { SEED_FILE: seed });
  const port = new URL(server.url).port;
  try {
    console.log(`1. ${IDLE.toLocaleString('en')} idle connections`);
    console.log(`   before: GET /healthz ${await probe(server.url)}; server descriptors ${descriptors(server.pid)}`);
    const state = new Map<number, { opened: number; open: number; failed: number; closedByServer: number }>();
    const children = Array.from({ length: PROCESSES }, (_, i) => {
      const child = spawn('taskset', ['-c', '1', process.execPath, '--import', 'tsx', 'bench/abuse-idle-clients.ts', `--port=${port}`, `--count=${Math.floor(IDLE / PROCESSES) + (i < IDLE % PROCESSES ? 1 : 0)}`], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
      let out = '';
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const lines = out.split('\n');
        out = lines.pop()!;
        for (const line of lines) if (line) state.set(i, JSON.parse(line));
      });
      return child;
    });
    const sum = (key: 'opened' | 'open' | 'failed' | 'closedByServer') => [...state.values()].reduce((n, s) => n + s[key], 0);
    const started = Date.now();
    for (let second = 1; second <= PROBE_SECONDS; second++) {
      await sleep(started + second * 1000 - Date.now());
      const answer = await probe(server.url);
      console.log(`   ${String(second).padStart(2)} s: GET /healthz ${answer}; idle opened ${sum('opened')}, held ${sum('open')}, refused or failed ${sum('failed')}, closed by the server ${sum('closedByServer')}; server descriptors ${descriptors(server.pid)}`);
    }
    for (const child of children) child.stdin!.end();
    await Promise.all(children.map((child) => new Promise((done) => child.once('exit', done))));
    await sleep(1000);
    console.log(`   after the idle clients left: GET /healthz ${await probe(server.url)}; server ${server.child.exitCode === null ? 'alive' : `exited (${server.child.exitCode})`}`);
    if (/EMFILE|too many open files/i.test(server.output())) console.log('   the server logged EMFILE (out of file descriptors)');

    console.log('\n2. slowloris: a request line, then one header byte a second');
    const held = await new Promise<string>((done) => {
      const socket = connect(Number(port), '127.0.0.1');
      const opened = performance.now();
      let answer = '';
      const drip = setInterval(() => socket.writable && socket.write('X'), 1000);
      const give = setTimeout(() => {
        socket.destroy();
        done('still held after 150 s (cut by the client)');
      }, 150_000);
      socket.on('connect', () => socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: '));
      socket.on('data', (d: Buffer) => (answer += d.toString()));
      socket.on('error', () => {});
      socket.on('close', () => {
        clearInterval(drip);
        clearTimeout(give);
        done(`closed by the server after ${((performance.now() - opened) / 1000).toFixed(1)} s, answer: ${answer.split('\r\n')[0] || 'none'}`);
      });
    });
    console.log(`   ${held}`);
  } finally {
    await server.stop();
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
