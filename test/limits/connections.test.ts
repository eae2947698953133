/**
 * The limits through the standalone server on Node, Bun and Deno: failed
 * authentication is throttled per (merchant, address) without touching
 * another merchant, a blocked pair is refused even with the right key, and
 * (on Node, the one runtime with a header timeout and connection caps) a
 * slow client is cut off, one address cannot hold every connection, and a
 * connection over either cap is answered, logged and counted.
 */
import { connect, type Socket } from 'node:net';
import { request } from 'node:http';
import { describe, expect, it, vi } from 'vitest';
import { basic } from '../support/basic-auth.js';
import { send } from '../support/http-client.js';
import { sampleValue, scrapeCliMetrics } from '../support/metrics-scrape.js';
import { RUNTIMES, useCliServer } from '../support/processes.js';
import { conformanceSeed, MERCHANTS } from '../support/seeds.js';
import { signedUrl } from '../support/test-signer.js';

const { main, other } = MERCHANTS;

for (const runtime of RUNTIMES) {
  describe(`limits on ${runtime}`, () => {
    // Metrics on Node, whose 408 is counted below.
    const server = useCliServer(runtime, conformanceSeed(), { HEADERS_TIMEOUT: '1000', AUTH_BLOCK_SECONDS: '120', ...(runtime === 'node' && { METRICS_PORT: '0' }) });

    it('answers the 11th wrong key for a merchant 429 with Retry-After; another merchant from the same address is served', async () => {
      for (let i = 0; i < 10; i++) expect((await send(`${server.url}/merchant/users?limit=1`, { headers: basic(main.id, `wrong-${i}`) })).status).toBe(401);
      const blocked = await send(`${server.url}/merchant/users?limit=1`, { headers: basic(main.id, 'wrong-11') });
      expect(blocked.status).toBe(429);
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(100);
      expect(blocked.headers['ratelimit-policy']).toBe('"auth-merchant";q=10;w=120');
      expect(JSON.parse(blocked.body).errors[0].code).toBe('too_many_requests');
      expect((await send(`${server.url}/merchant/users?limit=1`, { headers: basic(other.id, other.keys[0]) })).status).toBe(200);
    });

    it('refuses the blocked pair even with the right key, on both kinds of authentication', async () => {
      expect((await send(`${server.url}/merchant/users?limit=1`, { headers: basic(main.id, main.keys[0]) })).status).toBe(429);
      const signed = await send(signedUrl({ secret: main.keys[0], url: `${server.url}/validatesignature`, cp: main.id }));
      expect(signed.status).toBe(429);
      expect(JSON.parse(signed.body)).toMatchObject({ status: 'error', is_valid: false });
      expect(signed.headers['x-content-type-options']).toBe('nosniff');
    });

    if (runtime === 'node') {
      it('cuts off a client that sends its headers too slowly, soon after the header timeout, with a logged and counted 408', async () => {
        const { port } = new URL(server.url);
        const started = Date.now();
        const answer = await new Promise<string>((resolve, reject) => {
          const socket = connect(Number(port), '127.0.0.1');
          let received = '';
          socket.on('data', (chunk) => (received += chunk.toString()));
          socket.on('error', reject);
          socket.on('close', () => resolve(received));
          socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: slow-headers-408\r\n');
          // A byte now and then, never the blank line that ends the headers.
          const drip = setInterval(() => socket.writable && socket.write('X'), 200);
          socket.on('close', () => clearInterval(drip));
          setTimeout(() => reject(new Error('still connected 10 s after the 1 s header timeout')), 10_000);
        });
        const elapsed = Date.now() - started;
        // Never before the header timeout. The upper bound is the behaviour
        // (cut soon after it, not whenever Node's own 30 s check comes round),
        // so it stays, at 10x the timeout: a loaded machine is slower, not 30 s late.
        expect(elapsed).toBeGreaterThanOrEqual(900);
        expect(elapsed).toBeLessThan(10_000);
        const [head, body] = answer.split('\r\n\r\n');
        expect(head).toMatch(/^HTTP\/1\.1 408 /);
        expect(JSON.parse(body!)).toMatchObject({ status: 'error', errors: [{ code: 'request_timeout' }] });
        // Over plain HTTP Node hands nothing of a head that timed out to the
        // adapter (docs/runtimes.md), so the id is the server's own: the one
        // the access line has.
        const requestId = /\r\nx-request-id: ([\x21-\x7e]+)\r\n/i.exec(head!)?.[1];
        expect(requestId).toBeDefined();
        const [line] = await server.process.waitFor(new RegExp(`^\\{.*"request_id":"${requestId}".*$`, 'm'));
        expect(JSON.parse(line)).toMatchObject({ event: 'request', request_id: requestId, method: 'GET', route: null, status: 408, code: 'request_timeout' });
        // One line: the answer is logged once.
        expect(server.process.output().split(`"request_id":"${requestId}"`)).toHaveLength(2);
        expect(sampleValue(await scrapeCliMetrics(server.process), 'merchant_api_requests_total', { route: 'unmatched', status: '408' })).toBe(1);
      });
    }
  });
}

