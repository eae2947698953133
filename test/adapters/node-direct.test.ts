/**
 * The Node adapter's direct path (adapters/node-direct.ts): the URL it takes
 * without a parser is the one `new Request` would make, for every target and
 * Host; its answers are the other path's byte for byte, on raw sockets; and
 * a hook that reads `ctx.request` gets the `Request`, made only then.
 */
import { connect } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRequestListener, serve, type Served } from '../../adapters/node.js';
import { plainUrl } from '../../adapters/node-direct.js';
import { createMerchantApi } from '../../src/api.js';
import type { RequestContext } from '../../src/http/context.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { basic, signedUrl } from '../support/api.js';
import { contractSeed } from '../support/seeds.js';
import { createServer } from 'node:http';

describe('plainUrl', () => {
  // Every character class the URL parser treats specially in a path, a query or a host, and plain ones.
  const targetChars = fc.constantFrom(...'/abcAZ09-._~!$&\'()*+,;=:@%?#\\ "<>`{}|^[]é\t2eE.'.split(''));
  const target = fc.array(targetChars, { maxLength: 24 }).map((chars) => `/${chars.join('')}`);
  const host = fc.oneof(
    fc.array(fc.constantFrom(...'abcXY09-.:_[]%'.split('')), { minLength: 1, maxLength: 16 }).map((chars) => chars.join('')),
    fc.tuple(fc.nat(300), fc.nat(300), fc.nat(300), fc.nat(300), fc.option(fc.nat(70_000))).map(([a, b, c, d, port]) => `${a}.${b}.${c}.${d}${port === null ? '' : `:${port}`}`),
    fc.constantFrom('localhost', 'localhost:80', 'localhost:443', 'localhost:8080', 'xn--nxasmq6b.example', '127.1', '0x7f.0.0.1', 'api.test', 'a..b', 'a.b.', 'foo.123', 'LOCALHOST', 'api.test:065'),
  );

  it('is, whenever it answers, the URL of the Request made from the same target and Host', () => {
    fc.assert(
      fc.property(target, host, fc.boolean(), (t, h, secure) => {
        const url = plainUrl(t, h, secure);
        if (url === undefined) return;
        expect(url).toBe(new Request(`${secure ? 'https' : 'http'}://${h}${t}`).url);
      }),
      { numRuns: 5000 },
    );
  });

  it('answers for the targets merchants send, so that the direct path is taken', () => {
    const signed = new URL(signedUrl({ extra: [['name', 'Zoë & co']] }));
    expect(plainUrl(`${signed.pathname}${signed.search}`, '127.0.0.1:8787', false)).toBe(`http://127.0.0.1:8787${signed.pathname}${signed.search}`);
    expect(plainUrl('/merchant/users/%E4%B8%AD?limit=2', 'api.example.com', true)).toBe('https://api.example.com/merchant/users/%E4%B8%AD?limit=2');
    expect(plainUrl('/merchant/users/../x', 'api.example.com', true)).toBeUndefined();
    expect(plainUrl('/healthz', undefined, false)).toBeUndefined();
  });
});

/** One raw HTTP/1.1 exchange; the answer's bytes with its Date line taken out (the two servers may straddle a second). */
async function raw(url: string, request: string): Promise<string> {
  const { port } = new URL(url);
  const socket = connect(Number(port), '127.0.0.1');
  socket.end(request.replaceAll('HOST', `127.0.0.1:${port}`));
  let text = '';
  for await (const chunk of socket) text += chunk;
  return text.replace(/\r\nDate: [^\r]*/i, '');
}

