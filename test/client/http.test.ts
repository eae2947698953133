/**
 * `merchant-api/client` against the standalone server with the memory
 * storage on Node, Bun and Deno (test/suites/client-suite.ts), and against servers
 * that misbehave: one that never answers (a raw TCP server), and ports
 * nothing listens on.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantClient, MerchantNetworkError, MerchantTimeoutError, type RetryInfo } from '../../src/client/index.js';
import { describeClientSuite } from '../suites/client-suite.js';
import { RUNTIMES, useCliServer } from '../support/processes.js';
import { conformanceSeed } from '../support/seeds.js';
import { freePort } from '../support/ports.js';

for (const runtime of RUNTIMES) {
  describe(`merchant-api/client against the ${runtime} server (memory storage)`, () => {
    // A receiver on 127.0.0.1 over http for the POSTs of the suite's retries.
    const server = useCliServer(runtime, conformanceSeed(), { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_HTTP: 'true' });
    describeClientSuite({ baseUrl: () => server.url });

    it('reaches the API mounted under a base path only with that path in baseUrl', async () => {
      const error = await createMerchantClient({ baseUrl: `${server.url}/merchant-api`, merchantId: 'shop-main', apiKey: 'main-key-2025' }).validateSignature().catch((e: unknown) => e);
      expect(error).toMatchObject({ status: 404, code: 'not_found', message: 'No such endpoint.' });
    });
  });
}

describe('a server that never answers (a raw TCP server that accepts and stays silent)', () => {
  let silent: Server;
  const sockets = new Set<Socket>();
  let url: string;
  beforeAll(async () => {
    silent = createServer((socket) => {
      sockets.add(socket);
      // A client that gives up (or exits) resets the connection: expected here.
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  });

  it('times out after timeoutMs with MerchantTimeoutError, and does not retry a timeout', async () => {
    const retries: RetryInfo[] = [];
    const client = createMerchantClient({ baseUrl: url, merchantId: 'm', apiKey: 'k', timeoutMs: 300, retries: { onRetry: (info) => retries.push(info) } });
    for (const call of [() => client.validateSignature(), () => client.user('u'), () => client.users().next(), () => client.exportUsers().next()]) {
      const started = Date.now();
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(MerchantTimeoutError);
      expect(error).toMatchObject({ kind: 'request', timeoutMs: 300 });
      expect((error as Error).message).toMatch(/^No answer from http:\/\/127\.0\.0\.1:\d+\/\S+ within 300 ms\.$/);
      expect(Date.now() - started).toBeGreaterThanOrEqual(280);
      expect(Date.now() - started).toBeLessThan(2000);
    }
    expect(retries).toEqual([]);
  });

  it('a deadline shorter than timeoutMs ends the call as a deadline timeout', async () => {
    const client = createMerchantClient({ baseUrl: url, merchantId: 'm', apiKey: 'k', timeoutMs: 10_000, retries: { deadlineMs: 300 } });
    expect(await client.user('u').catch((e: unknown) => e)).toMatchObject({ name: 'MerchantTimeoutError', kind: 'deadline', timeoutMs: 300 });
  });
});

describe('a port nothing listens on', () => {
  it('retries the refused connection, then throws MerchantNetworkError kind "refused"', async () => {
    const port = await freePort();
    const retries: RetryInfo[] = [];
    const client = createMerchantClient({ baseUrl: `http://127.0.0.1:${port}`, merchantId: 'm', apiKey: 'k', retries: { maxRetries: 2, baseDelayMs: 10, onRetry: (info) => retries.push(info) } });
    const error = await client.validateSignature().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MerchantNetworkError);
    expect(error).toMatchObject({ kind: 'refused', errorCode: 'ECONNREFUSED', method: 'GET', url: `http://127.0.0.1:${port}/validatesignature` });
    expect(retries.map((r) => r.retry)).toEqual([1, 2]);
    // The message names the URL, never the signed query.
    expect((error as Error).message).not.toMatch(/hmac|salt/);
  });
});
