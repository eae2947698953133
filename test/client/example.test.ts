/**
 * The client as a merchant meets it, against the demo server of `npm start`
 * (`merchant-api serve` on the bundled examples/seed.json):
 * - examples/client.ts runs and prints what docs/client.md says it does;
 * - the packed tarball, installed into a fresh project, type-checks and runs
 *   the example of the client's issue (strict TypeScript, nodenext).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, runProcess, startProcess, type Started } from '../support/processes.js';

const DEMO_ENV = { PORT: '0', HOST: '127.0.0.1', SEED_FILE: '', DATABASE_URL: '', PUBLIC_URL: '', TRUST_PROXY: '', TLS_CERT_FILE: '', TLS_KEY_FILE: '', METRICS_PORT: '', ACCESS_LOG: 'false' };

let server: Started;
beforeAll(async () => {
  server = await startProcess(process.execPath, ['dist/cli.js', 'serve'], DEMO_ENV, /listening on (http:\/\/\S+)/);
});
afterAll(async () => {
  await server?.stop();
});

describe('examples/client.ts against the demo server', () => {
  it('validates, reads a user, pages, exports, and meets a 404', async () => {
    const { code, output } = await runProcess(process.execPath, ['--import', 'tsx', 'examples/client.ts'], { BASE_URL: server.url });
    expect(output.trim().split('\n')).toEqual([
      'validatesignature: {"status":"ok","is_valid":true}',
      'user usr-0004: Yuki 田中, joined 2021-01-15T03:04:05.060708+00:00',
      'active since 2020: usr-0002, usr-0004, usr-0005, usr-0007, usr-0008',
      'page 1: 3 users, next cursor present',
      'page 2: 3 users, next cursor present',
      'page 3: 2 users, next cursor null',
      'exported: 8 users',
      expect.stringMatching(/^no-such-user: 404 not_found \(request id [0-9a-f-]{36}\)$/),
    ]);
    expect(code).toBe(0);
  });

  it('says it cannot reach the API when nothing listens there (exit 1)', async () => {
    const { code, output } = await runProcess(process.execPath, ['--import', 'tsx', 'examples/client.ts'], { BASE_URL: 'http://127.0.0.1:9' });
    expect(output).toMatch(/^cannot reach the API: GET http:\/\/127\.0\.0\.1:9\/validatesignature failed/m);
    expect(code).toBe(1);
  });
});

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

describe('the packed tarball, installed into a fresh project', () => {
  let work = '';
  let consumer = '';

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'merchant-api-client-package-'));
    // --ignore-scripts: dist/ is built (pretest); `prepare` would rebuild it under the other suites.
    const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], ROOT);
    if (packed.code !== 0) throw new Error(`npm pack failed:\n${packed.output}`);
    const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as { filename: string }[];
    consumer = join(work, 'consumer');
    mkdirSync(consumer);
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'client-consumer', private: true, type: 'module', allowScripts: { [`file:${join(work, info!.filename)}`]: false } }));
    const typesNode = (JSON.parse(readFileSync(`${ROOT}node_modules/@types/node/package.json`, 'utf8')) as { version: string }).version;
    const installed = await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', join(work, info!.filename), `@types/node@${typesNode}`], consumer);
    if (installed.code !== 0) throw new Error(`npm install of the tarball failed:\n${installed.output}`);
    writeFileSync(join(consumer, 'example.mts'), ISSUE_EXAMPLE);
  }, 180_000);
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('type-checks the example (strict, nodenext, declarations checked too)', async () => {
    writeFileSync(
      join(consumer, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: false, types: ['node'] }, files: ['example.mts'] }),
    );
    const tsc = await run(process.execPath, [`${ROOT}node_modules/typescript/bin/tsc`, '-p', consumer], consumer);
    expect(tsc.output).toBe('');
    expect(tsc.code).toBe(0);
  }, 120_000);

  it('runs the example against the demo server', async () => {
    const result = await run(process.execPath, ['--experimental-strip-types', '--no-warnings', 'example.mts'], consumer, { BASE_URL: server.url, API_KEY: 'demo-secret' }).catch(() => undefined);
    // Node 20 cannot strip types: compile with tsc then, as a merchant's build would.
    let output = result?.code === 0 ? result.stdout : '';
    if (!output) {
      writeFileSync(join(consumer, 'tsconfig.build.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, outDir: 'out', types: ['node'] }, files: ['example.mts'] }));
      const built = await run(process.execPath, [`${ROOT}node_modules/typescript/bin/tsc`, '-p', 'tsconfig.build.json'], consumer);
      expect(built.output).toBe('');
      const ran = await run(process.execPath, ['out/example.mjs'], consumer, { BASE_URL: server.url, API_KEY: 'demo-secret' });
      expect(ran.code, ran.output).toBe(0);
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

function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; output: string }> {
  const child = spawn(command, args, { cwd, env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    output += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, output }));
  });
}
