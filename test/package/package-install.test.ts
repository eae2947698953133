/**
 * The package as a team installs it: `npm pack`, then `npm install` of the
 * tarball into a fresh project, where a strict TypeScript consumer
 * type-checks, every entry point loads and answers on Node, Bun and Deno, and
 * the `merchant-api` bin runs. publint and arethetypeswrong check the same
 * tarball. One pack and one install per run (beforeAll). The example of the client's issue is
 * type-checked and built in the same project (strict, nodenext) and run against the demo server.
 *
 * Packed as `npm run pack` packs (test/support/pack.ts: the files of `npm pack`, package.json
 * without `prepare`, no script run): `pretest` has built dist/, and `prepare` would rebuild it
 * while other test files read it. The tarball installs with no install-scripts warning.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic } from '../support/basic-auth.js';
import { CONSUMER_ENV, ROOT, runInDirectory, startProcess, type Started } from '../support/processes.js';
import { packPackage } from '../support/pack.js';

const FIXTURE = `${ROOT}test/fixtures/package-consumer/`;
const TSC = `${ROOT}node_modules/typescript/bin/tsc`;
const RUNTIME_COMMANDS = {
  node: [process.execPath],
  bun: [`${ROOT}node_modules/.bin/bun`],
  // The permissions of `npm run start:deno`; Deno finds the project's node_modules by its package.json.
  deno: [`${ROOT}node_modules/.bin/deno`, 'run', '--allow-read', '--allow-env', '--allow-net'],
} as const;
/** What the child processes must not inherit: a CI job's database, colours, Deno's update check. */

interface PackageJson {
  name: string;
  version: string;
  license: string;
  bin: Record<string, string>;
  exports: Record<string, string | { import: { types: string; default: string }; require: { types: string; default: string } }>;
}
const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as PackageJson;
const subpaths = Object.keys(pkg.exports).filter((key) => key !== './package.json');
const specifier = (subpath: string) => (subpath === '.' ? pkg.name : `${pkg.name}/${subpath.slice(2)}`);

/** The example of the issue that asked for the client, against the demo merchant. */
const ISSUE_EXAMPLE = `
import { createMerchantClient, MerchantResponseError, type UserRecord } from 'merchant-api/client';

const client = createMerchantClient({
  baseUrl: process.env.BASE_URL!,
  merchantId: 'demo-merchant',
  apiKey: process.env.API_KEY!,
});

const out: Record<string, unknown> = {};
out.validateSignature = await client.validateSignature();
const active: string[] = [];
for await (const user of client.users({ active: true, joinedAfter: '2021-01-01T00:00:00Z' })) active.push(user.shared_user_id);
out.active = active;
const sizes: number[] = [];
for await (const page of client.userPages({ pageSize: 500 })) sizes.push(page.users.length);
out.pages = sizes;
const u: UserRecord = await client.user('usr-0001');
out.user = u.first_name;
try {
  await client.user('u-0001');
} catch (error) {
  if (!(error instanceof MerchantResponseError)) throw error;
  out.missing = [error.status, error.code];
}
const all = client.exportUsers();
let count = 0;
for await (const user of all) count += user.shared_user_id.length > 0 ? 1 : 0;
out.exported = count;
console.log(JSON.stringify(out));
`;

/** The TypeScript programs of the consumer, one tsc run each: how a project of each kind type-checks the package. */
const TSCONFIGS = {
  // Also builds the example into out/ (emitted only once it type-checks), as a merchant's build would: no second tsc run to build it.
  'ESM and CommonJS, module nodenext, and the example of the client': { module: 'nodenext', moduleResolution: 'nodenext', outDir: 'out', files: ['consumer.ts', 'consumer.cts', 'example.mts'] },
  'a bundler, module esnext': { module: 'esnext', moduleResolution: 'bundler', noEmit: true, files: ['consumer.ts'] },
  'moduleResolution node10 (module commonjs)': { module: 'commonjs', moduleResolution: 'node10', noEmit: true, files: ['consumer.ts'] },
};
const configOf = (moduleResolution: string) => join(consumer, `tsconfig.${moduleResolution}.json`);

let work = '';
let consumer = '';
let tarball = '';
let packedFiles: string[] = [];
let installOutput = '';

