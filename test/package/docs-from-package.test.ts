/**
 * Every ```ts block of README.md and docs/*.md, from an installed package, as a user copies it:
 * the package is packed and installed into a project of its own (one `npm pack`, one `npm install`),
 * where every block type-checks (strict, nodenext, one module per block, one tsc run for all) and
 * then runs, under Node, or under Bun or Deno where it uses `Bun.serve` or `Deno.serve` or imports
 * that runtime's adapter. A block that serves must answer on its port, and a signed
 * `/validatesignature` under its base path must answer 200 (the recipes serve the demo merchants of
 * `createDemoStorage()`); a block that ends must end with 0; a block that keeps running (a pool,
 * a connection) must not fail within a few seconds. Printed values documented as
 * `console.log(x); // { ... }` must be printed.
 *
 * What a block needs from outside, it gets as a user would: a demo server (the installed
 * `merchant-api serve`) for the client blocks' `127.0.0.1:8787`, MariaDB in `DATABASE_URL`
 * (and `DATABASE_READ_URL`) with `MASTER_KEY`, a Redis in `REDIS_URL`. The fixed ports of the docs
 * (8787, 3000, 9464) become free ports in the built module only, so runs cannot collide.
 *
 * Packed as `npm run pack` packs (test/support/pack.ts, never rebuilding): `pretest` has built dist/.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signUrl } from '../../src/signing/index.js';
import { codeBlocks, docPages } from '../support/docs-markdown.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { freePort } from '../support/ports.js';
import { CONSUMER_ENV, DENO_PERMISSIONS, ROOT, runInDirectory, startProcess, type Started } from '../support/processes.js';
import { packPackage } from '../support/pack.js';
import { redisAvailable, startRedis, type RedisProcess } from '../support/redis.js';
import { sleep } from '../support/sleep.js';

const TSC = `${ROOT}node_modules/typescript/bin/tsc`;
const BUN = `${ROOT}node_modules/.bin/bun`;
const DENO = `${ROOT}node_modules/.bin/deno`;
/** The fixed ports of the docs: 8787 the API (or the demo server a client calls), 3000 a host's server, 9464 metrics. */
const DOC_PORTS = ['8787', '3000', '9464'];
/** The hosts docs/embedding.md embeds the API in, from this repository's dev dependencies (the rest comes from npm install). */
const HOSTS = ['express', '@types/express', 'fastify', 'koa', '@types/koa', 'hono'];

const blocks = docPages()
  .flatMap((page) => codeBlocks(page))
  .filter((block) => block.lang === 'ts' || block.lang === 'typescript');
const checked = blocks.filter((block) => !block.flags.includes('ignore'));
const fileOf = (n: number) => `block-${String(n + 1).padStart(2, '0')}`;
const where = (n: number) => `${checked[n]!.page}:${checked[n]!.line}`;

const mysql = await mysqlAvailable();
const redis = redisAvailable();

