/**
 * HTTPS on every runtime: the standalone server with TLS_CERT_FILE and
 * TLS_KEY_FILE set, a self-signed certificate made for the test. The
 * signature's base_url is then the https URL (docs/protocol.md#signing).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic } from '../support/basic-auth.js';
import { send } from '../support/http-client.js';
import { CLI, RUNTIMES, startServer, type ServerProcess } from '../support/processes.js';
import { conformanceSeed, GENERATED_USERS, MERCHANTS, SPECIAL_IDS, writeSeed } from '../support/seeds.js';
import { signedUrl } from '../support/test-signer.js';

let dir: string;
let cert: string;
let seed: { path: string; remove(): void };

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'merchant-api-tls-'));
  // A P-256 certificate for 127.0.0.1 and localhost, valid for a day.
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
  ], { stdio: 'pipe' });
  cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
  seed = writeSeed(conformanceSeed());
});
afterAll(() => {
  seed.remove();
  rmSync(dir, { recursive: true, force: true });
});

for (const runtime of RUNTIMES) {
  describe(`HTTPS on ${runtime}`, () => {
    let server: ServerProcess;
    const { main } = MERCHANTS;
    beforeAll(async () => {
      server = await startServer(runtime, CLI[runtime], { SEED_FILE: seed.path, TLS_CERT_FILE: join(dir, 'cert.pem'), TLS_KEY_FILE: join(dir, 'key.pem') }, ['serve']);
    });
    afterAll(async () => {
      expect(await server.stop()).toBe(0);
    });

    it('prints an https URL and answers over TLS only', async () => {
      expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      const health = await send(`${server.url}/healthz`, { ca: cert });
      expect([health.status, health.headers['content-type']]).toEqual([200, 'application/json']);
      await expect(send(`${server.url.replace('https:', 'http:')}/healthz`)).rejects.toThrow();
    });

    it('validates a signature over the https base_url, and rejects one over http', async () => {
      const url = `${server.url}/validatesignature`;
      const ok = await send(signedUrl({ secret: main.keys[0], url, cp: main.id }), { ca: cert });
      expect([ok.status, ok.body]).toEqual([200, '{"status":"ok","is_valid":true}']);
      const overHttp = signedUrl({ secret: main.keys[0], url: url.replace('https:', 'http:'), cp: main.id }).replace('http:', 'https:');
      expect((await send(overHttp, { ca: cert })).body).toBe('{"status":"error","message":"Signature does not match.","is_valid":false}');
    });

    it('streams the full list and links pages with https URLs', async () => {
      const headers = basic(main.id, main.keys[0]);
      const all = JSON.parse((await send(`${server.url}/merchant/users`, { ca: cert, headers })).body);
      expect(all.data).toHaveLength(GENERATED_USERS + SPECIAL_IDS.length);
      const page = await send(`${server.url}/merchant/users?limit=10`, { ca: cert, headers });
      expect(page.headers.link).toMatch(new RegExp(`^<${server.url}/merchant/users\\?limit=10&cursor=[^>]+>; rel="next"$`));
    });
  });
}
