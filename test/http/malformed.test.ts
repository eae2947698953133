/**
 * docs/protocol.md#failures: a malformed request of any kind gets a 4xx JSON answer,
 * never a 5xx, never a crash; afterwards the server keeps serving. Sent as
 * raw bytes to a real Node server, since most of these no client would send.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { serve, type Served } from '../../adapters/node.js';
import { contractSeed } from '../support/seeds.js';
import { sendRaw } from '../support/http-client.js';

const auth = `Basic ${Buffer.from('m1:key-one').toString('base64')}`;
const get = (target: string, headers = '') => `GET ${target} HTTP/1.1\r\nHost: api.test\r\n${headers}Connection: close\r\n\r\n`;
const users = (target: string) => get(target, `Authorization: ${auth}\r\n`);
const withAuth = (value: string) => `GET /merchant/users HTTP/1.1\r\nHost: api.test\r\nAuthorization: ${value}\r\nConnection: close\r\n\r\n`;
const sig = '/validatesignature?cp=m1&ts=1700000000&hmac=abc';

const MALFORMED: [string, string | Buffer][] = [
  ['bad percent-encoding in a signature query', get(`${sig}&salt=%ZZ`)],
  ['a lone % in a signature query', get(`${sig}&salt=%`)],
  ['a truncated escape %4', get(`${sig}&salt=%4`)],
  ['invalid UTF-8 escape %C3%28', get(`${sig}&salt=%C3%28`)],
  ['an overlong UTF-8 escape %C0%AF', get(`${sig}&salt=%C0%AF`)],
  ['an encoded surrogate %ED%A0%80', get(`${sig}&salt=%ED%A0%80`)],
  ['a stray continuation byte %80', get(`${sig}&salt=%80`)],
  ['a truncated 4-byte sequence %F0%9F%98', get(`${sig}&salt=%F0%9F%98`)],
  ['an encoded NUL in a value', get(`${sig}&salt=a%00b`)],
  ['an encoded NUL in a key', get(`${sig}&salt=x&k%00=1`)],
  ['bad escape in a key', get(`${sig}&salt=x&%GG=1`)],
  ['a query of 9000 characters', get(`${sig}&salt=${'a'.repeat(9000)}`)],
  ['300 parameters', get(`${sig}&salt=x&${Array.from({ length: 300 }, (_, i) => `p${i}=1`).join('&')}`)],
  ['all parameters missing', get('/validatesignature')],
  ['an empty query', get('/validatesignature?')],
  ['only ampersands', get('/validatesignature?&&&')],
  ['parameters without values', get('/validatesignature?cp&ts&salt&hmac')],
  ['a 200-character merchant id', get(`/validatesignature?cp=${'m'.repeat(200)}&ts=1&salt=s&hmac=h`)],
  ['a non-numeric ts with a bad signature', get('/validatesignature?cp=m1&ts=abc&salt=s&hmac=h')],
  ['bad percent-encoding in a list query', users('/merchant/users?limit=%ZZ')],
  ['invalid UTF-8 in a list query', users('/merchant/users?active=%FF')],
  ['NUL in a list query', users('/merchant/users?active=tr%00ue')],
  ['a huge limit', users(`/merchant/users?limit=${'9'.repeat(400)}`)],
  ['a cursor of random bytes', users(`/merchant/users?limit=1&cursor=${'x'.repeat(500)}`)],
  ['a cursor shaped like a JWE with garbage', users('/merchant/users?limit=1&cursor=a.b.c.d.e')],
  ['bad percent-encoding in a user id', users('/merchant/users/%ZZ')],
  ['invalid UTF-8 in a user id', users('/merchant/users/%C3%28')],
  ['NUL in a user id', users('/merchant/users/a%00b')],
  ['raw invalid UTF-8 bytes in the path', Buffer.concat([Buffer.from('GET /merchant/users/'), Buffer.from([0xff, 0xfe]), Buffer.from(` HTTP/1.1\r\nHost: api.test\r\nAuthorization: ${auth}\r\nConnection: close\r\n\r\n`)])],
  ['an encoded slash in a user id of another merchant', users('/merchant/users/..%2F..%2Fetc%2Fpasswd')],
  ['a dot-dot path escaping the API', get('/merchant/users/../../../etc/passwd')],
  ['encoded dot segments', get('/%2e%2e/%2e%2e/etc/passwd')],
  ['a double slash', get('//merchant/users')],
  ['a backslash path', get('/merchant\\users')],
  ['an unknown path', get('/admin')],
  ['a very long unknown path', get(`/${'a'.repeat(6000)}`)],
  ['bad base64 in Basic auth', withAuth('Basic ***')],
  ['Basic auth without a colon', withAuth(`Basic ${Buffer.from('m1key-one').toString('base64')}`)],
  ['Basic auth with invalid UTF-8', withAuth(`Basic ${Buffer.from([0x6d, 0x31, 0x3a, 0xff]).toString('base64')}`)],
  ['Basic auth with a NUL', withAuth(`Basic ${Buffer.from('m1\u0000:key-one').toString('base64')}`)],
  ['Basic auth, empty', withAuth('Basic ')],
  ['Basic auth, scheme only', withAuth('Basic')],
  ['Basic auth of 10,000 characters', withAuth(`Basic ${'QUFB'.repeat(2500)}`)],
  ['Basic auth with an unknown scheme', withAuth('Digest username="m1"')],
  ['a header of 20 KiB', get('/healthz', `X-Big: ${'a'.repeat(20 * 1024)}\r\n`)],
  ['a missing Host header', 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n'],
  ['a Host header with a path', 'GET /healthz HTTP/1.1\r\nHost: a/b\r\nConnection: close\r\n\r\n'],
  ['a POST with a body', 'POST /merchant/users HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello'],
  ['DELETE on a user', users('/merchant/users/a-001').replace('GET', 'DELETE')],
  ['garbage instead of HTTP', 'HELLO THERE\r\n\r\n'],
  ['an invalid header name', 'GET /healthz HTTP/1.1\r\nHost: api.test\r\nBad Header: x\r\nConnection: close\r\n\r\n'],
  ['a NUL byte in a header value', Buffer.from('GET /healthz HTTP/1.1\r\nHost: api.test\r\nX-A: a\u0000b\r\nConnection: close\r\n\r\n', 'latin1')],
];

describe('malformed requests against a real Node server', () => {
  let server: Served;
  let port: number;

  beforeAll(async () => {
    const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), logger: silentLogger });
    server = await serve(api, { port: 0 });
    port = Number(new URL(server.url).port);
  });
  afterAll(() => server.close());

  it('has a table of at least 40 malformed requests', () => expect(MALFORMED.length).toBeGreaterThanOrEqual(40));

  for (const [name, request] of MALFORMED) {
    it(`answers 4xx JSON for ${name}, and keeps serving`, async () => {
      const response = await sendRaw(port, request);
      expect(response.status).toBeGreaterThanOrEqual(400);
      expect(response.status).toBeLessThan(500);
      expect(response.headers['content-type']).toBe('application/json');
      const body = JSON.parse(response.body);
      expect(body.status).toBe('error');
      expect(response.body).not.toMatch(/at .+\.(ts|js):\d+/);
      const health = await sendRaw(port, get('/healthz'));
      expect(health.status).toBe(200);
    });
  }
});
