/**
 * The limits through the standalone server on Node, Bun and Deno: failed
 * authentication is throttled per (merchant, address) without touching
 * another merchant, a blocked pair is refused even with the right key, and
 * (on Node, the one runtime with a header timeout and connection caps) a
 * slow client is cut off and one address cannot hold every connection.
 */
import { connect, type Socket } from 'node:net';
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { basicAuth, send } from '../support/http-client.js';
import { RUNTIMES, useCliServer } from '../support/processes.js';
import { conformanceSeed, MERCHANTS } from '../support/seeds.js';
import { signedUrl } from '../support/test-signer.js';

const { main, other } = MERCHANTS;

for (const runtime of RUNTIMES) {
  describe(`limits on ${runtime}`, () => {
    const server = useCliServer(runtime, conformanceSeed(), { HEADERS_TIMEOUT: '1000', AUTH_BLOCK_SECONDS: '120' });

    it('answers the 11th wrong key for a merchant 429 with Retry-After; another merchant from the same address is served', async () => {
      for (let i = 0; i < 10; i++) expect((await send(`${server.url}/merchant/users?limit=1`, { headers: basicAuth(main.id, `wrong-${i}`) })).status).toBe(401);
      const blocked = await send(`${server.url}/merchant/users?limit=1`, { headers: basicAuth(main.id, 'wrong-11') });
      expect(blocked.status).toBe(429);
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(100);
      expect(blocked.headers['ratelimit-policy']).toBe('"auth-merchant";q=10;w=120');
      expect(JSON.parse(blocked.body).errors[0].code).toBe('too_many_requests');
      expect((await send(`${server.url}/merchant/users?limit=1`, { headers: basicAuth(other.id, other.keys[0]) })).status).toBe(200);
    });

    it('refuses the blocked pair even with the right key, on both kinds of authentication', async () => {
      expect((await send(`${server.url}/merchant/users?limit=1`, { headers: basicAuth(main.id, main.keys[0]) })).status).toBe(429);
      const signed = await send(signedUrl({ secret: main.keys[0], url: `${server.url}/validatesignature`, cp: main.id }));
      expect(signed.status).toBe(429);
      expect(JSON.parse(signed.body)).toMatchObject({ status: 'error', is_valid: false });
      expect(signed.headers['x-content-type-options']).toBe('nosniff');
    });

    if (runtime === 'node') {
      it('cuts off a client that sends its headers too slowly, soon after the header timeout', async () => {
        const { port } = new URL(server.url);
        const started = Date.now();
        const answer = await new Promise<string>((resolve, reject) => {
          const socket = connect(Number(port), '127.0.0.1');
          let received = '';
          socket.on('data', (chunk) => (received += chunk.toString()));
          socket.on('error', reject);
          socket.on('close', () => resolve(received));
          socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
          // A byte now and then, never the blank line that ends the headers.
          const drip = setInterval(() => socket.writable && socket.write('X'), 200);
          socket.on('close', () => clearInterval(drip));
          setTimeout(() => reject(new Error('still connected after 8 s')), 8000);
        });
        const elapsed = Date.now() - started;
        expect(elapsed).toBeGreaterThanOrEqual(900);
        expect(elapsed).toBeLessThan(6000);
        expect(answer).toMatch(/^HTTP\/1\.1 408 /);
        expect(answer).toContain('"code":"request_timeout"');
      });
    }
  });
}

/** A connection from `localAddress` that sends nothing; resolves once it is connected, with whether the server closed it within `withinMs`. */
function idleConnection(port: number, localAddress: string, withinMs: number): Promise<{ socket: Socket; closedByServer: boolean; received: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress });
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => {});
    socket.once('connect', () => {
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

describe('connections per address on node', () => {
  const server = useCliServer('node', conformanceSeed(), { MAX_CONNECTIONS_PER_ADDRESS: '5' });

  it('answers a sixth connection from one address with a 429 as it arrives and closes it, and serves another address', async () => {
    const port = Number(new URL(server.url).port);
    const held = await Promise.all(Array.from({ length: 5 }, () => idleConnection(port, '127.0.0.1', 500)));
    try {
      expect(held.map((c) => c.closedByServer)).toEqual([false, false, false, false, false]);
      for (let i = 0; i < 2; i++) {
        const capped = await idleConnection(port, '127.0.0.1', 5000);
        expect(capped.closedByServer).toBe(true);
        // The limit's answer, as every limit gives it: JSON, Retry-After, a request id, nosniff.
        const [head, body] = capped.received.split('\r\n\r\n');
        expect(head).toMatch(/^HTTP\/1\.1 429 Too Many Requests\r\n/);
        expect(head).toMatch(/\r\nretry-after: 1\r\n/i);
        expect(head).toMatch(/\r\nx-request-id: [\w-]+\r\n/i);
        expect(head).toMatch(/\r\nx-content-type-options: nosniff\r\n/i);
        expect(JSON.parse(body!)).toMatchObject({ status: 'error', errors: [{ code: 'too_many_requests', message: expect.stringMatching(/^Too many connections from this address/) }] });
      }
      // Each answer has its access line, as every answer.
      await server.process.waitFor(/"status":429[^\n]*"client_address":"127\.0\.0\.1"[^\n]*"code":"too_many_requests"[\s\S]*"status":429[^\n]*"code":"too_many_requests"/);
      // Logged once for the address, not once per connection closed.
      await server.process.waitFor(/"event":"connections_per_address_reached"/);
      expect(server.process.output().match(/"event":"connections_per_address_reached","client_address":"127\.0\.0\.1","limit":5/g)).toHaveLength(1);
      expect(await healthFrom(server.url, '127.0.0.2')).toBe(200);
      // One of the five goes: the address may connect again.
      held[0]!.socket.destroy();
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await healthFrom(server.url, '127.0.0.1')).toBe(200);
    } finally {
      for (const { socket } of held) socket.destroy();
    }
  });
});
