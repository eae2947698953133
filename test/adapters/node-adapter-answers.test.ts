/**
 * The Node adapter's own answers (docs/runtimes.md#malformed-requests-the-runtime-answers-itself), on
 * real servers over real sockets, plain and TLS: what Node's parser refuses, an `Expect` it does not
 * meet and two Host lines are answered through the pipeline, as JSON with the request's
 * X-Request-Id, nosniff and (over TLS) HSTS, each with one access line and one count in the metrics.
 * Over TLS a connection over the per-address cap is closed before its handshake, and still logged
 * and counted.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as connectTls, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { serve, type Served } from '../../adapters/node.js';
import type { ConnectionLimits } from '../../adapters/serve-options.js';
import { createMerchantApi } from '../../src/api.js';
import { MerchantApiError } from '../../src/errors.js';
import { createMetrics } from '../../src/observe/metrics.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { onEachNodePath } from '../support/node-paths.js';
import { contractSeed } from '../support/seeds.js';
import { recordingLogger } from '../support/recording.js';

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

/** A TLS connection that has finished its handshake. */
function secureConnection(url: string): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connectTls({ port: Number(new URL(url).port), host: '127.0.0.1', rejectUnauthorized: false });
    socket.once('secureConnect', () => resolve(socket));
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('closed before the handshake')));
  });
}

/** Reads from `socket` until `text` holds one whole answer of known length; resolves with it. */
function nextAnswer(socket: TLSSocket): Promise<RawAnswer> {
  return new Promise((resolve) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(text)?.[1] ?? Number.NaN);
      if (split !== -1 && text.length >= split + 4 + length) {
        socket.off('data', onData);
        resolve(parse(text));
      }
    };
    socket.on('data', onData);
  });
}

