/** The Node adapter: a real server on an ephemeral port answers exactly what fetch answers. */
import { createServer } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { createRequestListener, serve, type Served } from '../../adapters/node.js';
import { basic, signedUrl } from '../support/api.js';
import { onEachNodePath } from '../support/node-paths.js';
import { contractSeed, user } from '../support/seeds.js';
import { sleep } from '../support/sleep.js';

const NOW_MS = 1_700_000_000_000;
const HEADERS = ['content-type', 'cache-control', 'allow', 'www-authenticate', 'link', 'retry-after'];

onEachNodePath(() => {
  describe('Node adapter serve()', () => {
    let server: Served;
    let api: ReturnType<typeof createMerchantApi>;

    beforeAll(async () => {
      // One storage per side would record salts twice; the two share a clock and a cursor secret.
      const options = { now: () => NOW_MS, logger: silentLogger, cursorSecret: 'x'.repeat(32) };
      api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), ...options });
      server = await serve(createMerchantApi({ storage: new MemoryStorage(contractSeed()), ...options }), { port: 0 });
    });
    afterAll(() => server.close());

    it('listens on 127.0.0.1 by default and reports its URL', () => {
      expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    });

    const cases: [string, string, RequestInit?][] = [
      ['a valid signature', 'SIGNED'],
      ['a missing parameter', '/validatesignature?cp=m1'],
      ['an unknown merchant', '/validatesignature?cp=zz&ts=1&salt=s&hmac=h'],
      ['the whole list', '/merchant/users', { headers: basic('m1', 'key-one') }],
      ['a page', '/merchant/users?limit=2&active=true', { headers: basic('m1', 'key-one') }],
      ['one user', `/merchant/users/${encodeURIComponent('中文-id')}`, { headers: basic('m1', 'key-one') }],
      ['bad credentials', '/merchant/users', { headers: basic('m1', 'nope') }],
      ['a disabled merchant', '/merchant/users', { headers: basic('off', 'key-off') }],
      ['bad parameters', '/merchant/users?limit=0&x=1', { headers: basic('m1', 'key-one') }],
      ['an unknown path', '/nope'],
      ['a POST', '/merchant/users', { method: 'POST', body: 'x' }],
      ['HEAD', '/healthz', { method: 'HEAD' }],
      ['openapi', '/openapi.json'],
    ];
    for (const [name, path, init] of cases) {
      it(`answers ${name} exactly as api.fetch does`, async () => {
        const signedPath = path === 'SIGNED' ? undefined : path;
        const viaServer = signedPath ? `${server.url}${signedPath}` : signedUrl({ base: server.url, salt: 'same-salt' });
        const viaFetch = signedPath ? `${server.url}${signedPath}` : viaServer;
        const [a, b] = await Promise.all([fetch(viaServer, init), api.fetch(new Request(viaFetch, init))]);
        expect(a.status).toBe(b.status);
        // Cursors carry a random IV, so they differ between any two answers.
        const sameCursor = (text: string | null) => text?.replace(/eyJ[\w.-]+/g, 'CURSOR');
        for (const header of HEADERS) expect([header, sameCursor(a.headers.get(header))]).toEqual([header, sameCursor(b.headers.get(header))]);
        expect(sameCursor(await a.text())).toBe(sameCursor(await b.text()));
      });
    }

    /** One raw HTTP/1.1 exchange, header lines exactly as given (fetch would merge repeated ones). */
    async function rawGet(path: string, lines: string[]): Promise<{ status: number; body: string }> {
      const { port } = new URL(server.url);
      const socket = connect(Number(port), '127.0.0.1');
      socket.end(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${lines.map((l) => `${l}\r\n`).join('')}Connection: close\r\n\r\n`);
      let text = '';
      for await (const chunk of socket) text += chunk;
      return { status: Number(text.slice(9, 12)), body: text.slice(text.indexOf('\r\n\r\n') + 4) };
    }

    it('reads two Authorization lines as Fetch Headers joins them, although Node keeps only the first', async () => {
      const [good, bad] = [basic('m1', 'key-one').authorization!, basic('m1', 'nope').authorization!];
      const viaServer = await rawGet('/merchant/users/u1', [`Authorization: ${good}`, `Authorization: ${bad}`]);
      const viaFetch = await api.fetch(new Request(`${server.url}/merchant/users/u1`, { headers: [['authorization', good], ['authorization', bad]] }));
      expect(viaServer.status).toBe(401);
      expect(viaServer).toEqual({ status: viaFetch.status, body: await viaFetch.text() });
      expect((await rawGet('/merchant/users/u1', [`Authorization: ${good}`])).status).not.toBe(401);
    });

    it('streams the whole list in chunks over HTTP', async () => {
      const storage = new MemoryStorage();
      storage.putMerchant({ id: 'big', status: 'active', keys: ['k'] });
      for (let i = 0; i < 5000; i++) storage.putUser('big', user('big', `u${i}`));
      const big = await serve(createMerchantApi({ storage, logger: silentLogger, streamBatchSize: 100 }), { port: 0 });
      try {
        const response = await fetch(`${big.url}/merchant/users`, { headers: basic('big', 'k') });
        expect(response.headers.get('content-length')).toBeNull();
        expect((await response.json()).data).toHaveLength(5000);
      } finally {
        await big.close();
      }
    });
  });

  describe('Node adapter createRequestListener()', () => {
    it('plugs into an existing http.Server beside its own routes', async () => {
      const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), basePath: '/mapi', logger: silentLogger });
      const listener = createRequestListener(api);
      const server = createServer((req, res) => (req.url?.startsWith('/mapi/') ? listener(req, res) : res.end('own route')));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const port = (server.address() as { port: number }).port;
      try {
        expect(await (await fetch(`http://127.0.0.1:${port}/other`)).text()).toBe('own route');
        expect(await (await fetch(`http://127.0.0.1:${port}/mapi/healthz`)).json()).toEqual({ status: 'ok' });
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });
  });

  describe('Node adapter close()', () => {
    it('finishes an in-flight streaming response, then stops accepting', async () => {
      const inner = new MemoryStorage();
      inner.putMerchant({ id: 'big', status: 'active', keys: ['k'] });
      for (let i = 0; i < 50; i++) inner.putUser('big', user('big', `u${String(i).padStart(2, '0')}`));
      // Each batch after the first takes 40 ms, so the stream is still running when close() is called.
      const slow = Object.assign(Object.create(inner) as MemoryStorage, {
        getMerchant: (id: string) => inner.getMerchant(id),
        listUsers: async (q: Parameters<MemoryStorage['listUsers']>[0]) => {
          if (q.after) await sleep(40);
          return inner.listUsers(q);
        },
      });
      const served = await serve(createMerchantApi({ storage: slow, logger: silentLogger, streamBatchSize: 5 }), { port: 0 });
      const response = await fetch(`${served.url}/merchant/users`, { headers: basic('big', 'k') });
      const closing = served.close();
      const body = await response.json();
      expect(body.data).toHaveLength(50);
      await closing;
      await expect(fetch(`${served.url}/healthz`)).rejects.toThrow();
    });
  });
});