describe('the two Node paths, on raw sockets', () => {
  const servers: Served[] = [];
  beforeAll(async () => {
    for (const fetchObjects of [false, true]) {
      // Each its own storage (a salt is recorded once per server) on one clock.
      const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), now: () => 1_700_000_000_000, logger: silentLogger, cursorSecret: 'x'.repeat(32) });
      const listener = createRequestListener(api, { fetchObjects });
      const server = createServer(listener);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as { port: number };
      servers.push({ url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) });
    }
  });
  afterAll(() => Promise.all(servers.map((s) => s.close())));

  const auth = basic('m1', 'key-one').authorization!;
  const signed = new URL(signedUrl({ salt: 'same-salt-both' }));
  const get = (target: string, lines = '') => `GET ${target} HTTP/1.1\r\nHost: HOST\r\nX-Request-Id: rid-1\r\n${lines}Connection: close\r\n\r\n`;
  const cases: [string, string][] = [
    ['a valid signature', get(`${signed.pathname}${signed.search}`)],
    ['the same salt again', get(`${signed.pathname}${signed.search}`)],
    ['a missing parameter', get('/validatesignature?cp=m1')],
    ['one user', get('/merchant/users/b-003', `Authorization: ${auth}\r\n`)],
    ['one user, HEAD', get('/merchant/users/b-003', `Authorization: ${auth}\r\n`).replace('GET', 'HEAD')],
    ['an unknown user', get('/merchant/users/nobody', `Authorization: ${auth}\r\n`)],
    ['the streamed list', get('/merchant/users', `Authorization: ${auth}\r\n`)],
    ['the streamed list, HEAD', get('/merchant/users', `Authorization: ${auth}\r\n`).replace('GET', 'HEAD')],
    ['wrong credentials', get('/merchant/users/u1', `Authorization: ${basic('m1', 'nope').authorization}\r\n`)],
    ['bad parameters', get('/merchant/users?limit=0&x=1', `Authorization: ${auth}\r\n`)],
    ['an unknown path', get('/nope')],
    ['a dot segment', get('/merchant/users/./a-001', `Authorization: ${auth}\r\n`)],
    ['a POST', `POST /merchant/users HTTP/1.1\r\nHost: HOST\r\nX-Request-Id: rid-1\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx`],
    ['health', get('/healthz')],
    ['openapi', get('/openapi.json')],
    ['an Expect not met', get('/healthz', 'Expect: bogus\r\n')],
    ['an uppercase Host', 'GET /healthz HTTP/1.1\r\nHost: LOCALHOST\r\nX-Request-Id: rid-1\r\nConnection: close\r\n\r\n'],
  ];
  for (const [name, request] of cases) {
    it(`answers ${name} with the same bytes`, async () => {
      const [direct, viaFetch] = await Promise.all(servers.map((s) => raw(s.url, request)));
      expect(direct).toBe(viaFetch);
      expect(direct).toMatch(/^HTTP\/1\.1 \d{3} /);
    });
  }
});

describe('a hook on the direct path', () => {
  let served: Served;
  const seen: { lazy: boolean; url: string; header: string | null; aborted: boolean }[] = [];
  beforeAll(async () => {
    const hooks = {
      onRequest(ctx: RequestContext) {
        // The direct path's context makes its Request only when read.
        const lazy = !Object.hasOwn(ctx, 'request');
        seen.push({ lazy, url: ctx.request.url, header: ctx.request.headers.get('x-custom'), aborted: ctx.request.signal.aborted });
      },
    };
    served = await serve(createMerchantApi({ storage: new MemoryStorage(contractSeed()), logger: silentLogger, hooks }), { port: 0 });
  });
  afterAll(() => served.close());

  it('reads the Request, made from the request as it came', async () => {
    const response = await fetch(`${served.url}/healthz?x=1`, { headers: { 'x-custom': 'a value' } });
    expect(response.status).toBe(200);
    expect(seen).toEqual([{ lazy: true, url: `${served.url}/healthz?x=1`, header: 'a value', aborted: false }]);
  });
});

describe('the direct path', () => {
  it('makes no Request and no Response for a whole answer, where the fetch path makes both', async () => {
    const made = { requests: 0, responses: 0 };
    const counts = async (fetchObjects: boolean) => {
      const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), logger: silentLogger });
      const server = createServer(createRequestListener(api, { fetchObjects }));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as { port: number };
      // Counted after the listener exists: @hono/node-server puts its own classes in place as it is made.
      const [RequestClass, ResponseClass] = [globalThis.Request, globalThis.Response];
      const counting = <T extends object>(target: T, key: keyof typeof made) => new Proxy(target, { construct: (t, args, newTarget) => (made[key]++, Reflect.construct(t as never, args, newTarget)) });
      Object.defineProperty(globalThis, 'Request', { value: counting(RequestClass, 'requests'), configurable: true, writable: true });
      Object.defineProperty(globalThis, 'Response', { value: counting(ResponseClass, 'responses'), configurable: true, writable: true });
      made.requests = made.responses = 0;
      try {
        const statuses: string[] = [];
        for (const target of ['/merchant/users/a-001', '/validatesignature?cp=m1', '/nope']) {
          statuses.push((await raw(`http://127.0.0.1:${port}`, `GET ${target} HTTP/1.1\r\nHost: HOST\r\nAuthorization: ${basic('m1', 'key-one').authorization}\r\nConnection: close\r\n\r\n`)).slice(9, 12));
        }
        expect(statuses).toEqual(['200', '400', '404']);
        return { ...made };
      } finally {
        Object.defineProperty(globalThis, 'Request', { value: RequestClass, configurable: true, writable: true });
        Object.defineProperty(globalThis, 'Response', { value: ResponseClass, configurable: true, writable: true });
        await new Promise((resolve) => server.close(resolve));
      }
    };
    expect(await counts(false)).toEqual({ requests: 0, responses: 0 });
    const viaFetch = await counts(true);
    expect(viaFetch.requests + viaFetch.responses).toBeGreaterThan(0);
  });
});
