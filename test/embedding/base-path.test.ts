/**
 * When a path counts as one a mount stripped (docs/embedding.md#the-base-path):
 * with `basePath`, a path below it is served as it is; any other path is
 * served as `basePath + path` when a host calls `api.fetch` itself (Hono's
 * `app.mount` strips the prefix), and is a 404 when the request came through
 * merchant-api's own servers or Node listener (`pathAsSent`), so a
 * standalone deploy answers nothing outside its mount.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRequestListener, serve } from '../../adapters/node.js';
import { onEachNodePath } from '../support/node-paths.js';
import { basic, ORIGIN, signedUrl, testApi } from '../support/api.js';

const BASE = '/api/merchant';

describe('basePath, called by a host (a mount may have stripped it)', () => {
  const { api } = testApi({ basePath: BASE });

  it('serves a path below the base path as it is', async () => {
    expect((await api.fetch(new Request(signedUrl({ path: `${BASE}/validatesignature` })))).status).toBe(200);
  });

  it('serves a stripped path as if the prefix were there: the signature covers the prefix', async () => {
    const signed = new URL(signedUrl({ path: `${BASE}/validatesignature` }));
    expect((await api.fetch(new Request(`${ORIGIN}/validatesignature${signed.search}`))).status).toBe(200);
    // Signed over the stripped URL: what the merchant did not call.
    expect((await api.fetch(new Request(signedUrl({ path: '/validatesignature' })))).status).toBe(400);
  });

  it('puts the prefix in the Link of a stripped request', async () => {
    const response = await api.fetch(new Request(`${ORIGIN}/merchant/users?limit=1`, { headers: basic('m1', 'key-one') }));
    expect(response.status).toBe(200);
    expect(response.headers.get('link')).toMatch(new RegExp(`^<${ORIGIN}${BASE}/merchant/users\\?`));
  });

  it('answers 404 for a path that is no route either way', async () => {
    expect((await api.fetch(new Request(`${ORIGIN}/elsewhere`))).status).toBe(404);
    expect((await api.fetch(new Request(`${ORIGIN}${BASE}/elsewhere`))).status).toBe(404);
  });

  it('with pathAsSent, answers 404 outside the base path', async () => {
    expect((await api.fetch(new Request(`${ORIGIN}/healthz`), { pathAsSent: true })).status).toBe(404);
    expect((await api.fetch(new Request(`${ORIGIN}${BASE}/healthz`), { pathAsSent: true })).status).toBe(200);
  });

  it('finds a route whose first segment is the base path’s, stripped (basePath /merchant)', async () => {
    const { api: merchantBase } = testApi({ basePath: '/merchant' });
    const stripped = await merchantBase.fetch(new Request(`${ORIGIN}/merchant/users?limit=1`, { headers: basic('m1', 'key-one') }));
    expect(stripped.status).toBe(200);
    expect(stripped.headers.get('link')).toMatch(new RegExp(`^<${ORIGIN}/merchant/merchant/users\\?`));
    const whole = await merchantBase.fetch(new Request(`${ORIGIN}/merchant/merchant/users?limit=1`, { headers: basic('m1', 'key-one') }));
    expect(whole.status).toBe(200);
  });
});

onEachNodePath(() => {
  describe('basePath through merchant-api’s own Node server and listener (the URL as sent)', () => {
    const { api } = testApi({ basePath: BASE });
    let served: Awaited<ReturnType<typeof serve>>;
    let plain: Server;
    let plainUrl = '';
    beforeAll(async () => {
      served = await serve(api, { port: 0 });
      plain = createServer(createRequestListener(api));
      await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
      plainUrl = `http://127.0.0.1:${(plain.address() as { port: number }).port}`;
    });
    afterAll(async () => {
      await served.close();
      await new Promise((resolve) => plain.close(resolve));
    });

    it('serve(): nothing outside the mount is answered', async () => {
      expect((await fetch(`${served.url}${BASE}/healthz`)).status).toBe(200);
      expect((await fetch(`${served.url}/healthz`)).status).toBe(404);
      expect((await fetch(`${served.url}/merchant/users`, { headers: basic('m1', 'key-one') })).status).toBe(404);
    });

    it('createRequestListener() as a whole node:http server: nothing outside the mount either', async () => {
      expect((await fetch(`${plainUrl}${BASE}/healthz`)).status).toBe(200);
      expect((await fetch(`${plainUrl}/healthz`)).status).toBe(404);
    });
  });
});
