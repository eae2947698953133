/**
 * The Node adapter's own answers (docs/runtimes.md#malformed-requests-the-runtime-answers-itself), on
 * real servers over real sockets, plain and TLS: what Node's parser refuses, an `Expect` it does not
 * meet and two Host lines are answered through the pipeline, as JSON with the request's
 * X-Request-Id, nosniff and (over TLS) HSTS, each with one access line and one count in the metrics.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as connectTls } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, type Served } from '../../adapters/node.js';
import { createMerchantApi } from '../../src/api.js';
import { createMetrics } from '../../src/observe/metrics.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { contractSeed } from '../support/seeds.js';

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function parse(text: string): RawAnswer {
  const split = text.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = text.slice(0, split).split('\r\n');
  const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.slice(9, 12)), headers, body: text.slice(split + 4) };
}

async function exchange(url: string, bytes: string): Promise<RawAnswer> {
  const { port, protocol } = new URL(url);
  const socket = protocol === 'https:' ? connectTls({ port: Number(port), host: '127.0.0.1', rejectUnauthorized: false }) : connect(Number(port), '127.0.0.1');
  socket.on('error', () => undefined);
  socket.write(bytes);
  let text = '';
  for await (const chunk of socket) text += chunk;
  return parse(text);
}

function setup(tls?: { cert: string; key: string }) {
  const lines: Record<string, unknown>[] = [];
  const record = (level: string) => (fields: object) => lines.push({ level, ...fields });
  const metrics = createMetrics({ processMetrics: false });
  const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), logger: { debug: record('debug'), info: record('info'), warn: record('warn'), error: record('error') }, hooks: [metrics.hooks] });
  let server: Served;
  return {
    lines,
    url: () => server.url,
    start: async () => {
      server = await serve(api, { port: 0, tls });
    },
    stop: () => server.close(),
    /** The access line of `requestId` and the request counter of its status. */
    async counted(requestId: string, status: number) {
      const access = lines.filter((line) => line.event === 'request' && line.request_id === requestId);
      const text = await metrics.registry.metrics();
      const count = Number(new RegExp(`merchant_api_requests_total\\{[^}]*status="${status}"[^}]*\\} (\\d+)`).exec(text)?.[1] ?? 0);
      return { access, count };
    },
  };
}

function expectOwnAnswer(answer: RawAnswer, status: number, code: string, requestId: string) {
  expect(answer.status).toBe(status);
  expect(answer.headers['content-type']).toBe('application/json');
  expect(answer.headers['x-content-type-options']).toBe('nosniff');
  expect(answer.headers['x-request-id']).toBe(requestId);
  expect(JSON.parse(answer.body)).toMatchObject({ status: 'error', data: [], errors: [{ code }] });
}

describe('the Node adapter answers its own refusals through the pipeline', () => {
  const plain = setup();
  beforeAll(() => plain.start());
  afterAll(() => plain.stop());
  const host = () => new URL(plain.url()).host;

  const cases: [string, (id: string) => string, number, string][] = [
    ['a control character in a header (400)', (id) => `GET /healthz HTTP/1.1\r\nHost: ${host()}\r\nX-Request-Id: ${id}\r\nX-Ctl: a\x01b\r\n\r\n`, 400, 'malformed_request'],
    ['headers too large (431)', (id) => `GET /healthz HTTP/1.1\r\nHost: ${host()}\r\nX-Request-Id: ${id}\r\nX-Big: ${'a'.repeat(70_000)}\r\n\r\n`, 431, 'headers_too_large'],
    ['Expect: bogus (417)', (id) => `GET /healthz HTTP/1.1\r\nHost: ${host()}\r\nX-Request-Id: ${id}\r\nExpect: bogus\r\nConnection: close\r\n\r\n`, 417, 'expectation_failed'],
    ['two Host lines (400)', (id) => `GET /healthz HTTP/1.1\r\nHost: ${host()}\r\nHost: other.example\r\nX-Request-Id: ${id}\r\nConnection: close\r\n\r\n`, 400, 'malformed_request'],
    ['a Host with a slash in it (400)', (id) => `GET /healthz HTTP/1.1\r\nHost: x/merchant\r\nX-Request-Id: ${id}\r\nConnection: close\r\n\r\n`, 400, 'malformed_request'],
  ];
  for (const [name, request, status, code] of cases) {
    it(`${name}: JSON with the request id sent and nosniff, one access line, one count`, async () => {
      const id = `own-answer-${Math.random().toString(36).slice(2)}`;
      const before = (await plain.counted(id, status)).count;
      const answer = await exchange(plain.url(), request(id));
      expectOwnAnswer(answer, status, code, id);
      const { access, count } = await plain.counted(id, status);
      expect(access).toHaveLength(1);
      expect(access[0]).toMatchObject({ status, code, route: null });
      expect(count).toBe(before + 1);
    });
  }
});

describe('over TLS', () => {
  let dir: string;
  let tls: ReturnType<typeof setup>;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'merchant-api-own-answers-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'pipe' });
    tls = setup({ cert: readFileSync(join(dir, 'cert.pem'), 'utf8'), key: readFileSync(join(dir, 'key.pem'), 'utf8') });
    await tls.start();
  });
  afterAll(async () => {
    await tls?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the parser's 431 and an unmet Expect carry HSTS", async () => {
    const host = new URL(tls.url()).host;
    const big = await exchange(tls.url(), `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nX-Request-Id: tls-431\r\nX-Big: ${'a'.repeat(70_000)}\r\n\r\n`);
    // Node hands over only the last TLS record of what overflowed: the id sent is not in it, so the answer has its own.
    const id = big.headers['x-request-id']!;
    expectOwnAnswer(big, 431, 'headers_too_large', id);
    expect(big.headers['strict-transport-security']).toBe('max-age=31536000');
    expect((await tls.counted(id, 431)).access).toHaveLength(1);
    const expect417 = await exchange(tls.url(), `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nX-Request-Id: tls-417\r\nExpect: bogus\r\nConnection: close\r\n\r\n`);
    expectOwnAnswer(expect417, 417, 'expectation_failed', 'tls-417');
    expect(expect417.headers['strict-transport-security']).toBe('max-age=31536000');
    expect((await tls.counted('tls-417', 417)).access).toHaveLength(1);
  });
});
