/** The examples and the standalone server, run as real Node processes. */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signUrl } from '../src/signing.js';
import { ROOT, runProcess, startProcess, type Started } from './support/spawn.js';

describe('the standalone server (npm start) on the demo seed', () => {
  let server: Started;
  beforeAll(async () => {
    server = await startProcess('node', ['dist/cli.js', 'serve'], { PORT: '0', SEED_FILE: '' }, /listening on (http:\/\/\S+)/);
  });
  afterAll(async () => {
    expect(await server.stop()).toBe(0);
  });

  it('prints that the data is in memory, and the demo merchant', () => {
    expect(server.output()).toMatch(/storage: in memory, loaded from the bundled examples\/seed\.json: 3 merchants, 12 users/);
    expect(server.output()).toContain('Demo merchant: id "demo-merchant", API key "demo-secret"');
  });

  it('accepts the signed curl URL it prints', async () => {
    const printed = /Try: curl '([^']+)'/.exec(server.output())![1]!;
    const response = await fetch(printed);
    expect(await response.json()).toEqual({ status: 'ok', is_valid: true });
  });

  it('accepts the README\'s curl and openssl example', async () => {
    const readme = readFileSync(`${ROOT}README.md`, 'utf8');
    const block = /```sh\n(KEY=demo-secret[\s\S]+?)```/.exec(readme)![1]!;
    const port = new URL(server.url).port;
    const { code, output } = await runProcess('bash', ['-c', block.replaceAll('127.0.0.1:8787', `127.0.0.1:${port}`)]);
    expect(output.trim().split('\n').at(-1)).toBe('{"status":"ok","is_valid":true}');
    expect(code).toBe(0);
  });

  it('runs examples/sign-and-call.ts against it', async () => {
    const { code, output } = await runProcess('node', ['--import', 'tsx', 'examples/sign-and-call.ts'], { BASE_URL: server.url });
    expect(output).toContain('validatesignature: 200 {"status":"ok","is_valid":true}');
    expect(output).toContain('first page: 200, 3 users, next_cursor present');
    expect(code).toBe(0);
  });
});

describe('the standalone server configuration', () => {
  it('refuses a bad configuration with one line naming every problem, exit code 2', async () => {
    const { code, output } = await runProcess('node', ['dist/cli.js', 'serve'], { PORT: 'eighty', TRUST_PROXY: 'maybe', TLS_CERT_FILE: 'x.pem' });
    expect(code).toBe(2);
    expect(output.trim()).toBe(
      'Invalid configuration: TRUST_PROXY must be true or false (got "maybe"); TLS_CERT_FILE and TLS_KEY_FILE must be set together; PORT must be a whole number from 0 to 65535 (got "eighty").',
    );
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

  it('serves the host application\'s own routes beside the API', async () => {
    expect(await (await fetch(`${server.url}/`)).text()).toBe('Hello from the host application\n');
    expect(await (await fetch(`${server.url}/merchant-api/healthz`)).json()).toEqual({ status: 'ok' });
  });

  it('verifies signatures over the mounted path', async () => {
    const response = await fetch(signUrl('demo-secret', `${server.url}/merchant-api/validatesignature`, { cp: 'demo-merchant' }));
    expect(await response.json()).toEqual({ status: 'ok', is_valid: true });
  });

  it('answers the API\'s JSON 404 inside the mount', async () => {
    const response = await fetch(`${server.url}/merchant-api/nope`);
    expect(response.status).toBe(404);
    expect((await response.json()).errors[0].code).toBe('not_found');
  });
});
