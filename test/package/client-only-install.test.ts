/**
 * A merchant who wants only `merchant-api/client` (docs/install.md): the
 * packed tarball installed into an empty project, without its optional
 * peers, brings no database driver, query builder, Redis client or
 * Prometheus library, and the client signs and pages against a real server
 * on Node, Bun and Deno. The command line loads a peer only for the command
 * that needs it (`help` and `check` need none), and names the one missing
 * instead of failing with a stack trace.
 *
 * Packed as `npm run pack` packs (test/support/pack.ts): dist/ is built (run under the shared lock).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, type Served } from '../../adapters/node.js';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { createMemoryStorage } from '../../src/storage/memory/index.js';
import { ROOT, runInDirectory } from '../support/processes.js';
import { packPackage } from '../support/pack.js';

const RUNTIMES = {
  node: [process.execPath],
  bun: [`${ROOT}node_modules/.bin/bun`],
  deno: [`${ROOT}node_modules/.bin/deno`, 'run', '--allow-read', '--allow-env', '--allow-net'],
} as const;
const PEERS = Object.keys((JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { peerDependencies: Record<string, string> }).peerDependencies);

/** What the merchant's program does: sign a call, read every user page by page (8 in the demo seed). */
const CLIENT_PROGRAM = `
import { createMerchantClient } from 'merchant-api/client';
const client = createMerchantClient({ baseUrl: process.env.BASE_URL, merchantId: 'demo-merchant', apiKey: 'demo-secret', retries: false });
const validated = await client.validateSignature();
const ids = [];
for await (const user of client.users({ pageSize: 5 })) ids.push(user.shared_user_id);
console.log(JSON.stringify({ validated, users: ids.length }));
`;

let work = '';
let consumer = '';
let server: Served | undefined;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'merchant-api-client-only-'));
  const { tarball } = await packPackage(work);
  consumer = join(work, 'merchant-shop');
  mkdirSync(consumer);
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'merchant-shop', private: true, type: 'module' }));
  writeFileSync(join(consumer, 'client.mjs'), CLIENT_PROGRAM);
  const installed = await runInDirectory('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], consumer);
  if (installed.code !== 0) throw new Error(`npm install of the tarball failed:\n${installed.stdout}${installed.stderr}`);

  const seed = JSON.parse(readFileSync(`${ROOT}examples/seed.json`, 'utf8'));
  // Started a minute ago: the client signs at once, and a ts of the storage's own first second is refused (no replay after a restart).
  server = await serve(createMerchantApi({ storage: createMemoryStorage({ seed, startedAt: Math.floor(Date.now() / 1000) - 60 }), logger: silentLogger }), { port: 0 });
}, 180_000);

