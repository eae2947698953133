/** docs/protocol.md#signing: every outcome row of /validatesignature through api.fetch. */
import { describe, expect, it } from 'vitest';
import { sign, pct } from '../../src/signing/index.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { call, NOW, ORIGIN, signedUrl, testApi } from '../support/api.js';
import { contractSeed } from '../support/seeds.js';

/** A memory storage started an hour ago: it refuses a ts from before its start (test/storage/memory/memory-salts.test.ts). */
const startedEarlier = () => new MemoryStorage(contractSeed(), { startedAt: NOW - 3600 });

describe('GET /validatesignature outcomes, in the documented order', () => {
  it('200 {"status":"ok","is_valid":true} for a valid request, with JSON headers', async () => {
    const { api } = testApi();
    const { response, text } = await call(api, signedUrl());
    expect(response.status).toBe(200);
    expect(text).toBe('{"status":"ok","is_valid":true}');
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(response.headers.get('cache-control')).toBe('no-store');
  });

  it('400 naming a missing parameter, byte-exact', async () => {
    const { api } = testApi();
    const url = signedUrl().replace(/&ts=\d+/, '');
    expect((await call(api, url)).text).toBe('{"status":"error","message":"Missing required parameter: ts.","is_valid":false}');
  });

  it('400 naming every missing or empty parameter', async () => {
    const { api } = testApi();
    const { status, text } = await call(api, `${ORIGIN}/validatesignature?cp=&salt=x`);
    expect(status).toBe(400);
    expect(text).toBe('{"status":"error","message":"Missing required parameters: cp, ts, hmac.","is_valid":false}');
  });

  it('400 for a required parameter given twice', async () => {
    const { api } = testApi();
    const { status, body } = await call(api, `${signedUrl()}&salt=again&cp=m1`);
    expect(status).toBe(400);
    expect(body).toEqual({ status: 'error', message: 'Parameter given more than once: salt, cp.', is_valid: false });
  });

  it('400 for a salt longer than 128 characters, before touching the storage', async () => {
    const { api, storage } = testApi();
    const { status, body } = await call(api, signedUrl({ salt: 's'.repeat(129) }));
    expect(status).toBe(400);
    expect(body.message).toMatch(/salt longer than 128/);
    expect(storage.saltCount).toBe(0);
  });

  it('404 {"status":"error","is_valid":false} without a message for an unknown merchant', async () => {
    const { api } = testApi();
    const { status, text } = await call(api, signedUrl({ cp: 'nobody' }));
    expect(status).toBe(404);
    expect(text).toBe('{"status":"error","is_valid":false}');
  });

  it('404 for a merchant id differing only in case from a real one', async () => {
    const { api } = testApi();
    expect((await call(api, signedUrl({ cp: 'm2'.toUpperCase() }))).status).toBe(404);
  });

  it('403 for a disabled merchant, even with a valid signature', async () => {
    const { api } = testApi();
    const { status, text } = await call(api, signedUrl({ cp: 'off', key: 'key-off' }));
    expect(status).toBe(403);
    expect(text).toBe('{"status":"error","message":"This account is disabled.","is_valid":false}');
  });

  it('400 "Signature does not match." for a wrong key', async () => {
    const { api } = testApi();
    const { status, text } = await call(api, signedUrl({ key: 'key-two' }));
    expect(status).toBe(400);
    expect(text).toBe('{"status":"error","message":"Signature does not match.","is_valid":false}');
  });

  it('accepts every active key of a merchant (rotation)', async () => {
    const { api } = testApi();
    expect((await call(api, signedUrl({ key: 'key-one-rotated' }))).status).toBe(200);
  });

  it('accepts the signature in upper case', async () => {
    const { api } = testApi();
    const url = signedUrl().replace(/hmac=([0-9a-f]+)/, (_, h: string) => `hmac=${h.toUpperCase()}`);
    expect((await call(api, url)).status).toBe(200);
  });

  it('signs every other parameter: changing one breaks the signature', async () => {
    const { api } = testApi();
    const url = signedUrl({ extra: [['note', "it's (a) *test*!"]] });
    expect((await call(api, url)).status).toBe(200);
    expect((await call(api, url.replace('note=', 'note=x'))).text).toContain('Signature does not match.');
  });

  it('does not sign gettoken', async () => {
    const { api } = testApi();
    expect((await call(api, `${signedUrl()}&gettoken=anything`)).status).toBe(200);
  });

  it('decodes + as a space before signing, and %2B as a plus', async () => {
    const { api } = testApi();
    const pairs: [string, string][] = [['cp', 'm1'], ['ts', String(NOW)], ['salt', 'a b+c']];
    const hmac = sign('key-one', { method: 'GET', url: `${ORIGIN}/validatesignature`, params: pairs });
    expect((await call(api, `${ORIGIN}/validatesignature?cp=m1&ts=${NOW}&salt=a+b%2Bc&hmac=${hmac}`)).status).toBe(200);
  });

  it('signs repeated keys, non-ASCII keys and values, and "~" (kept as it is) beside a space', async () => {
    const { api } = testApi();
    const url = signedUrl({ extra: [['k', 'v2'], ['k', 'v1'], ['ключ', '値 ☃🐍'], ['~tilde', 'a~b c~']] });
    expect((await call(api, url)).status).toBe(200);
  });

  it('400 for a ts that is not whole seconds, checked after the signature', async () => {
    const { api } = testApi();
    const { status, body } = await call(api, signedUrl({ ts: '1700000000.5' }));
    expect(status).toBe(400);
    expect(body.message).toMatch(/^Invalid timestamp/);
    expect((await call(api, signedUrl({ ts: '1700000000.5', key: 'wrong' }))).body.message).toBe('Signature does not match.');
  });

  it('400 for a ts outside the window either way; inside at the edges', async () => {
    const { api } = testApi({ storage: startedEarlier() });
    for (const ts of [NOW - 301, NOW + 301]) {
      const { status, body } = await call(api, signedUrl({ ts }));
      expect(status).toBe(400);
      expect(body.message).toMatch(/outside the accepted window of 300 seconds/);
    }
    for (const ts of [NOW - 300, NOW + 300]) expect((await call(api, signedUrl({ ts }))).status).toBe(200);
  });

  it('honours timestampTolerance', async () => {
    const { api } = testApi({ timestampTolerance: 10, storage: startedEarlier() });
    expect((await call(api, signedUrl({ ts: NOW - 11 }))).status).toBe(400);
    expect((await call(api, signedUrl({ ts: NOW - 10 }))).status).toBe(200);
  });

  it('400 for a replayed salt; the same salt is fine for another merchant', async () => {
    const { api } = testApi();
    const url = signedUrl({ salt: 'once' });
    expect((await call(api, url)).status).toBe(200);
    const { status, body } = await call(api, url);
    expect(status).toBe(400);
    expect(body).toEqual({ status: 'error', message: 'This salt was already used: every request needs a new salt.', is_valid: false });
    expect((await call(api, signedUrl({ salt: 'once', cp: 'm2', key: 'key-two' }))).status).toBe(200);
  });

  it('records a salt only when every other check passed', async () => {
    const { api, storage } = testApi();
    await call(api, signedUrl({ salt: 'x1', key: 'wrong' }));
    await call(api, signedUrl({ salt: 'x2', ts: NOW - 1000 }));
    expect(storage.saltCount).toBe(0);
    expect((await call(api, signedUrl({ salt: 'x1' }))).status).toBe(200);
  });

  it('answers HEAD with the status and headers of GET, no body, signed with HEAD', async () => {
    const { api } = testApi();
    const response = await api.fetch(new Request(signedUrl({ method: 'HEAD' }), { method: 'HEAD' }));
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.text()).toBe('');
    const wrongMethod = await api.fetch(new Request(signedUrl({ method: 'GET' }), { method: 'HEAD' }));
    expect(wrongMethod.status).toBe(400);
  });

  it('405 with Allow for other methods, in the endpoint\'s shape', async () => {
    const { api } = testApi();
    const { status, response, body } = await call(api, signedUrl(), { method: 'POST' });
    expect(status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET, HEAD');
    expect(body).toEqual({ status: 'error', message: 'Only GET and HEAD are allowed here.', is_valid: false });
  });
});