function setup(tls?: { cert: string; key: string }, limits?: ConnectionLimits) {
  const { logger, lines } = recordingLogger();
  const metrics = createMetrics({ processMetrics: false });
  const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), logger, hooks: [metrics.hooks] });
  let server: Served;
  return {
    lines,
    url: () => server.url,
    start: async () => {
      server = await serve(api, { port: 0, tls, limits });
    },
    stop: () => server.close(),
    /** The access line of `requestId` and the request counter of its status. */
    async counted(requestId: string, status: number) {
      const access = lines.filter((line) => line.event === 'request' && line.request_id === requestId);
      const text = await metrics.registry.metrics();
      const count = Number(new RegExp(`merchant_api_requests_total\\{[^}]*status="${status}"[^}]*\\} (\\d+)`).exec(text)?.[1] ?? 0);
      return { access, count };
    },
    /** The count of refusals for `reason` (merchant_api_throttled_total). */
    async throttled(reason: string) {
      const text = await metrics.registry.metrics();
      return Number(new RegExp(`merchant_api_throttled_total\\{reason="${reason}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
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

onEachNodePath(() => {
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

  describe('a refusal of a connection cap in the pipeline', () => {
    it('is never held back as a client that ignored Retry-After would be: its connection is closed after it', async () => {
      const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), accessLog: false });
      const info = {
        refusal: new MerchantApiError('too_many_requests', 'Too many connections from this address at once (at most 1); close one or retry later.', { retryAfter: 1 }),
        clientAddress: '192.0.2.1',
        clientPort: 40_000,
        connectionLimit: 'connections_per_address',
      };
      // The same address and port refused twice at once: a late refusal would wait for a timer, which never fires here.
      vi.useFakeTimers();
      try {
        for (const attempt of [1, 2]) {
          let status = 0;
          void api.fetch(new Request('http://localhost/'), info).then((response) => (status = response.status));
          await vi.advanceTimersByTimeAsync(0);
          expect([attempt, status]).toEqual([attempt, 429]);
        }
      } finally {
        vi.useRealTimers();
      }
    });
  });

  describe('over TLS', () => {
    let dir: string;
    let tls: ReturnType<typeof setup>;
    // A second server: a short header timeout for the 408, and one connection per address for the cap.
    let strict: ReturnType<typeof setup>;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'merchant-api-own-answers-'));
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'pipe' });
      const pem = { cert: readFileSync(join(dir, 'cert.pem'), 'utf8'), key: readFileSync(join(dir, 'key.pem'), 'utf8') };
      tls = setup(pem);
      strict = setup(pem, { headersTimeout: 500, maxConnectionsPerAddress: 1 });
      await Promise.all([tls.start(), strict.start()]);
    });
    afterAll(async () => {
      await Promise.all([tls?.stop(), strict?.stop()]);
      rmSync(dir, { recursive: true, force: true });
    });

    it("the parser's 431 keeps the client's request id, and it and an unmet Expect carry HSTS", async () => {
      const host = new URL(tls.url()).host;
      // Node hands the adapter only the last TLS record of an oversized head; the adapter kept the ones before it, where the id is.
      const big = await exchange(tls.url(), `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nX-Request-Id: tls-431\r\nX-Big: ${'a'.repeat(70_000)}\r\n\r\n`);
      expectOwnAnswer(big, 431, 'headers_too_large', 'tls-431');
      expect(big.headers['strict-transport-security']).toBe('max-age=31536000');
      expect((await tls.counted('tls-431', 431)).access).toHaveLength(1);
      const expect417 = await exchange(tls.url(), `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nX-Request-Id: tls-417\r\nExpect: bogus\r\nConnection: close\r\n\r\n`);
      expectOwnAnswer(expect417, 417, 'expectation_failed', 'tls-417');
      expect(expect417.headers['strict-transport-security']).toBe('max-age=31536000');
      expect((await tls.counted('tls-417', 417)).access).toHaveLength(1);
    });

    it('the 431 of a second request on a kept-alive connection has that request\'s id, not the first one\'s', async () => {
      const host = new URL(tls.url()).host;
      const socket = await secureConnection(tls.url());
      try {
        const first = nextAnswer(socket);
        socket.write(`GET /healthz HTTP/1.1\r\nHost: ${host}\r\nX-Request-Id: tls-first\r\n\r\n`);
        expect((await first).headers['x-request-id']).toBe('tls-first');
        const second = nextAnswer(socket);
        socket.write(`GET /healthz HTTP/1.1\r\nHost: ${host}\r\nX-Request-Id: tls-second-431\r\nX-Big: ${'b'.repeat(40_000)}\r\n\r\n`);
        expectOwnAnswer(await second, 431, 'headers_too_large', 'tls-second-431');
      } finally {
        socket.destroy();
      }
    });

    it("a head too slow to arrive gets the 408 with the client's request id, logged and counted", async () => {
      const before = (await strict.counted('tls-408', 408)).count;
      const host = new URL(strict.url()).host;
      // The head never ends; the server cuts it after its 500 ms header timeout (checked every 125 ms).
      const answer = await exchange(strict.url(), `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nX-Request-Id: tls-408\r\nX-Slow: a`);
      expectOwnAnswer(answer, 408, 'request_timeout', 'tls-408');
      const { access, count } = await strict.counted('tls-408', 408);
      expect(access).toEqual([expect.objectContaining({ status: 408, code: 'request_timeout', route: null })]);
      expect(count).toBe(before + 1);
    });

    it('a connection over the per-address cap is closed before its handshake, and still has its access line (429, nothing sent) and its counts', async () => {
      // The connection of the test before may still be closing on the server's side: the one connection allowed is taken once it has.
      const held = await vi.waitFor(() => secureConnection(strict.url()), { timeout: 10_000, interval: 50 });
      try {
        const before = { requests: (await strict.counted('', 429)).count, throttled: await strict.throttled('connections_per_address') };
        const linesBefore = strict.lines.length;
        const refused = await new Promise<string>((resolve) => {
          const socket = connectTls({ port: Number(new URL(strict.url()).port), host: '127.0.0.1', rejectUnauthorized: false });
          socket.once('secureConnect', () => resolve('handshake completed'));
          socket.once('error', () => resolve('closed before the handshake'));
          socket.once('close', () => resolve('closed before the handshake'));
        });
        expect(refused).toBe('closed before the handshake');
        await vi.waitFor(() => expect(strict.lines.slice(linesBefore).filter((line) => line.event === 'request')).toHaveLength(1), { timeout: 10_000, interval: 20 });
        const [line] = strict.lines.slice(linesBefore).filter((entry) => entry.event === 'request');
        expect(line).toMatchObject({ status: 429, code: 'too_many_requests', route: null, bytes: 0, aborted: true, client_address: '127.0.0.1' });
        expect((await strict.counted('', 429)).count).toBe(before.requests + 1);
        expect(await strict.throttled('connections_per_address')).toBe(before.throttled + 1);
      } finally {
        held.destroy();
      }
    });
  });
});
