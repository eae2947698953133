/**
 * `createRequestListener` on `node:http2`'s compatibility API, given to
 * `http2.createServer` (h2c) and `http2.createSecureServer` (TLS, h2) as it is,
 * without a cast (this file type-checks with `npm run typecheck`): a signed
 * request and a Basic-auth listing answer over HTTP/2.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createSecureServer, createServer, type Http2Server, type Http2SecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRequestListener } from '../../adapters/node.js';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { signUrl } from '../../src/signing/index.js';
import { createMemoryStorage } from '../../src/storage/memory/index.js';

const seed = { merchants: [{ id: 'm-1', status: 'active' as const, keys: ['secret-1'] }], users: [] };
let dir = '';
let cert = '';
let key = '';

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'merchant-api-h2-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
  cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
  key = readFileSync(join(dir, 'key.pem'), 'utf8');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** One HTTP/2 GET; status and body. */
function get(origin: string, path: string, headers: Record<string, string> = {}): Promise<[number, string]> {
  return new Promise((resolve, reject) => {
    const session = connect(origin, { ca: cert });
    session.once('error', reject);
    const stream = session.request({ ':path': path, ...headers });
    let status = 0;
    let body = '';
    stream.on('response', (head) => (status = Number(head[':status'])));
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => (body += chunk));
    stream.once('end', () => {
      session.close();
      resolve([status, body]);
    });
    stream.once('error', reject);
  });
}

describe('createRequestListener on node:http2', () => {
  for (const [name, make, scheme] of [
    ['h2c (http2.createServer)', () => createServer(createRequestListener(api())), 'http'],
    ['TLS h2 (http2.createSecureServer)', () => createSecureServer({ cert, key }, createRequestListener(api())), 'https'],
  ] as const) {
    it(`${name}: answers a signed request and a Basic-auth listing`, async () => {
      const server: Http2Server | Http2SecureServer = make();
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const origin = `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
      try {
        // Signed a second ahead: the storage refuses a ts of the second it started in.
        const signed = new URL(signUrl('secret-1', `${origin}/validatesignature`, { cp: 'm-1' }, { now: () => Date.now() + 1000 }));
        expect(await get(origin, `${signed.pathname}${signed.search}`)).toEqual([200, '{"status":"ok","is_valid":true}']);
        const [status, body] = await get(origin, '/merchant/users?limit=1', { authorization: `Basic ${Buffer.from('m-1:secret-1').toString('base64')}` });
        expect(status).toBe(200);
        expect(JSON.parse(body)).toMatchObject({ data: [] });
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });
  }
});

function api() {
  return createMerchantApi({ storage: createMemoryStorage({ seed }), logger: silentLogger });
}