beforeAll(async () => {
  for (const subpath of subpaths) {
    const target = pkg.exports[subpath] as Exclude<PackageJson['exports'][string], string>;
    if (!existsSync(`${ROOT}${target.import.default}`)) throw new Error(`${target.import.default} is missing: run npm run build first.`);
  }
  work = mkdtempSync(join(tmpdir(), 'merchant-api-package-'));

  ({ tarball, files: packedFiles } = await packPackage(work));

  consumer = join(work, 'consumer');
  mkdirSync(consumer);
  for (const file of readdirSync(FIXTURE)) copyFileSync(`${FIXTURE}${file}`, join(consumer, file));
  // The same program type-checked as CommonJS.
  copyFileSync(join(consumer, 'consumer.ts'), join(consumer, 'consumer.cts'));
  writeFileSync(
    join(consumer, 'package.json'),
    JSON.stringify({
      name: 'package-consumer',
      private: true,
      type: 'module',
      // Nothing for the tarball itself: npm run pack leaves `prepare` out of its package.json (scripts/pack.mjs).
      // swagger-ui-dist (the /docs page) depends on @scarf/scarf, whose postinstall only reports the download:
      // a consumer declines it, as docs/install.md says.
      allowScripts: { '@scarf/scarf': false },
    }),
  );
  // @types/node at the version this repository builds against: the adapters' types use node:http.
  const typesNode = (JSON.parse(readFileSync(`${ROOT}node_modules/@types/node/package.json`, 'utf8')) as { version: string }).version;
  // The optional peers every entry point is loaded with here, at the versions this repository tests
  // (test/package/client-only-install.test.ts installs the tarball without them).
  const peers = Object.keys((pkg as PackageJson & { peerDependencies: Record<string, string> }).peerDependencies).map(
    (name) => `${name}@${(JSON.parse(readFileSync(`${ROOT}node_modules/${name}/package.json`, 'utf8')) as { version: string }).version}`,
  );
  const installed = await runInDirectory('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball, `@types/node@${typesNode}`, ...peers], consumer);
  installOutput = installed.stdout + installed.stderr;
  if (installed.code !== 0) throw new Error(`npm install of the tarball failed:\n${installOutput}`);
  writeFileSync(join(consumer, 'example.mts'), ISSUE_EXAMPLE);
  for (const { files, ...options } of Object.values(TSCONFIGS)) {
    // skipLibCheck off: our declaration files are checked too.
    const compilerOptions = { ...options, target: 'es2022', strict: true, noEmitOnError: true, skipLibCheck: false, types: ['node'] };
    writeFileSync(configOf(options.moduleResolution), JSON.stringify({ compilerOptions, files }));
  }
}, 180_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the packed tarball', () => {
  it('holds the built package, the demo seed, the monitoring examples, docs, README, LICENSE and CHANGELOG, and nothing else', () => {
    const allowed = /^(package\.json|README\.md|LICENSE|CHANGELOG\.md|examples\/seed\.json|examples\/monitoring\/[\w.-]+\.(json|yml)|docs\/[\w.-]+\.(md|png)|dist\/[\w./-]+\.(js|cjs|d\.ts|d\.cts|map))$/;
    expect(packedFiles.filter((file) => !allowed.test(file))).toEqual([]);
    for (const dir of ['src/', 'adapters/', 'test/', 'bench/', '.ci/', 'node_modules/', 'coverage/']) {
      expect(packedFiles.filter((file) => file.startsWith(dir))).toEqual([]);
    }
    const required = ['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md', 'examples/seed.json', ...Object.values(pkg.bin)];
    for (const subpath of subpaths) {
      const target = pkg.exports[subpath] as Exclude<PackageJson['exports'][string], string>;
      required.push(target.import.types, target.import.default, target.require.types, target.require.default);
    }
    for (const file of required) expect(packedFiles, file).toContain(file.replace(/^\.\//, ''));
  });

  it('installs with no install-scripts or deprecation warnings', () => {
    expect(installOutput).not.toMatch(/install-scripts|deprecated|ERESOLVE|EBADENGINE/i);
    const installed = JSON.parse(readFileSync(join(consumer, 'node_modules', pkg.name, 'package.json'), 'utf8')) as PackageJson;
    expect(installed.version).toBe(pkg.version);
    // The repository's manifest but for `prepare`, which npm 11 would list for approval though it never runs for a tarball.
    const { prepare, ...scripts } = (pkg as PackageJson & { scripts: Record<string, string> }).scripts;
    expect(prepare).toBeDefined();
    expect(installed).toEqual({ ...pkg, scripts });
  });

  it('passes publint --strict', async () => {
    const { publint } = await import('publint');
    const { formatMessage } = await import('publint/utils');
    const bytes = readFileSync(tarball);
    const result = await publint({ pkgDir: 'package', pack: { tarball: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer }, strict: true, level: 'warning' });
    expect(result.messages.map((message) => `${message.type}: ${formatMessage(message, result.pkg, { color: false })}`)).toEqual([]);
  });

  it('has no problems for arethetypeswrong: every entry point resolves to types of its own format, in every resolution mode', async () => {
    const { code, stdout, stderr } = await runInDirectory(`${ROOT}node_modules/.bin/attw`, [tarball, '--format', 'json'], ROOT);
    const report = JSON.parse(stdout) as { analysis: { problems: unknown[]; entrypoints: Record<string, unknown> } };
    expect(report.analysis.problems, stderr).toEqual([]);
    expect(Object.keys(report.analysis.entrypoints).sort()).toEqual(Object.keys(pkg.exports).sort());
    expect(code).toBe(0);
  }, 60_000);
});

describe('a project that installed the tarball', () => {
  for (const [name, { moduleResolution }] of Object.entries(TSCONFIGS)) {
    it(`type-checks a strict consumer of every entry point: ${name}`, async () => {
      const { code, stdout, stderr } = await runInDirectory(process.execPath, [TSC, '-p', configOf(moduleResolution)], consumer);
      expect(stdout + stderr).toBe('');
      expect(code).toBe(0);
    }, 120_000);
  }

  /** The names each entry point of the repository's own dist/ exports (test/package/public-api.test.ts lists them). */
  const expectedExports = () => {
    const require = createRequire(`${ROOT}package.json`);
    return Object.fromEntries(subpaths.map((subpath) => [specifier(subpath), Object.keys(require(`${ROOT}${(pkg.exports[subpath] as { require: { default: string } }).require.default}`)).sort()]));
  };

  for (const runtime of ['node', 'bun', 'deno'] as const) {
    it(`on ${runtime}: imports every entry point, answers /healthz and a signed request, serves with its adapter`, async () => {
      const [command, ...args] = RUNTIME_COMMANDS[runtime];
      const { code, stdout, stderr } = await runInDirectory(command, [...args, 'run.mjs'], consumer);
      expect(code, stderr).toBe(0);
      const result = JSON.parse(stdout) as Record<string, unknown>;
      expect(result).toEqual({
        runtime,
        exports: expectedExports(),
        healthz: [200, '{"status":"ok"}'],
        validatesignature: [200, '{"status":"ok","is_valid":true}'],
        served: [200, '{"status":"ok"}'],
      });
    });

    it(`on ${runtime}: requires every entry point from CommonJS and answers /healthz`, async () => {
      const [command, ...args] = RUNTIME_COMMANDS[runtime];
      const { code, stdout, stderr } = await runInDirectory(command, [...args, 'run.cjs'], consumer);
      expect(code, stderr).toBe(0);
      expect(JSON.parse(stdout)).toEqual({ exports: expectedExports(), healthz: [200, '{"status":"ok"}'] });
    });
  }

  it('runs the merchant-api bin from node_modules/.bin', async () => {
    const { code, stdout } = await runInDirectory(join(consumer, 'node_modules', '.bin', 'merchant-api'), ['help'], consumer);
    expect(stdout).toMatch(/^Usage: merchant-api <command>/);
    expect(code).toBe(0);
  });

  it('serves the bundled demo seed with `merchant-api serve`', async () => {
    const child = spawn(join(consumer, 'node_modules', '.bin', 'merchant-api'), ['serve'], {
      cwd: consumer,
      env: { ...process.env, ...CONSUMER_ENV, PORT: '0', HOST: '127.0.0.1', SEED_FILE: '', PUBLIC_URL: '', TLS_CERT_FILE: '', TLS_KEY_FILE: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no URL within 20 s:\n${output}`)), 20_000);
        const onData = (chunk: Buffer) => {
          output += chunk.toString();
          const match = /listening on (http:\/\/\S+)/.exec(output);
          if (match) {
            clearTimeout(timer);
            resolve(match[1]!);
          }
        };
        child.stdout.on('data', onData);
        child.stderr.on('data', onData);
        child.once('exit', (code) => reject(new Error(`exited with ${code}:\n${output}`)));
      });
      expect(output).toContain('examples/seed.json');
      const users = await fetch(`${url}/merchant/users?limit=1`, { headers: basic('demo-merchant', 'demo-secret') });
      expect(users.status).toBe(200);
      expect(((await users.json()) as { data: unknown[] }).data).toHaveLength(1);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });
});

describe('the example of the client, in the project that installed the tarball', () => {
  const DEMO_ENV = { PORT: '0', HOST: '127.0.0.1', SEED_FILE: '', DATABASE_URL: '', PUBLIC_URL: '', TRUST_PROXY: '', TLS_CERT_FILE: '', TLS_KEY_FILE: '', METRICS_PORT: '', ACCESS_LOG: 'false' };
  let server: Started;
  beforeAll(async () => {
    server = await startProcess(process.execPath, ['dist/cli.js', 'serve'], DEMO_ENV, /listening on (http:\/\/\S+)/);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('runs against the demo server', async () => {
    const env = { BASE_URL: server.url, API_KEY: 'demo-secret' };
    const result = await runInDirectory(process.execPath, ['--experimental-strip-types', '--no-warnings', 'example.mts'], consumer, env).catch(() => undefined);
    // Node 20 cannot strip types: run what the nodenext program built (built here if that test did not run).
    let output = result?.code === 0 ? result.stdout : '';
    if (!output) {
      if (!existsSync(join(consumer, 'out', 'example.mjs'))) {
        const built = await runInDirectory(process.execPath, [TSC, '-p', configOf('nodenext')], consumer);
        expect(built.stdout + built.stderr).toBe('');
      }
      const ran = await runInDirectory(process.execPath, ['out/example.mjs'], consumer, env);
      expect(ran.code, ran.stdout + ran.stderr).toBe(0);
      output = ran.stdout;
    }
    expect(JSON.parse(output.trim())).toEqual({
      validateSignature: { status: 'ok', is_valid: true },
      active: ['usr-0004', 'usr-0005', 'usr-0007', 'usr-0008'],
      pages: [8],
      user: 'Anna',
      missing: [404, 'not_found'],
      exported: 8,
    });
  }, 60_000);
});