let work = '';
let consumer = '';
let typeReport = '';
let typeStatus: number | null = null;
let demo: Started | undefined;
let database: TestDatabase | undefined;
let redisServer: RedisProcess | undefined;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'merchant-api-docs-package-'));
  const { tarball } = await packPackage(work);
  consumer = join(work, 'consumer');
  mkdirSync(consumer);
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'docs-from-package', private: true, type: 'module', allowScripts: { '@scarf/scarf': false } }));
  // The peers at the versions this repository tests, and @types/node at the one it builds against.
  const { peerDependencies } = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { peerDependencies: Record<string, string> };
  const versionOf = (name: string) => (JSON.parse(readFileSync(`${ROOT}node_modules/${name}/package.json`, 'utf8')) as { version: string }).version;
  const peers = [...Object.keys(peerDependencies), '@types/node'].map((name) => `${name}@${versionOf(name)}`);
  const installed = await runInDirectory('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball, ...peers], consumer);
  if (installed.code !== 0) throw new Error(`npm install of the tarball failed:\n${installed.stdout}${installed.stderr}`);
  // Linked after the install, which would prune them.
  mkdirSync(join(consumer, 'node_modules', '@types'), { recursive: true });
  for (const name of HOSTS) if (!existsSync(join(consumer, 'node_modules', name))) symlinkSync(join(ROOT, 'node_modules', name), join(consumer, 'node_modules', name), 'dir');
  // Bun.serve and Deno.serve as far as the recipes use them: what @types/bun and Deno's own types declare.
  writeFileSync(
    join(consumer, 'runtime-globals.d.ts'),
    [
      'declare const Bun: { serve(options: { port?: number; hostname?: string; fetch(request: Request, server: { requestIP(request: Request): { address: string; port: number } | null }): Response | Promise<Response> }): unknown };',
      'declare const Deno: { serve(options: { port?: number; hostname?: string }, handler: (request: Request, info: { remoteAddr: { hostname: string; port: number } }) => Response | Promise<Response>): unknown };',
    ].join('\n'),
  );
  const files = checked.map((block, n) => {
    writeFileSync(join(consumer, `${fileOf(n)}.mts`), `${block.text}\n`);
    return `${fileOf(n)}.mts`;
  });
  const compilerOptions = { strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', types: ['node'], resolveJsonModule: true, skipLibCheck: true, outDir: 'out' };
  writeFileSync(join(consumer, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: [...files, 'runtime-globals.d.ts'] }));
  const tsc = await runInDirectory(process.execPath, [TSC, '-p', consumer, '--pretty', 'false'], consumer);
  typeStatus = tsc.code;
  typeReport = (tsc.stdout + tsc.stderr).replace(/^\S*?block-(\d+)\.mts\((\d+),(\d+)\)/gm, (_, n: string, line: string, column: string) => {
    const block = checked[Number(n) - 1]!;
    return `${block.page}:${block.line + Number(line) - 1}:${column} (block ${n})`;
  });
  // The demo server the client blocks call, from the installed bin.
  demo = await startProcess(
    join(consumer, 'node_modules', '.bin', 'merchant-api'),
    ['serve'],
    { ...CONSUMER_ENV, PORT: '0', HOST: '127.0.0.1', SEED_FILE: '', MASTER_KEY: '', PUBLIC_URL: '', TRUST_PROXY: '', METRICS_PORT: '', ACCESS_LOG: 'false', REDIS_URL: '' },
    /listening on (http:\/\/[^\s)]+)/,
    consumer,
  );
  if (mysql) database = await createTestDatabase();
  if (redis) redisServer = await startRedis();
}, 300_000);

