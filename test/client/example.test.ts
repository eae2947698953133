/**
 * The client as a merchant meets it, against the demo server of `npm start`
 * (`merchant-api serve` on the bundled examples/seed.json):
 * examples/client.ts runs and prints what docs/client.md says it does. The example of the
 * client's issue, in a project that installed the packed tarball, is type-checked, built and run
 * by test/package/package-install.test.ts (one pack and install for both).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runProcess, startProcess, type Started } from '../support/processes.js';

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
