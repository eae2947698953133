/**
 * `merchant-api check` (src/cli/commands/check.ts): against real servers and broken
 * set-ups, it says in plain words what is wrong (the key, the clock with the
 * measured offset, the URL or path, TLS, reachability), the whole report on standard output, and
 * exits with the code of the outcome (`CHECK_EXIT`: 0 ok, 1 key, 2 usage, 3 unreachable, 4 URL, 5 clock, 6 server).
 * In process through `runCli` and `checkCommand` (captured output), and once
 * through the built bin with MERCHANT_API_KEY.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHECK_EXIT, checkCommand, type CheckDeps } from '../../src/cli/commands/check.js';
import { runCli } from '../../src/cli/run.js';
import { ROOT, runInDirectory, runProcess, useCliServer } from '../support/processes.js';
import { conformanceSeed, MERCHANTS } from '../support/seeds.js';
import { freePort } from '../support/ports.js';
import { captureIo as capture } from '../support/recording.js';

const { main, closed } = MERCHANTS;

interface Run {
  code: number;
  out: string;
  err: string;
}

/** `merchant-api check` through the CLI's dispatch, as the bin runs it (no terminal: no prompt). */
async function cli(args: string[], env: Record<string, string | undefined>): Promise<Run> {
  const io = capture(env);
  const code = await runCli(['check', ...args], io, { name: 'test', serve: () => Promise.reject(new Error('not in this test')) });
  return { code, out: io.lines.join('\n'), err: io.errors.join('\n') };
}

/** The command itself, with its dependencies replaced. */
async function check(args: string[], env: Record<string, string | undefined>, deps: CheckDeps): Promise<Run> {
  const io = capture(env);
  let code: number;
  try {
    code = await checkCommand(args, io, deps);
  } catch (error) {
    io.err((error as Error).message);
    code = 2;
  }
  return { code, out: io.lines.join('\n'), err: io.errors.join('\n') };
}

const key = { MERCHANT_API_KEY: main.keys[0] };