afterAll(async () => {
  await demo?.stop();
  await database?.drop();
  await redisServer?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the docs from the packed package', () => {
  it('finds the blocks, and marks at most one as not compilable (```ts ignore)', () => {
    expect(checked.length).toBeGreaterThanOrEqual(8);
    expect(blocks.length - checked.length).toBeLessThanOrEqual(1);
    // The printed values checked below: README's first call and the client's are among them.
    expect(checked.filter((block) => documentedPrints(block.text).length > 0).length).toBeGreaterThanOrEqual(3);
  });

  it('type-checks every ```ts block against the installed package (strict, nodenext, one module per block)', () => {
    expect(typeReport.trim(), 'a TypeScript block of the docs does not compile').toBe('');
    expect(typeStatus).toBe(0);
  });

  for (const [n, block] of checked.entries()) {
    const needs = needsOf(block.text);
    const skip = (needs.mysql && !mysql) || (needs.redis && !redis);
    it.skipIf(skip)(`runs ${where(n)}${needs.runtime === 'node' ? '' : ` on ${needs.runtime}`}`, async () => {
      const demoPort = new URL(demo!.url).port;
      const listens = /\.listen\(|\bserve\(|Bun\.serve|Deno\.serve/.test(block.text);
      // A block that serves gets free ports for its own; a client block's 8787 is the demo server.
      const ports = new Map<string, string>();
      for (const port of DOC_PORTS) if (block.text.includes(port)) ports.set(port, listens ? String(await freePort()) : port === '8787' ? demoPort : String(await freePort()));
      const built = join(consumer, 'out', `${fileOf(n)}.run.mjs`);
      const program = readFileSync(join(consumer, 'out', `${fileOf(n)}.mjs`), 'utf8').replace(/\b(8787|3000|9464)\b/g, (port) => ports.get(port) ?? port);
      writeFileSync(built, program);
      const env = {
        ...CONSUMER_ENV,
        PORT: '',
        CURSOR_SECRET: 'docs-from-package-cursor-secret-32+bytes',
        DATABASE_URL: database?.url ?? '',
        DATABASE_READ_URL: database?.url ?? '',
        MASTER_KEY: database?.masterKeyText ?? '',
        // docs/security.md's re-seal script: re-sealed under the same key, so the later blocks still open them.
        OLD_MASTER_KEY: database?.masterKeyText ?? '',
        NEW_MASTER_KEY: database?.masterKeyText ?? '',
        REDIS_URL: redisServer?.url ?? '',
      };
      const run = start(needs.runtime, built, env);
      try {
        const served = listens ? [...ports.values()] : [];
        if (served.length > 0) {
          for (const port of served) await untilAccepting(port, run);
          // The storage refuses a ts of its own first second (docs/embedding.md#when-the-replay-store-starts-startedat).
          await sleep(1100);
          const [apiPort, metricsPort] = [ports.get('3000') ?? ports.get('8787')!, ports.get('9464')];
          const basePath = /basePath: '([^']+)'/.exec(block.text)?.[1] ?? '';
          const publicUrl = /publicUrl: '([^']+)'/.exec(block.text)?.[1] ?? `http://127.0.0.1:${apiPort}`;
          const signed = new URL(signUrl('demo-secret', `${publicUrl}${basePath}/validatesignature`, { cp: 'demo-merchant' }));
          const response = await fetch(`http://127.0.0.1:${apiPort}${signed.pathname}${signed.search}`);
          expect({ at: where(n), status: response.status, body: await response.text() }).toEqual({ at: where(n), status: 200, body: '{"status":"ok","is_valid":true}' });
          if (metricsPort) expect((await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status).toBe(200);
        } else {
          // Ends with 0, or keeps running without failing (a pool, a connection).
          const code = await Promise.race([run.exited, sleep(needs.mysql || needs.redis ? 4000 : 15_000).then(() => 'running' as const)]);
          expect({ at: where(n), code, output: code === 0 || code === 'running' ? '' : run.output() }).toEqual({ at: where(n), code: code === 'running' ? 'running' : 0, output: '' });
          await sleep(200); // the last of its output
        }
        for (const printed of documentedPrints(block.text)) expect(run.stdout(), `${where(n)} prints ${printed}`).toContain(printed);
        expect(run.stderr(), where(n)).not.toMatch(/Error|error:/);
      } finally {
        await run.stop();
      }
    }, 60_000);
  }
});

/** What a block needs to run: its runtime, and the services it connects to. */
function needsOf(text: string): { runtime: 'node' | 'bun' | 'deno'; mysql: boolean; redis: boolean } {
  const runtime = /\bBun\.serve\(|'merchant-api\/bun'/.test(text) ? 'bun' : /\bDeno\.serve\(|'merchant-api\/deno'/.test(text) ? 'deno' : 'node';
  return { runtime, mysql: text.includes('merchant-api/storage/mysql'), redis: text.includes('merchant-api/storage/redis') };
}

/** `console.log(x); // { status: 'ok', is_valid: true }`: the values the docs show a block printing (literals only). */
function documentedPrints(text: string): string[] {
  return [...text.matchAll(/console\.log\(.*\);\s*\/\/\s*([[{0-9].*)$/gm)].map((match) => match[1]!.trim()).filter((printed) => !printed.includes('…'));
}

interface Run {
  exited: Promise<number | null>;
  stdout(): string;
  stderr(): string;
  output(): string;
  stop(): Promise<void>;
}

function start(runtime: 'node' | 'bun' | 'deno', file: string, env: Record<string, string>): Run {
  const [command, args] = runtime === 'node' ? [process.execPath, [file]] : runtime === 'bun' ? [BUN, [file]] : [DENO, ['run', ...DENO_PERMISSIONS, file]];
  const child: ChildProcess = spawn(command, args, { cwd: consumer, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    exited,
    stdout: () => stdout,
    stderr: () => stderr,
    output: () => `${stdout}${stderr}`,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Waits until something accepts connections on `port`, failing when the block ends first. */
async function untilAccepting(port: string, run: Run): Promise<void> {
  let ended: number | null | undefined;
  void run.exited.then((code) => (ended = code));
  for (let waited = 0; waited < 20_000; waited += 100) {
    if (ended !== undefined) throw new Error(`the block ended with ${ended} before it listened on ${port}:\n${run.output()}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(Number(port), '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await sleep(100);
  }
  throw new Error(`nothing listens on ${port} after 20 s:\n${run.output()}`);
}
