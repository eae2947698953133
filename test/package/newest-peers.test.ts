/**
 * The packed package with the newest release of every peer its ranges allow
 * (test/fixtures/newest-peers/versions.json, pinned so a run is reproducible;
 * `node scripts/refresh-newest-peers.mjs` moves it on), as a team installing
 * today gets them: the consumer type-checks against their declarations, the
 * command line answers `--help`, serves the demo on memory (Node and Bun),
 * migrates MariaDB, adds and lists a merchant and serves it, and the client
 * signs against that server. A peer outside its range stops the command at
 * start, naming both versions (exit 2). The lockfile's versions are tested by
 * package-install.test.ts and every other suite.
 *
 * Packed as `npm run pack` packs (test/support/pack.ts, never rebuilding): `pretest` has built dist/.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic } from '../support/basic-auth.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { ROOT, runInDirectory, startProcess, type Started } from '../support/processes.js';
import { packPackage } from '../support/pack.js';

const { versions } = JSON.parse(readFileSync(`${ROOT}test/fixtures/newest-peers/versions.json`, 'utf8')) as { versions: Record<string, string> };
const { peerDependencies } = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { peerDependencies: Record<string, string> };
const TSC = `${ROOT}node_modules/typescript/bin/tsc`;
/** What docs/install.md tells a project with `skipLibCheck: false` to add beside ioredis 6.1 and later. */
const REDIS_ERRORS_TYPES = '@types/redis-errors@1.2.3';
const BUN = `${ROOT}node_modules/.bin/bun`;
const SERVE_ENV = { PORT: '0', HOST: '127.0.0.1', SEED_FILE: '', DATABASE_URL: '', MASTER_KEY: '', PUBLIC_URL: '', TRUST_PROXY: '', TLS_CERT_FILE: '', TLS_KEY_FILE: '', METRICS_PORT: '', ACCESS_LOG: 'false', REDIS_URL: '' };

let work = '';
let consumer = '';
let bin = '';

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'merchant-api-newest-peers-'));
  const { tarball } = await packPackage(work);
  consumer = join(work, 'consumer');
  mkdirSync(consumer);
  copyFileSync(`${ROOT}test/fixtures/package-consumer/consumer.ts`, join(consumer, 'consumer.ts'));
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'newest-peers', private: true, type: 'module' }));
  const typesNode = (JSON.parse(readFileSync(`${ROOT}node_modules/@types/node/package.json`, 'utf8')) as { version: string }).version;
  const peers = Object.entries(versions).map(([name, version]) => `${name}@${version}`);
  // ioredis 6.1's declarations import redis-errors, which ships no types (ioredis has them as a dev
  // dependency only): a consumer checking libraries' declarations installs them, as docs/install.md says.
  const installed = await runInDirectory('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball, `@types/node@${typesNode}`, REDIS_ERRORS_TYPES, ...peers], consumer);
  if (installed.code !== 0) throw new Error(`npm install of the tarball with the newest peers failed:\n${installed.stdout}${installed.stderr}`);
  bin = join(consumer, 'node_modules', '.bin', 'merchant-api');
  const compilerOptions = { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: false, types: ['node'] };
  writeFileSync(join(consumer, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['consumer.ts'] }));
}, 240_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