describe('merchant-api check', () => {
  const server = useCliServer('node', conformanceSeed());
  const scoped = useCliServer('node', { merchants: [{ id: 'shop-scoped', status: 'active', keys: [{ key: 'signing-only-key', scopes: ['signature'] }, { key: 'test_check-key', mode: 'test' }] }], users: [] } as unknown as ReturnType<typeof conformanceSeed>);
  const args = (base = server.url, merchant: string = main.id) => ['--base-url', base, '--merchant-id', merchant];

  it('passes against a working server: signature, clock and user list (exit 0)', async () => {
    const run = await cli(args(), key);
    expect(run).toMatchObject({ code: 0, err: '' });
    expect(run.out).toContain(`Checking ${server.url} for merchant "${main.id}".`);
    expect(run.out).toMatch(/ok +signature: this key signs requests the server accepts/);
    expect(run.out).toMatch(/ok +clock: yours agrees with the server's/);
    expect(run.out).toMatch(/ok +user list: this key reads GET \/merchant\/users \(HTTP Basic\); the first page has a user/);
    expect(run.out).toMatch(/ok +mode: live: this key sees the merchant's live data/);
    expect(run.out).toMatch(/Everything works/);
  });

  it('says a test key is one (docs/test-mode.md): its mode, and everything else works with it', async () => {
    const run = await cli(args(scoped.url, 'shop-scoped'), { MERCHANT_API_KEY: 'test_check-key' });
    expect(run).toMatchObject({ code: 0, err: '' });
    expect(run.out).toMatch(/ok +mode: test: this key sees the merchant's test dataset only, never live data/);
    expect(run.out).toMatch(/Everything works/);
  });

  it('a wrong key: said once, with the request id, and tried once: one failed authentication, not two (exit 1)', async () => {
    const requests: string[] = [];
    const counting: typeof fetch = (input, init) => {
      requests.push(new URL(input instanceof Request ? input.url : String(input)).pathname);
      return fetch(input, init);
    };
    const run = await check(args(), { MERCHANT_API_KEY: 'not-the-key' }, { fetch: counting });
    expect(run).toMatchObject({ code: CHECK_EXIT.credentials, err: '' });
    expect(run.out).toMatch(/PROBLEM +user list: wrong API key or merchant id: GET \/merchant\/users refuses "shop-main" with this key \(401\).*\(request id [\w-]+\)/);
    expect(run.out).toMatch(/skipped +signature: not checked with a key the server refused/);
    expect(requests).toEqual(['/merchant/users']);
    expect(run.out + run.err).not.toContain('not-the-key');
  });

  it('clock skew: names the offset measured from the Date header', async () => {
    const run = await check(args(), key, { now: () => Date.now() - 400_000 });
    expect(run).toMatchObject({ code: CHECK_EXIT.clock, err: '' });
    const offset = Number(/clock skew: your clock is (\d+) s behind the server's \(measured from its Date header\), more than it accepts \(300 s\)\. Set your clock by NTP\./.exec(run.out)?.[1]);
    expect(offset).toBeGreaterThanOrEqual(398);
    expect(offset).toBeLessThanOrEqual(402);
    // Basic authentication does not depend on the clock.
    expect(run.out).toMatch(/ok +user list/);
    const ahead = await check(args(), key, { now: () => Date.now() + 3_000_000 });
    expect(ahead).toMatchObject({ code: CHECK_EXIT.clock, err: '' });
    expect(ahead.out).toMatch(/your clock is 300\d s ahead of the server's/);
    const slight = await check(args(), key, { now: () => Date.now() + 42_000 });
    expect(slight.code).toBe(0);
    expect(slight.out).toMatch(/ok +clock: yours is 4[1-3] s ahead of the server's/);
  });

  it('a wrong base path: 404 from the API, and the hint to include the mount path', async () => {
    const run = await cli(args(`${server.url}/api/v1`), key);
    expect(run).toMatchObject({ code: CHECK_EXIT.url, err: '' });
    expect(run.out).toMatch(/PROBLEM +wrong base URL or path: http:\/\/127\.0\.0\.1:\d+\/api\/v1\/merchant\/users\?limit=1 answered 404 "No such endpoint\."\. Give the URL the API answers at; if it is mounted under a path, include the path/);
    expect(run.out).toMatch(/skipped +signature/);
  });

  it('an unknown merchant id and a disabled merchant', async () => {
    const unknown = await cli(args(server.url, 'no-such-shop'), key);
    expect(unknown).toMatchObject({ code: CHECK_EXIT.credentials, err: '' });
    expect(unknown.out).toMatch(/user list: wrong API key or merchant id: GET \/merchant\/users refuses "no-such-shop"/);
    const disabled = await cli(args(server.url, closed.id), { MERCHANT_API_KEY: closed.keys[0] });
    expect(disabled).toMatchObject({ code: CHECK_EXIT.credentials, err: '' });
    expect(disabled.out).toMatch(/signature: the merchant account "shop-closed" is disabled/);
  });

  it('unreachable: a port nothing listens on, and a host name that does not resolve', async () => {
    const port = await freePort();
    const refused = await cli(args(`http://127.0.0.1:${port}`), key);
    expect(refused).toMatchObject({ code: CHECK_EXIT.unreachable, err: '' });
    expect(refused.out).toMatch(new RegExp(`PROBLEM +unreachable: 127\\.0\\.0\\.1 refuses connections on port ${port}\\. Check the host and port of --base-url, and that the server runs\\.`));
    expect(refused.out).toMatch(/skipped +signature: not checked, the server cannot be reached/);
    const dns = await cli(args('http://merchant-api.invalid'), key);
    expect(dns).toMatchObject({ code: CHECK_EXIT.unreachable, err: '' });
    expect(dns.out).toMatch(/unreachable: the host name "merchant-api\.invalid" does not resolve/);
  });

  describe('a server that accepts connections and never answers', () => {
    let silent: Server;
    const sockets = new Set<Socket>();
    beforeAll(async () => {
      silent = createServer((socket) => {
        sockets.add(socket);
        socket.on('error', () => undefined);
        socket.on('close', () => sockets.delete(socket));
      });
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    });
    afterAll(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    });

    it('says there was no answer in time', async () => {
      const run = await check(args(`http://127.0.0.1:${(silent.address() as { port: number }).port}`), key, { timeoutMs: 300 });
      expect(run).toMatchObject({ code: CHECK_EXIT.unreachable, err: '' });
      expect(run.out).toMatch(/no answer from 127\.0\.0\.1:\d+ within 0\.3 s/);
    });
  });

  describe('TLS problems', () => {
    let dir: string;
    let https: HttpsServer;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'merchant-api-check-tls-'));
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'pipe' });
      https = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) }, (_req, res) => res.end('{}'));
      await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
    });
    afterAll(async () => {
      https?.closeAllConnections();
      await new Promise((resolve) => https?.close(resolve));
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('an untrusted (self-signed) certificate', async () => {
      const run = await cli(args(`https://127.0.0.1:${(https.address() as { port: number }).port}`), key);
      expect(run).toMatchObject({ code: CHECK_EXIT.unreachable, err: '' });
      expect(run.out).toMatch(/PROBLEM +TLS problem: the certificate of 127\.0\.0\.1:\d+ is not trusted or not valid for that name \(.*(self-signed|self signed).*\)\. With a private certificate authority, give Node its certificate: NODE_EXTRA_CA_CERTS=ca\.pem\./);
    });

    it('https:// to a plain HTTP port', async () => {
      const run = await cli(args(server.url.replace('http://', 'https://')), key);
      expect(run).toMatchObject({ code: CHECK_EXIT.unreachable, err: '' });
      expect(run.out).toMatch(/PROBLEM +TLS problem: 127\.0\.0\.1:\d+ does not speak HTTPS on port \d+ \(wrong version number.*\)\. Use http:\/\/ for a plain HTTP server/);
    });
  });

  it('usage problems exit 2: missing options, a key given as an argument, no key and no terminal', async () => {
    expect(await cli([], key)).toMatchObject({ code: 2, err: expect.stringMatching(/--base-url and --merchant-id are required\.\nUsage: merchant-api check/) });
    expect(await cli([...args(), '--api-key', 'secret'], key)).toMatchObject({ code: 2, err: expect.stringMatching(/The API key is never an argument/) });
    expect(await cli([...args(), '--api-key=secret'], key)).toMatchObject({ code: 2, err: expect.stringMatching(/The API key is never an argument/) });
    expect(await cli(['--base-url', 'api.example.com', '--merchant-id', 'x'], key)).toMatchObject({ code: 2, err: expect.stringMatching(/is not a URL; give the scheme too/) });
    expect(await cli(['--base-url', 'ftp://x', '--merchant-id', 'x'], key)).toMatchObject({ code: 2 });
    expect(await cli([...args(), '--verbose'], key)).toMatchObject({ code: 2, err: expect.stringMatching(/^Unknown option --verbose\.\nUsage: merchant-api check/) });
    expect(await cli(args(), {})).toMatchObject({ code: 2, err: expect.stringMatching(/No API key: set MERCHANT_API_KEY, or run the command in a terminal/) });
  });

  it('asks for the key on a terminal when MERCHANT_API_KEY is not set', async () => {
    const questions: string[] = [];
    const run = await check(['--base-url', server.url, '--merchant-id', main.id], {}, { prompt: async (question) => (questions.push(question), main.keys[1]) });
    expect(questions).toEqual([`API key of ${main.id}: `]);
    expect(run.code).toBe(0);
    expect((await check(args(), {}, { prompt: async () => '' })).err).toMatch(/No API key was entered/);
  });

  it('the server answering but failing (500, then 429): exit 6, the report whole on standard output', async () => {
    const answer = (status: number, code: string, headers: Record<string, string> = {}) => async () =>
      new Response(JSON.stringify({ status: 'error', data: [], errors: [{ code, message: 'Nope.' }] }), { status, headers: { 'content-type': 'application/json', date: new Date().toUTCString(), ...headers } });
    const failing = await check(args(), key, { fetch: answer(500, 'internal_error') });
    expect(failing).toMatchObject({ code: CHECK_EXIT.server, err: '' });
    expect(failing.out).toMatch(/PROBLEM +signature: the server answered 500 \(internal_error\)/);
    expect(failing.out).toMatch(/PROBLEM +user list: the server answered 500 \(internal_error\)/);
    const throttled = await check(args(), key, { fetch: answer(429, 'too_many_requests', { 'retry-after': '3600' }) });
    expect(throttled).toMatchObject({ code: CHECK_EXIT.server, err: '' });
    expect(throttled.out).toMatch(/PROBLEM +signature: the server refuses requests for now \(429\)/);
  });

  it('a key without the users:read scope: the user list is refused 403, the signature works (exit 1)', async () => {
    const run = await cli(args(scoped.url, 'shop-scoped'), { MERCHANT_API_KEY: 'signing-only-key' });
    expect(run).toMatchObject({ code: CHECK_EXIT.credentials, err: '' });
    expect(run.out).toMatch(/ok +signature/);
    expect(run.out).toMatch(/PROBLEM +user list: the server answered 403 \(insufficient_scope\)/);
  });

  it('a redirected report is whole: every line on standard output, nothing on standard error (the built bin)', async () => {
    const wrong = await runInDirectory(process.execPath, [`${ROOT}dist/cli.js`, 'check', ...args()], ROOT, { MERCHANT_API_KEY: 'not-the-key' });
    expect(wrong).toMatchObject({ code: CHECK_EXIT.credentials, stderr: '' });
    expect(wrong.stdout.trim().split('\n')).toEqual([
      `Checking ${server.url} for merchant "${main.id}".`,
      expect.stringMatching(/^ {2}PROBLEM {2}user list: wrong API key or merchant id/),
      expect.stringMatching(/^ {2}skipped {2}signature: not checked with a key the server refused/),
    ]);
    const unreachable = await runInDirectory(process.execPath, [`${ROOT}dist/cli.js`, 'check', ...args(`http://127.0.0.1:${await freePort()}`)], ROOT, key);
    expect(unreachable).toMatchObject({ code: CHECK_EXIT.unreachable, stderr: '' });
    expect(unreachable.stdout).toMatch(/PROBLEM +unreachable/);
  });

  it('the built bin: `merchant-api check` with MERCHANT_API_KEY, and `help` lists it', async () => {
    const ok = await runProcess(process.execPath, ['dist/cli.js', 'check', ...args()], key);
    expect(ok.output).toMatch(/Everything works/);
    expect(ok.code).toBe(0);
    const noKey = await runProcess(process.execPath, ['dist/cli.js', 'check', ...args()], { MERCHANT_API_KEY: '' });
    expect(noKey.code).toBe(2);
    const help = await runProcess(process.execPath, ['dist/cli.js', 'help']);
    expect(help.output).toMatch(/^ {2}check --base-url URL --merchant-id ID /m);
  });
});

describe('merchant-api check against a server whose PUBLIC_URL is not the URL called', () => {
  const server = useCliServer('node', conformanceSeed(), { PUBLIC_URL: 'https://api.example.com' });

  it('the key opens the user list but the signature fails: the URL is the problem, not the key', async () => {
    const run = await cli(['--base-url', server.url, '--merchant-id', main.id], key);
    expect(run).toMatchObject({ code: CHECK_EXIT.url, err: '' });
    expect(run.out).toMatch(/ok +user list/);
    expect(run.out).toMatch(/PROBLEM +signature: the key is right \(the user list accepts it\), but the server computes the signature over another URL than http:\/\/127\.0\.0\.1:\d+\/validatesignature\. Behind a proxy, the server's PUBLIC_URL must be the URL you call/);
  });
});
