/**
 * The Next.js route handler recipe (docs/embedding.md#nextjs), through a
 * real Next server: test/fixtures/embedding/next-route.ts becomes
 * `app/api/merchant/[...path]/route.ts` of an app in a temporary directory,
 * which `next build` compiles (webpack: Turbopack refuses the symlinked
 * merchant-api outside the app's root) and `next start` serves. The app's
 * node_modules links this repository's packages, merchant-api being this
 * repository (its dist/). Merchants sign the public URL the route's
 * `publicUrl` names; the requests go to the local server.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import { ROOT } from '../support/processes.js';
import { sleep } from '../support/sleep.js';
import { embeddingSuite } from './host-suite.js';

const PUBLIC_URL = 'https://shop.example.com';
const NEXT = join(ROOT, 'node_modules', 'next', 'dist', 'bin', 'next');

let app = '';
let next: ChildProcess | undefined;
let local = '';
let output = '';

beforeAll(async () => {
  app = mkdtempSync(join(tmpdir(), 'merchant-api-next-'));
  mkdirSync(join(app, 'node_modules'));
  for (const name of readdirSync(join(ROOT, 'node_modules'))) {
    if (!name.startsWith('.')) symlinkSync(join(ROOT, 'node_modules', name), join(app, 'node_modules', name));
  }
  symlinkSync(ROOT, join(app, 'node_modules', 'merchant-api'), 'dir');
  const route = join(app, 'app', 'api', 'merchant', '[...path]');
  mkdirSync(route, { recursive: true });
  copyFileSync(`${ROOT}test/fixtures/embedding/next-route.ts`, join(route, 'route.ts'));
  writeFileSync(join(app, 'app', 'layout.js'), 'export default function RootLayout({ children }) { return children; }\n');
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'next-host', private: true }));
  writeFileSync(join(app, 'next.config.mjs'), 'export default {};\n');
  const env = { ...process.env, NEXT_TELEMETRY_DISABLED: '1', SEED_FILE: `${ROOT}examples/seed.json`, PUBLIC_URL, NODE_ENV: 'production' };
  const built = spawnSync(process.execPath, [NEXT, 'build', '--webpack'], { cwd: app, env, encoding: 'utf8', timeout: 240_000 });
  if (built.status !== 0) throw new Error(`next build failed:\n${built.stdout}\n${built.stderr}`);

  next = spawn(process.execPath, [NEXT, 'start', '-p', '0', '-H', '127.0.0.1'], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
  next.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  next.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  for (let waited = 0; !/Ready in/.test(output); waited += 50) {
    if (next.exitCode !== null || waited > 30_000) throw new Error(`next start did not get ready:\n${output}`);
    await sleep(50);
  }
  local = /- Local:\s+(http:\/\/\S+)/.exec(output)![1]!;
  // Next loads the route module at its first request: the memory storage it creates then refuses a ts
  // from before (docs/embedding.md#nextjs), so the signatures of the suite are made after this one.
  const warm = await fetch(`${local}/api/merchant/healthz`);
  if (warm.status !== 200) throw new Error(`the route answered ${warm.status}:\n${output}`);
}, 300_000);

afterAll(async () => {
  if (next && next.exitCode === null) {
    const exited = new Promise((resolve) => next!.once('exit', resolve));
    next.kill('SIGTERM');
    await exited;
  }
  if (app) rmSync(app, { recursive: true, force: true });
});

describe('embedded as a Next.js route handler, under next start', () => {
  embeddingSuite({
    origin: () => PUBLIC_URL,
    send: (url, init) => fetch(url.replace(PUBLIC_URL, local), init),
    output: () => output,
  });
});