const installedVersion = (name: string) => (JSON.parse(readFileSync(join(consumer, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;

describe('the packed package with the newest release of each peer', () => {
  it('lists every peer, each the newest of its range', () => {
    expect(Object.keys(versions).sort()).toEqual(Object.keys(peerDependencies).sort());
    for (const [name, version] of Object.entries(versions)) expect(installedVersion(name), name).toBe(version);
  });

  it('type-checks a strict consumer of every entry point against their declarations', async () => {
    const { code, stdout, stderr } = await runInDirectory(process.execPath, [TSC, '-p', 'tsconfig.json'], consumer);
    expect(stdout + stderr).toBe('');
    expect(code).toBe(0);
  }, 120_000);

  it('answers --help', async () => {
    const { code, stdout, stderr } = await runInDirectory(bin, ['--help'], consumer);
    expect(stderr).toBe('');
    expect(stdout).toMatch(/^Usage: merchant-api <command>/);
    expect(code).toBe(0);
  });

  for (const runtime of ['node', 'bun'] as const) {
    it(`serves the demo seed on memory (${runtime})`, async () => {
      const [command, args] = runtime === 'node' ? [bin, ['serve']] : [BUN, [join(consumer, 'node_modules', 'merchant-api', 'dist', 'cli-bun.js'), 'serve']];
      const server = await startServerIn(command, args, SERVE_ENV);
      try {
        const users = await fetch(`${server.url}/merchant/users?limit=1`, { headers: basic('demo-merchant', 'demo-secret') });
        expect(users.status).toBe(200);
      } finally {
        expect(await server.stop()).toBe(0);
      }
    });
  }

  it('runs the Bun build under `bun x --bun merchant-api` (the bin is Node\'s by its #! line), and the Node one under node', async () => {
    const underBun = await startServerIn(BUN, ['x', '--bun', 'merchant-api', 'serve'], SERVE_ENV);
    expect(await underBun.stop()).toBe(0);
    expect(underBun.output()).toMatch(/listening on http:\/\/\S+ \(bun, /);
    const underNode = await startServerIn(bin, ['serve'], SERVE_ENV);
    expect(await underNode.stop()).toBe(0);
    expect(underNode.output()).toMatch(/listening on http:\/\/\S+ \(node, /);
  });

  describe('on MariaDB', async () => {
    const available = await mysqlAvailable();
    let database: TestDatabase;
    beforeAll(async () => {
      if (available) database = await createTestDatabase({ migrate: false });
    });
    afterAll(async () => {
      await database?.drop();
    });

    it.skipIf(!available)('migrates, adds and lists a merchant, serves it, and the client signs against it', async () => {
      const env = { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText };
      const migrated = await runInDirectory(bin, ['migrate'], consumer, env);
      expect(migrated.code, migrated.stdout + migrated.stderr).toBe(0);
      const added = await runInDirectory(bin, ['merchant', 'add', 'shop-newest', '--json'], consumer, env);
      expect(added.code, added.stderr).toBe(0);
      const { api_key: apiKey } = JSON.parse(added.stdout) as { api_key: string };
      const listed = await runInDirectory(bin, ['merchant', 'list', '--json'], consumer, env);
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.stdout).toContain('shop-newest');

      const server = await startServerIn(bin, ['serve'], { ...SERVE_ENV, ...env });
      try {
        const program = `
          import { createMerchantClient } from 'merchant-api/client';
          const client = createMerchantClient({ baseUrl: process.env.BASE_URL, merchantId: 'shop-newest', apiKey: process.env.API_KEY, retries: false });
          console.log(JSON.stringify(await client.validateSignature()));`;
        writeFileSync(join(consumer, 'client.mjs'), program);
        // The storage refuses a ts of the second it started in (no replay after a restart).
        await new Promise((resolve) => setTimeout(resolve, 1100));
        const ran = await runInDirectory(process.execPath, ['client.mjs'], consumer, { BASE_URL: server.url, API_KEY: apiKey });
        expect(ran.code, ran.stderr).toBe(0);
        expect(JSON.parse(ran.stdout)).toEqual({ status: 'ok', is_valid: true });
      } finally {
        expect(await server.stop()).toBe(0);
      }
    }, 120_000);
  });

  it('names a peer outside its range with both versions at start, and exits 2', async () => {
    const file = join(consumer, 'node_modules', 'kysely', 'package.json');
    const original = readFileSync(file, 'utf8');
    writeFileSync(file, JSON.stringify({ ...JSON.parse(original), version: '0.30.0' }));
    try {
      const { code, stdout, stderr } = await runInDirectory(bin, ['--help'], consumer);
      expect(stdout).toBe('');
      expect(stderr).toBe(`merchant-api: kysely 0.30.0 is installed, but merchant-api ${installedVersion('merchant-api')} supports kysely ${peerDependencies.kysely}: npm install kysely@"${peerDependencies.kysely}" (docs/install.md).\n`);
      expect(code).toBe(2);
    } finally {
      writeFileSync(file, original);
    }
  });
});

/** A server started in the consumer project, once it prints its URL. */
function startServerIn(command: string, args: string[], env: Record<string, string>): Promise<Started> {
  return startProcess(command, args, { ...env, NO_COLOR: '1' }, /listening on (http:\/\/\S+)/, consumer);
}