afterAll(async () => {
  await server?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('a client-only install of the tarball', () => {
  it('has none of the optional peers', () => {
    expect(PEERS.sort()).toEqual(['@opentelemetry/api', 'ioredis', 'kysely', 'mysql2', 'prom-client', 'swagger-ui-dist']);
    expect(existsSync(join(consumer, 'node_modules', 'merchant-api', 'package.json'))).toBe(true);
    for (const name of PEERS) expect(existsSync(join(consumer, 'node_modules', name)), name).toBe(false);
  });

  it('the declarations of merchant-api/client, and the files they import, name none of them (a TypeScript project resolves them without the peers)', () => {
    const dist = join(consumer, 'node_modules', 'merchant-api', 'dist');
    const seen = new Set<string>();
    const named: string[] = [];
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const [, specifier] of readFileSync(join(dist, file), 'utf8').matchAll(/(?:from|import\(|reference types=)\s*['"]([^'"]+)['"]/g)) {
        if (specifier!.startsWith('./')) visit(specifier!.slice(2).replace(/\.js$/, '.d.ts'));
        else named.push(specifier!);
      }
    };
    visit('client.d.ts');
    expect(seen.size).toBeGreaterThan(1);
    expect(named.filter((name) => PEERS.some((peer) => name === peer || name.startsWith(`${peer}/`)))).toEqual([]);
  });

  for (const runtime of ['node', 'bun', 'deno'] as const) {
    it(`on ${runtime}: merchant-api/client signs a call and reads every user`, async () => {
      const [command, ...args] = RUNTIMES[runtime];
      const { code, stdout, stderr } = await runInDirectory(command, [...args, 'client.mjs'], consumer, { BASE_URL: server!.url });
      expect(code, stderr).toBe(0);
      expect(JSON.parse(stdout)).toEqual({ validated: { status: 'ok', is_valid: true }, users: 8 });
    });
  }

  it('merchant-api and its Node adapter serve without any of them (no spans without @opentelemetry/api)', async () => {
    const program = [
      "import { createMerchantApi } from 'merchant-api';",
      "import { serve } from 'merchant-api/node';",
      "import { createMemoryStorage } from 'merchant-api/storage/memory';",
      "const served = await serve(createMerchantApi({ storage: createMemoryStorage(), accessLog: false }), { port: 0 });",
      'const response = await fetch(`${served.url}/healthz`);',
      'console.log(response.status, await response.text());',
      'await served.close();',
    ].join('\n');
    const { code, stdout, stderr } = await runInDirectory(process.execPath, ['--input-type=module', '-e', program], consumer);
    expect(code, stderr).toBe(0);
    expect(stdout.trim()).toBe('200 {"status":"ok"}');
  });

  const CLI = { node: 'cli.js', bun: 'cli-bun.js', deno: 'cli-deno.js' } as const;
  for (const runtime of ['node', 'bun', 'deno'] as const) {
    it(`on ${runtime}: the command line names the package to install`, async () => {
      const [command, ...args] = RUNTIMES[runtime];
      const { code, stdout, stderr } = await runInDirectory(command, [...args, join('node_modules', 'merchant-api', 'dist', CLI[runtime]), 'serve'], consumer, { PORT: '0' });
      expect(stdout).toBe('');
      expect(stderr).toMatch(/^merchant-api: the package (kysely|mysql2|ioredis|prom-client) is not installed\. .*npm install kysely mysql2 ioredis prom-client \(docs\/install\.md\)\.\n$/);
      expect(code).toBe(1);
    });
  }

  for (const runtime of ['node', 'bun', 'deno'] as const) {
    it(`on ${runtime}: the command line loads a peer only for the command that needs it: help and check run without any`, async () => {
      const [command, ...args] = RUNTIMES[runtime];
      const cli = join('node_modules', 'merchant-api', 'dist', CLI[runtime]);
      for (const line of [['--help'], ['help'], ['check', '--help']]) {
        const { code, stdout, stderr } = await runInDirectory(command, [...args, cli, ...line], consumer);
        expect(stderr, line.join(' ')).toBe('');
        expect(stdout, line.join(' ')).toMatch(/^Usage: merchant-api /);
        expect(code, line.join(' ')).toBe(0);
      }
      const checked = await runInDirectory(command, [...args, cli, 'check', '--base-url', server!.url, '--merchant-id', 'demo-merchant'], consumer, { MERCHANT_API_KEY: 'demo-secret' });
      expect(checked.code, checked.stdout + checked.stderr).toBe(0);
      expect(checked.stderr).not.toMatch(/is not installed/);
    });
  }

  it('the bin in node_modules/.bin says the same', async () => {
    const { code, stderr } = await runInDirectory(join(consumer, 'node_modules', '.bin', 'merchant-api'), ['serve'], consumer, { PORT: '0' });
    expect(stderr).toMatch(/^merchant-api: the package \S+ is not installed\./);
    expect(code).toBe(1);
  });

  it('merchant-api/metrics names prom-client', async () => {
    const { code, stderr } = await runInDirectory(process.execPath, ['--input-type=module', '-e', "await import('merchant-api/metrics')"], consumer);
    expect(stderr).toMatch(/Cannot find package 'prom-client'/);
    expect(code).not.toBe(0);
  });
});