/**
 * A connection from `localAddress` that sends `bytes` (nothing by default);
 * resolves once it is connected, with whether the server closed it within
 * `withinMs` and what it received.
 */
function connection(port: number, localAddress: string, withinMs: number, bytes?: string): Promise<{ socket: Socket; closedByServer: boolean; received: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress });
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => {});
    socket.once('connect', () => {
      if (bytes !== undefined) socket.write(bytes);
      const timer = setTimeout(() => resolve({ socket, closedByServer: false, received }), withinMs);
      socket.once('close', () => {
        clearTimeout(timer);
        resolve({ socket, closedByServer: true, received });
      });
    });
    socket.once('error', reject);
  });
}

/** GET /healthz from `localAddress` on a new connection: its status. */
function healthFrom(url: string, localAddress: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/healthz`, { agent: false, localAddress }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The refusal of a connection over a cap, as every limit answers: a JSON 429 with Retry-After, a request id and nosniff. */
function expectRefusal(received: string, message: RegExp): string {
  const [head, body] = received.split('\r\n\r\n');
  expect(head).toMatch(/^HTTP\/1\.1 429 Too Many Requests\r\n/);
  expect(head).toMatch(/\r\nretry-after: 1\r\n/i);
  expect(head).toMatch(/\r\nx-content-type-options: nosniff\r\n/i);
  expect(JSON.parse(body!)).toMatchObject({ status: 'error', errors: [{ code: 'too_many_requests', message: expect.stringMatching(message) }] });
  const requestId = /\r\nx-request-id: ([\w-]+)\r\n/i.exec(head!)?.[1];
  expect(requestId).toBeDefined();
  return requestId!;
}

/** The access line of `requestId`, once the server has written it. */
async function accessLine(server: { process: { waitFor(pattern: RegExp): Promise<RegExpExecArray> } }, requestId: string): Promise<Record<string, unknown>> {
  const [line] = await server.process.waitFor(new RegExp(`^\\{.*"event":"request","request_id":"${requestId}".*$`, 'm'));
  return JSON.parse(line) as Record<string, unknown>;
}

describe('connections per address on node', () => {
  const server = useCliServer('node', conformanceSeed(), { MAX_CONNECTIONS_PER_ADDRESS: '5', METRICS_PORT: '0' });

  it('answers a sixth connection from one address with a 429 as it arrives and closes it, logged and counted, and serves another address', async () => {
    const port = Number(new URL(server.url).port);
    const held = await Promise.all(Array.from({ length: 5 }, () => connection(port, '127.0.0.1', 500)));
    try {
      expect(held.map((c) => c.closedByServer)).toEqual([false, false, false, false, false]);
      for (let i = 0; i < 2; i++) {
        const capped = await connection(port, '127.0.0.1', 5000);
        expect(capped.closedByServer).toBe(true);
        const requestId = expectRefusal(capped.received, /^Too many connections from this address/);
        // Each answer has its access line, as every answer.
        expect(await accessLine(server, requestId)).toMatchObject({ status: 429, route: null, client_address: '127.0.0.1', code: 'too_many_requests' });
      }
      // And its count: as a request, and as a refusal of this limit.
      const scrape = await scrapeCliMetrics(server.process);
      expect(sampleValue(scrape, 'merchant_api_requests_total', { route: 'unmatched', status: '429' })).toBe(2);
      expect(sampleValue(scrape, 'merchant_api_throttled_total', { reason: 'connections_per_address' })).toBe(2);
      // Logged once for the address, not once per connection refused.
      await server.process.waitFor(/"event":"connections_per_address_reached"/);
      expect(server.process.output().match(/"event":"connections_per_address_reached","client_address":"127\.0\.0\.1","limit":5/g)).toHaveLength(1);
      expect(await healthFrom(server.url, '127.0.0.2')).toBe(200);
      // One of the five goes: the address may connect again, once the server has seen it close.
      held[0]!.socket.destroy();
      await vi.waitFor(async () => expect(await healthFrom(server.url, '127.0.0.1').catch(() => 0)).toBe(200), { timeout: 10_000, interval: 100 });
    } finally {
      for (const { socket } of held) socket.destroy();
    }
  });

  it('never reads a request sent on a refused connection: it gets the 429, and its request is not served', async () => {
    const port = Number(new URL(server.url).port);
    const held = await Promise.all(Array.from({ length: 5 }, () => connection(port, '127.0.0.3', 500)));
    try {
      const capped = await connection(port, '127.0.0.3', 5000, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: sent-on-a-refused-connection\r\n\r\n');
      expectRefusal(capped.received, /^Too many connections from this address/);
      // A request that arrives after it is logged after it: by then the refused one would have been too.
      const later = await send(`${server.url}/healthz`, { headers: { 'x-request-id': 'after-the-refused-one' } });
      expect(later.status).toBe(200);
      await accessLine(server, 'after-the-refused-one');
      expect(server.process.output()).not.toContain('sent-on-a-refused-connection');
    } finally {
      for (const { socket } of held) socket.destroy();
    }
  });
});

describe('connections over MAX_CONNECTIONS on node', () => {
  const server = useCliServer('node', conformanceSeed(), { MAX_CONNECTIONS: '3', METRICS_PORT: '0' });

  it('answers a connection over the whole cap with a 429 as it arrives, whatever its address, logged and counted; once one closes, the next is served', async () => {
    const port = Number(new URL(server.url).port);
    const held = await Promise.all(['127.0.0.1', '127.0.0.2', '127.0.0.3'].map((address) => connection(port, address, 500)));
    try {
      expect(held.map((c) => c.closedByServer)).toEqual([false, false, false]);
      const refused = await connection(port, '127.0.0.4', 5000);
      expect(refused.closedByServer).toBe(true);
      const requestId = expectRefusal(refused.received, /^The server has too many connections at once/);
      expect(await accessLine(server, requestId)).toMatchObject({ status: 429, route: null, client_address: '127.0.0.4', code: 'too_many_requests' });
      const scrape = await scrapeCliMetrics(server.process);
      expect(sampleValue(scrape, 'merchant_api_requests_total', { route: 'unmatched', status: '429' })).toBe(1);
      expect(sampleValue(scrape, 'merchant_api_throttled_total', { reason: 'connections' })).toBe(1);
      // No address is capped on its own: the whole cap is the only one.
      expect(server.process.output()).not.toContain('connections_per_address_reached');
      held[0]!.socket.destroy();
      await vi.waitFor(async () => expect(await healthFrom(server.url, '127.0.0.4').catch(() => 0)).toBe(200), { timeout: 10_000, interval: 100 });
    } finally {
      for (const { socket } of held) socket.destroy();
    }
  });
});
