/**
 * The built `dist/client.js` runs for real under Node, Bun and Deno (with
 * the permissions of `npm run start:deno`): a script imports it and, against
 * a running server, validates its signature, reads a user whose id needs
 * percent-encoding, pages, exports, makes webhook endpoints with idempotency keys
 * (the same key twice: one endpoint), and meets a 404, a wrong key, a refused
 * port and a server that never answers. Each runtime must print the same.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectedUsers } from '../suites/client-suite.js';
import { CLEAN_ENV, ROOT, RUNTIMES, runProcess, runtimeCommand, useCliServer } from '../support/processes.js';
import { conformanceSeed, MERCHANTS } from '../support/seeds.js';
import { freePort } from '../support/ports.js';

const SCRIPT = `
const { createMerchantClient, MerchantResponseError, MerchantNetworkError, MerchantTimeoutError } = await import(${JSON.stringify(pathToFileURL(`${ROOT}dist/client.js`).href)});
const env = globalThis.process?.env ?? globalThis.Deno.env.toObject();
const options = { baseUrl: env.BASE_URL, merchantId: env.MERCHANT_ID, apiKey: env.API_KEY };
const client = createMerchantClient(options);
const out = { runtime: 'Bun' in globalThis ? 'bun' : 'Deno' in globalThis ? 'deno' : 'node' };
out.signature = await client.validateSignature();
out.user = (await client.user('q?&=#%+')).shared_user_id;
let pages = 0, paged = [];
for await (const page of client.userPages({ pageSize: 500, active: true })) { pages++; paged.push(...page.users.map((u) => u.shared_user_id)); }
out.pages = pages;
out.paged = paged.length;
let exported = [];
for await (const user of client.exportUsers({ active: true })) exported.push(user.shared_user_id);
out.exportedSameAsPaged = JSON.stringify(exported) === JSON.stringify(paged);
out.firstExported = exported.slice(0, 3);
const fail = async (promise) => { try { await promise; return 'no error'; } catch (e) { return { class: e.constructor.name, api: e instanceof MerchantResponseError, network: e instanceof MerchantNetworkError, timeout: e instanceof MerchantTimeoutError, status: e.status, code: e.code, kind: e.kind, hasRequestId: typeof e.requestId === 'string' && e.requestId.length > 0 }; } };
out.notFound = await fail(client.user('nobody'));
// client.webhooks.deliveries and redeliver: a query and a JSON body sent, the merchant's 404 read back.
out.deliveries = await fail(client.webhooks.deliveries('we_none', { limit: 5, state: 'failed' }));
out.redeliver = await fail(client.webhooks.redeliver('we_none', { since: new Date(Date.now() - 60000) }));
out.badState = await client.webhooks.deliveries('we_none', { state: 'lost' }).catch((e) => e.code);
out.deliveriesMessage = await client.webhooks.deliveries('we_none').catch((e) => e.message);
// POSTs with an Idempotency-Key (docs/protocol.md#safe-retries): the caller's key twice answers one endpoint, secret
// included; the default key is a new UUID per call (two calls, two endpoints); another body with the key is 422.
const key = 'runtime-' + out.runtime + '-' + Date.now();
const hookUrl = 'http://127.0.0.1:9/' + key;
const first = await client.webhooks.create(hookUrl, { idempotencyKey: key });
const again = await client.webhooks.create(hookUrl, { idempotencyKey: key });
out.sameEndpoint = first.id === again.id && first.secret === again.secret && first.secret.startsWith('whsec_');
const fresh = await client.webhooks.create(hookUrl);
out.newKeyNewEndpoint = fresh.id !== first.id;
out.mismatch = await fail(client.webhooks.create(hookUrl + '-other', { idempotencyKey: key }));
out.endpointsMade = (await client.webhooks.list()).filter((e) => e.url === hookUrl).length;
for (const e of [first, fresh]) await client.webhooks.remove(e.id);
// client.keys: a key made, listed, changed, rotated (the new one used) and revoked; a JSON body, PATCH and DELETE sent.
const made = await client.keys.create({ scopes: ['users:read'], name: 'runtime ' + out.runtime, allowFrom: ['127.0.0.1/32'], expiresIn: '1d' });
const listed = await client.keys();
const updated = await client.keys.update(made.key_id, { name: null, allowFrom: [] });
const rotated = await client.keys.rotate(made.key_id, { expireOldIn: '1h' });
const rotatedIn = (await createMerchantClient({ ...options, apiKey: rotated.secret }).user('q?&=#%+')).shared_user_id;
await client.keys.revoke(rotated.key_id);
await client.keys.revoke(made.key_id);
out.keys = {
  secretLength: made.secret.length, scopes: made.scopes, allowFrom: made.allow_from,
  listed: listed.some((k) => k.key_id === made.key_id) && (await client.keys.list()).every((k) => !('secret' in k)),
  updated: [updated.name, updated.allow_from], rotatedFrom: rotated.old_key_id === made.key_id, rotatedName: rotated.name, rotatedIn,
  gone: await fail(client.keys.revoke(made.key_id)),
};
out.wrongKey = await fail(createMerchantClient({ ...options, apiKey: 'wrong' }).validateSignature());
out.refused = await fail(createMerchantClient({ ...options, baseUrl: env.CLOSED_URL, retries: { maxRetries: 1, baseDelayMs: 1 } }).validateSignature());
out.silent = await fail(createMerchantClient({ ...options, baseUrl: env.SILENT_URL, timeoutMs: 300 }).user('x'));
console.log(JSON.stringify(out));
`;

describe('dist/client.js under every runtime, against a running server', () => {
  // A receiver URL on 127.0.0.1 over http for the POSTs the script makes.
  const server = useCliServer('node', conformanceSeed(), { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_HTTP: 'true' });
  let dir: string;
  let silent: Server;
  const sockets = new Set<Socket>();
  let silentUrl: string;
  let closedUrl: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'merchant-api-client-runtime-'));
    writeFileSync(join(dir, 'check.mjs'), SCRIPT);
    silent = createServer((socket) => {
      sockets.add(socket);
      // A client that gives up (or exits) resets the connection: expected here.
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentUrl = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    closedUrl = `http://127.0.0.1:${await freePort()}`;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent?.close(resolve));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const runtime of RUNTIMES) {
    it(`on ${runtime}`, async () => {
      const [command, args] = runtimeCommand(runtime, join(dir, 'check.mjs'));
      const { code, output } = await runProcess(command, args, {
        ...CLEAN_ENV,
        BASE_URL: server.url,
        MERCHANT_ID: MERCHANTS.main.id,
        API_KEY: MERCHANTS.main.keys[0],
        SILENT_URL: silentUrl,
        CLOSED_URL: closedUrl,
      });
      expect(code, output).toBe(0);
      const active = expectedUsers(MERCHANTS.main.id, { active: true });
      const apiError = { class: 'MerchantResponseError', api: true, network: false, timeout: false, hasRequestId: true };
      expect(JSON.parse(output.trim().split('\n').at(-1)!)).toEqual({
        runtime,
        signature: { status: 'ok', is_valid: true },
        user: 'q?&=#%+',
        pages: Math.ceil(active.length / 500),
        paged: active.length,
        exportedSameAsPaged: true,
        firstExported: active.slice(0, 3).map((u) => u.shared_user_id),
        notFound: { ...apiError, status: 404, code: 'not_found' },
        deliveries: { ...apiError, status: 404, code: 'not_found' },
        redeliver: { ...apiError, status: 404, code: 'not_found' },
        // The route's own answers, not the router's 404: the query reached it.
        badState: 'invalid_parameter',
        deliveriesMessage: expect.stringContaining('This merchant has no webhook endpoint with this id.'),
        sameEndpoint: true,
        newKeyNewEndpoint: true,
        mismatch: { ...apiError, status: 422, code: 'idempotency_mismatch' },
        endpointsMade: 2,
        keys: { secretLength: 43, scopes: ['users:read'], allowFrom: ['127.0.0.1/32'], listed: true, updated: [null, []], rotatedFrom: true, rotatedName: null, rotatedIn: 'q?&=#%+', gone: { ...apiError, status: 404, code: 'not_found' } },
        wrongKey: { ...apiError, status: 400, code: 'signature_mismatch' },
        refused: { class: 'MerchantNetworkError', api: false, network: true, timeout: false, kind: 'refused', hasRequestId: false },
        silent: { class: 'MerchantTimeoutError', api: false, network: false, timeout: true, kind: 'request', hasRequestId: false },
      });
    });
  }
});
