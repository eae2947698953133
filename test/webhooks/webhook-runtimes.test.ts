/**
 * Webhooks on Node, Bun and Deno (docs/webhooks.md#runtimes): the dispatcher's `node:http(s)` with a
 * pinned `lookup` on each runtime (test/fixtures/webhook-pin.ts: the connection goes to the checked
 * address, the name stays in Host and TLS, a certificate for another name fails; the guard refuses
 * private addresses at a URL's check and at a delivery; Deno without `--allow-sys` fails an https
 * attempt instead of ending the process), and the built `serve` of each runtime
 * delivering to a receiver here: on the memory storage, and on Deno and Bun on MySQL, every delivery
 * verified by the `standardwebhooks` package.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { importSeed } from '../../src/storage/mysql/index.js';
import { basic } from '../support/api.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { CLI, CLEAN_ENV, ROOT, RUNTIMES, runProcess, startServer, type Runtime, type ServerProcess } from '../support/processes.js';
import { writeSeed } from '../support/seeds.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

const dir = mkdtempSync(join(tmpdir(), 'merchant-api-webhook-runtimes-'));
beforeAll(() => {
  // A P-256 certificate for hooks.test, valid for a day, trusted by the fixture's runtime through NODE_EXTRA_CA_CERTS.
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=hooks.test', '-addext', 'subjectAltName=DNS:hooks.test',
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
  ], { stdio: 'pipe' });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The fixture (TypeScript importing src/) under `runtime`: tsx on Node, natively on Bun, with sloppy imports (`.js` → `.ts`) on Deno. */
function fixtureCommand(runtime: Runtime, script: string, denoSys = true): [string, string[]] {
  switch (runtime) {
    case 'node':
      return [process.execPath, ['--import', 'tsx', script]];
    case 'bun':
      return [`${ROOT}node_modules/.bin/bun`, [script]];
    case 'deno':
      // --allow-sys: Deno's node:tls reads its root certificates under it (docs/webhooks.md#runtimes).
      return [`${ROOT}node_modules/.bin/deno`, ['run', '--allow-net', '--allow-read', '--allow-env', ...(denoSys ? ['--allow-sys'] : []), '--unstable-sloppy-imports', script]];
  }
}

describe('the attempt pins the checked address on every runtime', () => {
  for (const runtime of RUNTIMES) {
    it(runtime, async () => {
      const [command, args] = fixtureCommand(runtime, 'test/fixtures/webhook-pin.ts');
      const { code, output } = await runProcess(command, args, { NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1', CERT_FILE: join(dir, 'cert.pem'), KEY_FILE: join(dir, 'key.pem'), NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem') });
      expect(code, output).toBe(0);
      const result = JSON.parse(output.trim().split('\n').at(-1)!);
      expect(result.overHttp).toBe(204);
      expect(result.overHttps).toBe(204);
      // The certificate is checked against the URL's name, not the address connected to.
      expect(result.wrongName).toBe('tls');
      expect(result.hosts).toHaveLength(2);
      expect(result.hosts.every((host: string) => host.startsWith('hooks.test:'))).toBe(true);
      expect(Object.values(result.refused)).toEqual(Array(6).fill('WebhookAddressError'));
      expect(result.dispatched).toEqual([['failed', 'address_refused']]);
    }, 60_000);
  }
});

describe('Deno without --allow-sys', () => {
  it('fails an https attempt (retried later) instead of ending the process; http goes on', async () => {
    const [command, args] = fixtureCommand('deno', 'test/fixtures/webhook-pin.ts', false);
    const { code, output } = await runProcess(command, args, { NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1', CERT_FILE: join(dir, 'cert.pem'), KEY_FILE: join(dir, 'key.pem'), NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem') });
    expect(code, output).toBe(0);
    const result = JSON.parse(output.trim().split('\n').at(-1)!);
    expect(result).toMatchObject({ overHttp: 204, overHttps: 'tls_roots_not_permitted', wrongName: 'tls_roots_not_permitted', dispatched: [['failed', 'address_refused']] });
  }, 60_000);
});

const MERCHANT = { id: 'rt', key: 'key-runtime-webhooks' };
const AUTH = basic(MERCHANT.id, MERCHANT.key);
const LIFTED = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_RETRY_SCHEDULE: '100ms,100ms' };

/** Adds an endpoint at `receiver` through the server's API, then queues its test event; its event id. */
async function addAndTest(server: ServerProcess, receiver: WebhookReceiver): Promise<{ endpointId: string; eventId: string }> {
  const added = await fetch(`${server.url}/merchant/webhooks`, { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: JSON.stringify({ url: receiver.url }) });
  const addedText = await added.text();
  expect(added.status, addedText).toBe(201);
  const endpoint = JSON.parse(addedText).data[0];
  receiver.secrets.push(endpoint.secret);
  const tested = await fetch(`${server.url}/merchant/webhooks/${endpoint.id}/test`, { method: 'POST', headers: AUTH });
  expect(tested.status).toBe(202);
  return { endpointId: endpoint.id, eventId: (await tested.json()).data[0].event_id };
}

