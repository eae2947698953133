/**
 * The README's quick start and the examples, run as real processes:
 * - `npm start` itself (build, then serve) in a fresh copy of the repository,
 *   so that its build does not touch the dist/ other suites are using; then
 *   the output the README shows, the curl lines the server prints, and the
 *   README's curl/openssl, curl -u and TypeScript examples against it;
 * - `npm install` and `npm test` as the README states them;
 * - the standalone server's configuration errors, and examples/embed-node.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signUrl } from '../../src/signing/index.js';
import { codeBlocks } from '../support/docs-markdown.js';
import { ROOT, runProcess, startProcess, type Started } from '../support/processes.js';
import { sleep } from '../support/sleep.js';

const README = readFileSync(`${ROOT}README.md`, 'utf8');
const readmeBlocks = codeBlocks('README.md', README);

/** What a fresh clone holds that `npm start` needs (node_modules is linked, as `npm install` would have made it). */
const CLONE = ['package.json', 'package-lock.json', 'tsconfig.json', 'tsup.config.ts', 'README.md', 'scripts', 'src', 'adapters', 'examples'];

describe('the README quick start: npm start', () => {
  let copy: string;
  let npm: ChildProcess;
  let output = '';
  let url: string;
  let exited: Promise<number | null>;

  beforeAll(async () => {
    copy = mkdtempSync(join(tmpdir(), 'merchant-api-quick-start-'));
    for (const path of CLONE) cpSync(`${ROOT}${path}`, join(copy, path), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'), 'dir');
    // Its own process group, so that stopping it reaches npm, the shell and the server.
    npm = spawn('npm', ['start'], {
      cwd: copy,
      detached: true,
      env: {
        ...process.env,
        PORT: '0',
        ...Object.fromEntries(['HOST', 'SEED_FILE', 'DATABASE_URL', 'PUBLIC_URL', 'TRUST_PROXY', 'CURSOR_SECRET', 'TLS_CERT_FILE', 'TLS_KEY_FILE', 'METRICS_PORT', 'LOG_LEVEL', 'ACCESS_LOG'].map((name) => [name, ''])),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    exited = new Promise((resolve) => npm.once('exit', (code) => resolve(code)));
    npm.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    npm.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    url = await new Promise<string>((resolve, reject) => {
      // npm start builds first (tsup, with declarations): seconds on a quiet machine, minutes on a
      // busy one. The test is that it starts, not how fast.
      const timer = setTimeout(() => reject(new Error(`npm start printed no URL within 150 s:\n${output}`)), 150_000);
      const check = () => {
        const match = /merchant-api listening on (http:\/\/\S+)/.exec(output);
        if (!match) return;
        clearTimeout(timer);
        npm.stdout!.off('data', check);
        npm.stderr!.off('data', check);
        resolve(match[1]!);
      };
      // The banner is on stderr (stdout is a pipe here, the JSON log's).
      npm.stdout!.on('data', check);
      npm.stderr!.on('data', check);
      npm.once('exit', (code) => reject(new Error(`npm start exited with ${code}:\n${output}`)));
    });
  }, 180_000);

  /** Signals npm's process group (npm, its shell and the server); false when it is gone. */
  const signal = (name: NodeJS.Signals | 0) => {
    try {
      process.kill(-npm.pid!, name);
      return true;
    } catch {
      return false;
    }
  };

  afterAll(async () => {
    if (npm?.pid !== undefined && signal('SIGTERM')) {
      const timer = setTimeout(() => signal('SIGKILL'), 10_000);
      await exited;
      await until(() => !signal(0), 10_000);
      clearTimeout(timer);
    }
    if (copy) rmSync(copy, { recursive: true, force: true });
  });

  /** A README command line against this server instead of the default port. */
  const here = (text: string) => text.replaceAll('http://127.0.0.1:8787', url);

  it('states the two commands, and npm test builds first', () => {
    const quickStart = readmeBlocks.find((block) => block.lang === 'sh' && block.text.includes('npm start'))!;
    expect(quickStart.text.split('\n').map((line) => line.replace(/\s+#.*$/, ''))).toEqual(['npm install && npm start', 'npm install && npm test']);
    expect(quickStart.text).toContain('http://127.0.0.1:8787');
    const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8'));
    expect(pkg.scripts.start).toMatch(/^node scripts\/build\.mjs --if-stale && node dist\/cli\.js serve$/);
    expect(pkg.scripts.pretest).toMatch(/^npm run build/);
    expect(pkg.scripts.test).toBe('vitest run');
  });

  it('npm install has nothing left to install: npm ls finds every dependency', async () => {
    const { code, output: listed } = await runProcess('npm', ['ls', '--depth=0']);
    expect(listed).not.toMatch(/missing|invalid|ERR!/);
    expect(code).toBe(0);
  });

  it('prints what the README shows: the URL, the storage and the demo merchant', () => {
    expect(new URL(url).hostname).toBe('127.0.0.1');
    const shown = readmeBlocks.find((block) => block.lang === 'text' && block.text.startsWith('merchant-api listening on'))!;
    const printed = output.split('\n');
    const first = printed.findIndex((line) => line.startsWith('merchant-api listening on'));
    // The README's lines, in order, with the port and the signature's ts, salt and hmac (…) varying.
    shown.text.split('\n').forEach((line, n) => {
      const pattern = new RegExp(`^${here(line).replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replaceAll('…', '[^&\']+')}$`);
      expect(printed[first + n]).toMatch(pattern);
    });
  });

  it('serves the API reference page the banner names', async () => {
    const named = /^API reference: (\S+)$/m.exec(output)![1]!;
    expect(named).toBe(`${url}/docs`);
    const page = await fetch(named);
    expect([page.status, page.headers.get('content-type')]).toEqual([200, 'text/html; charset=utf-8']);
    expect(await page.text()).toContain('<div id="swagger-ui"></div>');
  });

  it('serves /healthz', async () => {
    const response = await fetch(`${url}/healthz`);
    expect(response.status).toBe(200);
    // The memory storage's webhook dispatcher runs in serve, and says how it does.
    expect(await response.json()).toEqual({ status: 'ok', details: { webhooks: { ok: true, running: true, in_flight: 0, pending: 0, oldest_due_seconds: 0, dropped: 0 } } });
  });

  it('runs the two curl lines it prints', async () => {
    const tryLines = output.split('\n').filter((line) => /^(Try: | {5})curl /.test(line)).map((line) => line.replace(/^(Try:)?\s+/, ''));
    expect(tryLines).toHaveLength(2);
    const signed = await runProcess('bash', ['-c', `${tryLines[0]!} --silent`]);
    expect(signed.output.trim()).toBe('{"status":"ok","is_valid":true}');
    const page = await runProcess('bash', ['-c', `${tryLines[1]!} --silent`]);
    expect(JSON.parse(page.output).data).toHaveLength(5);
  });

  it("accepts the README's curl and openssl example", async () => {
    const block = readmeBlocks.find((b) => b.lang === 'sh' && b.text.startsWith('KEY=demo-secret'))!;
    const { code, output: answer } = await runProcess('bash', ['-c', here(block.text)]);
    expect(answer.trim().split('\n').at(-1)).toBe('{"status":"ok","is_valid":true}');
    expect(block.text.trim().split('\n').at(-1)).toBe('# {"status":"ok","is_valid":true}');
    expect(code).toBe(0);
  });

  it("answers the README's curl -u lines with one page and one user", async () => {
    const block = readmeBlocks.find((b) => b.lang === 'sh' && b.text.startsWith('curl -u'))!;
    const answers = [];
    for (const line of block.text.split('\n')) {
      const { code, output: body } = await runProcess('bash', ['-c', `${here(line)} --silent --fail`]);
      expect(code, line).toBe(0);
      answers.push(JSON.parse(body));
    }
    expect(answers.map((answer) => [answer.status, answer.data.length])).toEqual([['ok', 5], ['ok', 1]]);
    expect(answers[1].data[0].shared_user_id).toBe('usr-0004');
  });

  it("runs the README's TypeScript signing example against it", async () => {
    const block = readmeBlocks.find((b) => b.lang === 'ts' && b.text.includes('signUrl('))!;
    // A module of a project that depends on merchant-api (the built package).
    const dir = mkdtempSync(join(tmpdir(), 'merchant-api-readme-example-'));
    try {
      mkdirSync(join(dir, 'node_modules'));
      symlinkSync(ROOT, join(dir, 'node_modules', 'merchant-api'), 'dir');
      writeFileSync(join(dir, 'example.mts'), here(block.text));
      const { code, output: printed } = await runProcess('node', ['--import', 'tsx', join(dir, 'example.mts')]);
      expect(printed.trim()).toBe("{ status: 'ok', is_valid: true }");
      expect(code).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs examples/sign-and-call.ts against it', async () => {
    const { code, output: printed } = await runProcess('node', ['--import', 'tsx', 'examples/sign-and-call.ts'], { BASE_URL: url });
    expect(printed).toContain('validatesignature: 200 {"status":"ok","is_valid":true}');
    expect(printed).toContain('first page: 200, 3 users, next_cursor present');
    expect(code).toBe(0);
  });

  it('stops gracefully on SIGTERM', async () => {
    expect(signal('SIGTERM')).toBe(true);
    expect(await until(() => /"event":"stopped"/.test(output), 10_000), output).toBe(true);
    await exited;
  });
});

describe('the standalone server configuration', () => {
  it('refuses a bad configuration with one line naming every problem, exit code 2', async () => {
    const { code, output } = await runProcess('node', ['dist/cli.js', 'serve'], { PORT: 'eighty', TRUST_PROXY: 'maybe', TLS_CERT_FILE: 'x.pem' });
    expect(code).toBe(2);
    expect(output.trim()).toBe(
      'Invalid configuration: TRUST_PROXY must be true or false (got "maybe"); TLS_CERT_FILE and TLS_KEY_FILE must be set together; PORT must be a whole number from 0 to 65535 (got "eighty").',
    );
    // docs/configuration.md shows this very line.
    expect(readFileSync(`${ROOT}docs/configuration.md`, 'utf8')).toContain(output.trim());
  });

  it('refuses an invalid seed file, naming the problem', async () => {
    const { code, output } = await runProcess('node', ['dist/cli.js', 'serve'], { SEED_FILE: 'package.json' });
    expect(code).toBe(2);
    expect(output.trim()).toBe('SEED_FILE package.json: Invalid seed: "merchants" must be an array');
  });

  it('serves a seed file given by SEED_FILE, with PUBLIC_URL for signatures, and prints no key', async () => {
    const server = await startProcess('node', ['dist/cli.js', 'serve'], { PORT: '0', SEED_FILE: 'examples/seed.json', PUBLIC_URL: 'https://api.example.com' }, /listening on (http:\/\/\S+)/);
    try {
      expect(server.output()).not.toContain('demo-secret');
      const signed = signUrl('demo-secret', 'https://api.example.com/validatesignature', { cp: 'demo-merchant' });
      const response = await fetch(signed.replace('https://api.example.com', server.url));
      expect(await response.json()).toEqual({ status: 'ok', is_valid: true });
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });
});

describe('examples/embed-node.ts', () => {
  let server: Started;
  beforeAll(async () => {
    server = await startProcess('node', ['--import', 'tsx', 'examples/embed-node.ts'], { PORT: '0' }, /listening on (http:\/\/\S+)/);
  });
  afterAll(() => server.stop());

  it("serves the host application's own routes beside the API", async () => {
    expect(await (await fetch(`${server.url}/`)).text()).toBe('Hello from the host application\n');
    expect(await (await fetch(`${server.url}/merchant-api/healthz`)).json()).toEqual({ status: 'ok' });
  });

  it('verifies signatures over the mounted path', async () => {
    const response = await fetch(signUrl('demo-secret', `${server.url}/merchant-api/validatesignature`, { cp: 'demo-merchant' }));
    expect(await response.json()).toEqual({ status: 'ok', is_valid: true });
  });

  it("answers the API's JSON 404 inside the mount", async () => {
    const response = await fetch(`${server.url}/merchant-api/nope`);
    expect(response.status).toBe(404);
    expect((await response.json()).errors[0].code).toBe('not_found');
  });
});

/** Polls `condition` every 50 ms for up to `ms`; resolves with whether it came true. */
async function until(condition: () => boolean, ms: number): Promise<boolean> {
  for (let waited = 0; waited < ms; waited += 50) {
    if (condition()) return true;
    await sleep(50);
  }
  return condition();
}