describe('the public URL in base_url', () => {
  it('uses publicUrl over the request URL', async () => {
    const { api } = testApi({ publicUrl: 'https://api.example.com' });
    expect((await call(api, signedUrl({ base: 'https://api.example.com' }).replace('https://api.example.com', ORIGIN))).status).toBe(200);
    expect((await call(api, signedUrl())).status).toBe(400);
  });

  it('accepts any of several public URLs, and a path prefix a proxy strips', async () => {
    const { api } = testApi({ publicUrl: ['https://a.example.com:443', 'https://b.example.com/prefix/'] });
    const a = signedUrl({ base: 'https://a.example.com' });
    const b = signedUrl({ base: 'https://b.example.com/prefix' });
    expect((await call(api, a.replace('https://a.example.com', ORIGIN))).status).toBe(200);
    expect((await call(api, b.replace('https://b.example.com/prefix', ORIGIN))).status).toBe(200);
  });

  it('keeps a non-default port', async () => {
    const { api } = testApi({ publicUrl: 'http://api.example.com:8080' });
    expect((await call(api, signedUrl({ base: 'http://api.example.com:8080' }).replace('http://api.example.com:8080', ORIGIN))).status).toBe(200);
  });

  it('trusts X-Forwarded-Proto/-Host only when trustProxy is on, and only the value the nearest proxy added', async () => {
    // The client sent "client-chosen.example"; the proxy appended the host it served.
    const headers = { 'x-forwarded-proto': 'http, https', 'x-forwarded-host': 'client-chosen.example, shop.example.com' };
    const chosenByClient = signedUrl({ base: 'https://client-chosen.example' }).replace('https://client-chosen.example', ORIGIN);
    expect((await call(testApi({ trustProxy: true }).api, chosenByClient, { headers })).status).toBe(400);
    const url = signedUrl({ base: 'https://shop.example.com' }).replace('https://shop.example.com', ORIGIN);
    expect((await call(testApi({ trustProxy: true }).api, url, { headers })).status).toBe(200);
    const url2 = signedUrl({ base: 'https://shop.example.com' }).replace('https://shop.example.com', ORIGIN);
    expect((await call(testApi().api, url2, { headers })).status).toBe(400);
  });

  it('includes the basePath of an embedded handler', async () => {
    const { api } = testApi({ basePath: '/merchant-api/' });
    expect((await call(api, signedUrl({ path: '/merchant-api/validatesignature' }))).status).toBe(200);
    // Outside the base path: a 404 for a path as sent; taken as stripped otherwise, where the
    // signature must cover the prefix the merchant called, which this one does not.
    expect((await call(api, signedUrl(), {}, { pathAsSent: true })).status).toBe(404);
    expect((await call(api, signedUrl())).body).toMatchObject({ status: 'error', message: 'Signature does not match.' });
  });

  it('accepts a signature over the decoded or the encoded form of a non-ASCII path', async () => {
    const { api } = testApi({ basePath: '/ąpi' });
    const encodedPath = '/%C4%85pi/validatesignature';
    for (const signedPath of ['/ąpi/validatesignature', encodedPath]) {
      const pairs: [string, string][] = [['cp', 'm1'], ['ts', String(NOW)], ['salt', `p-${signedPath.length}`]];
      const hmac = sign('key-one', { method: 'GET', url: ORIGIN + signedPath, params: pairs });
      const query = [...pairs, ['hmac', hmac]].map(([k, v]) => `${k}=${pct(v!)}`).join('&');
      expect((await call(api, `${ORIGIN}${encodedPath}?${query}`)).status).toBe(200);
    }
  });
});