describe('serve delivers on every runtime', () => {
  const receivers: WebhookReceiver[] = [];
  const servers: ServerProcess[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });

  for (const runtime of RUNTIMES) {
    it(`${runtime}, memory storage: the test event, retried after a 500 with the same webhook-id, verified`, async () => {
      const seed = writeSeed({ merchants: [{ id: MERCHANT.id, status: 'active', keys: [MERCHANT.key] }], users: [] });
      try {
        const receiver = await startWebhookReceiver();
        receivers.push(receiver);
        receiver.answer = (n, res) => void res.writeHead(n === 0 ? 500 : 204).end();
        const server = await startServer(runtime, CLI[runtime], { SEED_FILE: seed.path, ...LIFTED }, ['serve']);
        servers.push(server);
        const { eventId } = await addAndTest(server, receiver);
        await vi.waitFor(() => expect(receiver.received).toHaveLength(2), { timeout: 15_000 });
        expect(receiver.unverified).toEqual([]);
        expect(receiver.received.map((r) => r.headers['webhook-id'])).toEqual([eventId, eventId]);
        expect(receiver.received[1]!.event.type).toBe('webhook.test');
        await server.waitFor(/"event":"webhook_attempt".*"outcome":"delivered"/);
        expect(server.output()).toContain('WEBHOOK_ALLOW_PRIVATE and WEBHOOK_ALLOW_HTTP set');
        expect(server.output()).not.toContain('whsec_');
        // /healthz shows the memory queue's dispatcher, `dropped` included.
        const health = await (await fetch(`${server.url}/healthz`)).json();
        expect(health.details.webhooks).toMatchObject({ ok: true, running: true, in_flight: 0, dropped: 0 });
      } finally {
        seed.remove();
      }
    }, 60_000);
  }
});

describe('serve on Deno without --allow-sys', () => {
  const servers: ServerProcess[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop()));
  });

  it('fails an https endpoint\'s attempts and warns once, and goes on serving', async () => {
    const seed = writeSeed({ merchants: [{ id: MERCHANT.id, status: 'active', keys: [MERCHANT.key] }], users: [] });
    try {
      // The permissions of `npm run start:deno`: no --allow-sys.
      const server = await startServer('deno', CLI.deno, { SEED_FILE: seed.path, ...LIFTED }, ['serve']);
      servers.push(server);
      const added = await fetch(`${server.url}/merchant/webhooks`, { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: JSON.stringify({ url: 'https://localhost:9/hook' }) });
      expect(added.status).toBe(201);
      const { id } = (await added.json()).data[0];
      for (let i = 0; i < 2; i++) expect((await fetch(`${server.url}/merchant/webhooks/${id}/test`, { method: 'POST', headers: AUTH })).status).toBe(202);
      await server.waitFor(/"error":"tls_roots_not_permitted"[^\n]*\n[^]*"error":"tls_roots_not_permitted"/);
      expect(server.output().match(/webhooks to https endpoints need --allow-sys/g)).toHaveLength(1);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      expect(server.child.exitCode).toBeNull();
    } finally {
      seed.remove();
    }
  }, 60_000);
});

const available = await mysqlAvailable();

describe.skipIf(!available)('serve delivers on MySQL on Bun and Deno', () => {
  let database: TestDatabase;
  const receivers: WebhookReceiver[] = [];
  const servers: ServerProcess[] = [];
  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, { merchants: [{ id: MERCHANT.id, status: 'active', keys: [MERCHANT.key] }], users: [] });
  });
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  afterAll(async () => {
    await database?.drop();
  });

  for (const runtime of ['bun', 'deno'] as const) {
    it(runtime, async () => {
      const receiver = await startWebhookReceiver();
      receivers.push(receiver);
      const server = await startServer(runtime, CLI[runtime], { ...CLEAN_ENV, DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText, ...LIFTED }, ['serve']);
      servers.push(server);
      const { eventId } = await addAndTest(server, receiver);
      await vi.waitFor(() => expect(receiver.received).toHaveLength(1), { timeout: 15_000 });
      expect(receiver.unverified).toEqual([]);
      expect(receiver.received[0]!.headers['webhook-id']).toBe(eventId);
      // The dispatcher's part of /healthz is there on this runtime too.
      const health = await (await fetch(`${server.url}/healthz?details=1`)).text();
      expect(health).toContain('"webhooks"');
    }, 60_000);
  }
});
