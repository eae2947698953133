import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { generateWebhookSecret, webhookHeaders } from '../../src/webhooks/signature.js';
import { isDelivered, sendAttempt, WEBHOOK_USER_AGENT } from '../../src/webhooks/send-attempt.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function receiver(handle: (req: IncomingMessage, body: string, res: ServerResponse) => void): Promise<number> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => handle(req, body, res));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

const loopback = { address: '127.0.0.1', family: 4 as const };

describe('sendAttempt', () => {
  it('POSTs the body as JSON with the signed headers and the user-agent; a 2xx is delivered', async () => {
    const secret = generateWebhookSecret();
    const seen: Array<{ req: IncomingMessage; body: string }> = [];
    const port = await receiver((req, body, res) => {
      seen.push({ req, body });
      res.writeHead(204).end();
    });
    const body = '{"type":"webhook.test","timestamp":"2026-01-01T00:00:00.000000+00:00","data":{}}';
    const headers = webhookHeaders([secret], 'evt_1', Math.floor(Date.now() / 1000), body);
    const result = await sendAttempt({ url: new URL(`http://hooks.invalid:${port}/in`), address: loopback, headers, body });
    expect(result.status).toBe(204);
    expect(isDelivered(result)).toBe(true);
    expect(seen).toHaveLength(1);
    const { req, body: received } = seen[0]!;
    expect(req.method).toBe('POST');
    expect(req.url).toBe('/in');
    // The name is kept for Host while the connection goes to the checked address: hooks.invalid never resolves.
    expect(req.headers.host).toBe(`hooks.invalid:${port}`);
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers['user-agent']).toBe(WEBHOOK_USER_AGENT);
    // The release it names is package.json's, read here on its own.
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(WEBHOOK_USER_AGENT).toBe(`merchant-api-webhooks/${version} (+https://www.standardwebhooks.com)`);
    expect(new Webhook(secret).verify(received, req.headers as Record<string, string>)).toEqual(JSON.parse(body));
  });

  it('does not follow a redirect: a 3xx is a failure', async () => {
    let hits = 0;
    const port = await receiver((_req, _body, res) => {
      hits++;
      res.writeHead(302, { location: '/elsewhere' }).end();
    });
    const result = await sendAttempt({ url: new URL(`http://127.0.0.1:${port}/`), address: loopback, headers: {}, body: '{}' });
    expect(result.status).toBe(302);
    expect(isDelivered(result)).toBe(false);
    expect(hits).toBe(1);
  });

  it('keeps at most 256 bytes of the answer and stops reading a long one', async () => {
    const port = await receiver((_req, _body, res) => {
      res.writeHead(500, { 'retry-after': '7' });
      // Far more than is read: the attempt ends without waiting for it.
      res.write('x'.repeat(64 * 1024));
    });
    const result = await sendAttempt({ url: new URL(`http://127.0.0.1:${port}/`), address: loopback, headers: {}, body: '{}' });
    expect(result.status).toBe(500);
    expect(result.responseBody).toBe('x'.repeat(256));
    expect(result.retryAfter).toBe('7');
  });

  it('gives up after the timeout', async () => {
    const port = await receiver(() => undefined);
    const result = await sendAttempt({ url: new URL(`http://127.0.0.1:${port}/`), address: loopback, headers: {}, body: '{}', timeoutMs: 200 });
    expect(result).toMatchObject({ error: 'timeout' });
    expect(result.status).toBeUndefined();
  });

  it('names a refused connection', async () => {
    const port = await receiver(() => undefined);
    await new Promise((resolve) => servers.pop()!.close(resolve));
    const result = await sendAttempt({ url: new URL(`http://127.0.0.1:${port}/`), address: loopback, headers: {}, body: '{}' });
    expect(result.error).toBe('connection_refused');
  });
});
