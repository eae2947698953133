/** docs/embedding.md#the-api-reference-page: `GET /docs` and its files through api.fetch. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { call, ORIGIN, testApi } from '../support/api.js';

const SWAGGER_VERSION = (JSON.parse(readFileSync(new URL('../../node_modules/swagger-ui-dist/package.json', import.meta.url), 'utf8')) as { version: string }).version;

async function page(api: ReturnType<typeof testApi>['api'], base = '') {
  const response = await api.fetch(new Request(`${ORIGIN}${base}/docs`));
  const html = await response.text();
  const files = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
  return { response, html, files };
}

describe('the API reference page', () => {
  it('is HTML under a strict Content-Security-Policy, referring only to its own versioned files', async () => {
    const { api } = testApi();
    const { response, html, files } = await page(api);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = response.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/script-src[^;]*(unsafe|\*|http)/);
    // No inline script: every script is a file.
    expect(html.match(/<script\b[^>]*>/g)!.every((tag) => / src="/.test(tag))).toBe(true);
    expect(html).not.toMatch(/<script[^>]*>[^<]/);
    expect(files.filter((f) => !f.startsWith('data:'))).toEqual(expect.arrayContaining([expect.stringMatching(new RegExp(`^docs/${SWAGGER_VERSION}-[0-9a-f]{8}/swagger-ui-bundle\\.js$`))]));
    for (const file of files) expect(file).toMatch(/^(docs\/[^/:]+\/[\w.-]+|data:,)$/);
  });

  it('serves every file it names, cached for a year; a wrong version or file is a 404', async () => {
    const { api } = testApi();
    const { files } = await page(api);
    for (const file of files.filter((f) => f.startsWith('docs/'))) {
      const response = await api.fetch(new Request(`${ORIGIN}/${file}`));
      expect(response.status, file).toBe(200);
      expect(response.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(response.headers.get('content-type')).toMatch(/^text\/(javascript|css); charset=utf-8$/);
      expect((await response.text()).length).toBeGreaterThan(100);
    }
    const bundle = files.find((f) => f.endsWith('/swagger-ui-bundle.js'))!;
    expect(await (await api.fetch(new Request(`${ORIGIN}/${bundle}`))).text()).toBe(readFileSync(new URL('../../node_modules/swagger-ui-dist/swagger-ui-bundle.js', import.meta.url), 'utf8'));
    for (const wrong of [bundle.replace(/docs\/[^/]+/, 'docs/1.0.0-00000000'), bundle.replace('swagger-ui-bundle.js', 'package.json'), bundle.replace('swagger-ui-bundle.js', '..%2Fpackage.json'), bundle.replace('swagger-ui-bundle.js', 'toString')]) {
      const { status, body } = await call(api, `${ORIGIN}/${wrong}`);
      expect(status, wrong).toBe(404);
      expect(body).toMatchObject({ errors: [{ code: 'not_found' }] });
    }
    const head = await api.fetch(new Request(`${ORIGIN}/${bundle}`, { method: 'HEAD' }));
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });

  it('is mounted under the base path, with relative references that stay under it', async () => {
    const { api } = testApi({ basePath: '/merchant-api' });
    const { response, files } = await page(api, '/merchant-api');
    expect(response.status).toBe(200);
    expect((await api.fetch(new Request(`${ORIGIN}/docs`), { pathAsSent: true })).status).toBe(404);
    const script = files.find((f) => f.endsWith('/init.js'))!;
    expect((await api.fetch(new Request(new URL(script, `${ORIGIN}/merchant-api/docs`)))).status).toBe(200);
  });

  it('docsPage: false turns it off: a plain 404, and no file is read', async () => {
    let read = 0;
    const { api } = testApi({ docsPage: false, docsAssets: async () => (read++, { version: '1', read: async () => '' }) });
    const { status, body } = await call(api, `${ORIGIN}/docs`);
    expect(status).toBe(404);
    expect(body).toEqual({ status: 'error', data: [], errors: [{ code: 'not_found', message: 'No such endpoint.' }] });
    expect(read).toBe(0);
  });

  it('without swagger-ui-dist, a 404 naming the package', async () => {
    const { api } = testApi({ docsAssets: () => Promise.reject(new Error("Cannot find module 'swagger-ui-dist/absolute-path.js'")) });
    const { status, body } = await call(api, `${ORIGIN}/docs`);
    expect(status).toBe(404);
    expect(body).toMatchObject({ status: 'error', errors: [{ code: 'not_found', message: expect.stringContaining('npm install swagger-ui-dist') }] });
  });

  it('is not in the OpenAPI document', async () => {
    const { api } = testApi();
    const { body } = await call(api, `${ORIGIN}/openapi.json`);
    expect(Object.keys((body as { paths: object }).paths).some((p) => p.startsWith('/docs'))).toBe(false);
  });
});
