/**
 * The public URL a request names (src/http/public-url.ts): with `trustProxy`,
 * an `X-Forwarded-Host` that is no host (`1.2.3.999`, `a:99999`, `[::1::]`)
 * is a 400 `malformed_request` in the endpoint's shape, logged as such, never
 * a 500 (docs/protocol.md#signing); and no `Host`, `X-Forwarded-Host` or
 * `X-Forwarded-Proto` value whatever yields a 5xx, through a real Node server
 * (a property test).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi, type MerchantApiOptions } from '../../src/api.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { serve, type Served } from '../../adapters/node.js';
import { basic, call, NOW_MS, ORIGIN, signedUrl } from '../support/api.js';
import { sendRaw } from '../support/http-client.js';
import { recordingLogger } from '../support/recording.js';
import { contractSeed } from '../support/seeds.js';

function proxiedApi(options: Partial<MerchantApiOptions> = {}) {
  const recording = recordingLogger();
  const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), now: () => NOW_MS, logger: recording.logger, tracing: false, trustProxy: true, ...options });
  return { api, ...recording };
}

const NOT_HOSTS = ['1.2.3.999', 'a:99999', '[::1::]', '256.0.0.1:80', '[1::2::3]:443', 'host:65536'];

describe('with trustProxy, an X-Forwarded-Host that is no host', () => {
  for (const host of NOT_HOSTS) {
    it(`${host}: 400 malformed_request on /validatesignature and on a list page, logged as such, not as an unexpected error`, async () => {
      const { api, lines, access } = proxiedApi();
      const headers = { 'x-forwarded-proto': 'https', 'x-forwarded-host': host };
      const signature = await call(api, signedUrl({ base: 'https://api.example.com' }).replace('https://api.example.com', ORIGIN), { headers });
      expect(signature.status).toBe(400);
      expect(signature.body).toEqual({ status: 'error', message: 'The X-Forwarded-Host header is not a host name or address with a valid port.', is_valid: false });

      const page = await call(api, `${ORIGIN}/merchant/users?limit=1`, { headers: { ...headers, ...basic('m1', 'key-one') } });
      expect(page.status).toBe(400);
      expect(page.body.errors).toEqual([{ code: 'malformed_request', message: 'The X-Forwarded-Host header is not a host name or address with a valid port.' }]);

      expect(lines.filter((line) => line.event === 'unexpected_error')).toEqual([]);
      expect(access().map((line) => [line.status, line.code])).toEqual([
        [400, 'malformed_request'],
        [400, 'malformed_request'],
      ]);
    });
  }

  it('is a 400 whatever the proto, also when the proto alone would make the request URL count', async () => {
    const { api } = proxiedApi();
    for (const [proto, host] of [['ftp', '1.2.3.999'], [undefined, 'a:99999'], ['https', 'a b'], ['http', 'host/path'], ['https', 'user@host']] as const) {
      const headers: Record<string, string> = { 'x-forwarded-host': host, ...(proto === undefined ? {} : { 'x-forwarded-proto': proto }) };
      expect((await call(api, signedUrl(), { headers })).body.message, `${proto} ${host}`).toBe('The X-Forwarded-Host header is not a host name or address with a valid port.');
    }
  });

  it('a missing X-Forwarded-Host, or a proto other than http and https, leaves the request URL', async () => {
    const { api } = proxiedApi();
    expect((await call(api, signedUrl(), { headers: { 'x-forwarded-proto': 'https' } })).status).toBe(200);
    expect((await call(api, signedUrl(), { headers: { 'x-forwarded-proto': 'ftp', 'x-forwarded-host': 'api.example.com' } })).status).toBe(200);
  });

  it('a valid one is still the public origin, its default port dropped', async () => {
    const { api } = proxiedApi();
    const headers = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example.com:443' };
    expect((await call(api, signedUrl({ base: 'https://api.example.com' }).replace('https://api.example.com', ORIGIN), { headers })).status).toBe(200);
    const page = await call(api, `${ORIGIN}/merchant/users?limit=1`, { headers: { ...headers, ...basic('m1', 'key-one') } });
    expect(page.response.headers.get('link')).toMatch(/^<https:\/\/api\.example\.com\/merchant\/users\?limit=1&cursor=/);
  });

  it('without trustProxy the header is not read at all', async () => {
    const { api } = proxiedApi({ trustProxy: false });
    const headers = { 'x-forwarded-proto': 'https', 'x-forwarded-host': '1.2.3.999' };
    expect((await call(api, signedUrl(), { headers })).status).toBe(200);
  });
});

describe('allowedHosts: the hosts a request may name where the handler uses its host', () => {
  const page = (api: { fetch(r: Request): Promise<Response> }, origin: string, headers: Record<string, string> = {}) =>
    call(api, `${origin}/merchant/users?limit=1`, { headers: { ...headers, ...basic('m1', 'key-one') } });
  const NOT_SERVED = 'The request names a host this API is not served at (allowedHosts).';

  it('without it, the Host a client sends is echoed in Link (as docs/embedding.md says)', async () => {
    const { api } = proxiedApi({ trustProxy: false });
    expect((await page(api, 'http://evil.example')).response.headers.get('link')).toMatch(/^<http:\/\/evil\.example\/merchant\/users\?/);
  });

  it('a listed host is served, on any port, its Link naming it; another is a 400 on a list page and on /validatesignature, not on /healthz', async () => {
    const { api, access } = proxiedApi({ trustProxy: false, allowedHosts: ['API.example.com', '[2001:db8::1]'] });
    expect((await page(api, 'http://api.example.com')).response.headers.get('link')).toMatch(/^<http:\/\/api\.example\.com\/merchant\/users\?/);
    expect((await page(api, 'http://api.example.com:8080')).response.headers.get('link')).toMatch(/^<http:\/\/api\.example\.com:8080\//);
    expect((await page(api, 'http://[2001:db8::1]')).status).toBe(200);
    expect((await call(api, signedUrl({ base: 'http://api.example.com' }))).status).toBe(200);

    const refused = await page(api, 'http://evil.example');
    expect(refused.status).toBe(400);
    expect(refused.response.headers.get('link')).toBeNull();
    expect(refused.body.errors).toEqual([{ code: 'malformed_request', message: NOT_SERVED }]);
    expect((await call(api, signedUrl({ base: 'http://evil.example' }))).body).toEqual({ status: 'error', message: NOT_SERVED, is_valid: false });
    expect(access().slice(-2).map((line) => line.code)).toEqual(['malformed_request', 'malformed_request']);
    // Load balancers probe by address: the health endpoints do not use the host.
    expect((await call(api, 'http://10.0.0.7/healthz')).status).toBe(200);
  });

  it('with trustProxy, the forwarded host is the one checked', async () => {
    const { api } = proxiedApi({ allowedHosts: ['api.example.com'] });
    const internal = 'http://10.0.0.7:8787';
    expect((await page(api, internal, { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example.com' })).response.headers.get('link')).toMatch(/^<https:\/\/api\.example\.com\//);
    expect((await page(api, internal, { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.example' })).status).toBe(400);
    // Without a forwarded host the request's own is checked: the internal address is not listed.
    expect((await page(api, internal)).status).toBe(400);
  });

  it('refuses, when the handler is made, an entry that is no host name, an empty list, or allowedHosts beside publicUrl', () => {
    const make = (options: Partial<MerchantApiOptions>) => () => proxiedApi(options);
    for (const entry of ['api.example.com:443', 'https://api.example.com', 'api.example.com/x', 'a b', '1.2.3.999', '', 'user@host']) {
      expect(make({ allowedHosts: [entry] }), entry).toThrow(/allowedHosts: .* is not a host name/);
    }
    expect(make({ allowedHosts: [] })).toThrow(/allowedHosts must be a non-empty array/);
    expect(make({ allowedHosts: ['api.example.com'], publicUrl: 'https://api.example.com' })).toThrow(/allowedHosts has no effect with publicUrl/);
  });
});

describe('no Host, X-Forwarded-Host or X-Forwarded-Proto value yields a 5xx (real Node server)', () => {
  let servers: Served[] = [];
  const ports: number[] = [];
  const auth = `Basic ${Buffer.from('m1:key-one').toString('base64')}`;

  beforeAll(async () => {
    for (const options of [{ trustProxy: true }, { trustProxy: false }, { trustProxy: true, allowedHosts: ['api.test', 'a'] }] as const) {
      const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), logger: recordingLogger().logger, tracing: false, throttle: false, ...options });
      const server = await serve(api, { port: 0, hostname: '127.0.0.1' });
      servers.push(server);
      ports.push(Number(new URL(server.url).port));
    }
  });
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.close()));
    servers = [];
  });

  /** Header values a client or a careless proxy might send: host-like pieces, ports, brackets, lists, anything visible. */
  const hostLike = fc.oneof(
    fc.stringMatching(/^[a-zA-Z0-9.:\[\]-]{0,30}$/),
    fc.tuple(fc.ipV4Extended(), fc.integer({ min: 0, max: 100_000 })).map(([ip, port]) => `${ip}:${port}`),
    fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 100_000 })).map(([ip, port]) => `[${ip}]:${port}`),
    fc.domain(),
    fc.string({ unit: fc.constantFrom(...'ab1.:[]-_@%/, \t?#'.split('')), maxLength: 20 }),
    fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 40 }),
  );
  // Mostly a Host and a proto the server takes, so that most runs reach the forwarded host.
  const host = fc.oneof({ weight: 3, arbitrary: fc.constant('api.test') }, { weight: 1, arbitrary: hostLike });
  const proto = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom('http', 'https', 'HTTPS', 'http, https') },
    { weight: 1, arbitrary: fc.constantFrom('ftp', '', 'https , ', 'javascript') },
    { weight: 1, arbitrary: fc.stringMatching(/^[a-z:,\/ ]{0,12}$/) },
  );
  const target = fc.constantFrom(
    '/validatesignature?cp=m1&ts=1700000000&salt=s&hmac=0000',
    `/merchant/users?limit=1`,
    '/healthz',
  );

  it('never answers 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(0, 1, 2), target, host, fc.option(hostLike, { nil: undefined, freq: 6 }), fc.option(proto, { nil: undefined, freq: 6 }), async (which, path, hostHeader, forwardedHost, forwardedProto) => {
        const lines = [`GET ${path} HTTP/1.1`, `Host: ${hostHeader}`, `Authorization: ${auth}`];
        if (forwardedHost !== undefined) lines.push(`X-Forwarded-Host: ${forwardedHost}`);
        if (forwardedProto !== undefined) lines.push(`X-Forwarded-Proto: ${forwardedProto}`);
        const response = await sendRaw(ports[which]!, `${lines.join('\r\n')}\r\nConnection: close\r\n\r\n`);
        expect(response.status, JSON.stringify({ which, path, hostHeader, forwardedHost, forwardedProto, body: response.body })).toBeGreaterThanOrEqual(200);
        expect(response.status, JSON.stringify({ which, path, hostHeader, forwardedHost, forwardedProto, body: response.body })).toBeLessThan(500);
      }),
      { numRuns: 300 },
    );
  });
});
