/**
 * Every error answer says `Cache-Control: no-store` (docs/protocol.md#errors), checked in process:
 * the handler through `Request` objects (`api.fetch`) and through the Node adapter's direct entry
 * (the same pipeline, which writes its headers itself), for every status the handler answers:
 * each one produced the way a client or a failing storage produces it, and the refusals an adapter
 * hands to the pipeline (408, 417, 431, a connection cap's 429) as the adapters hand them. The
 * statuses are read from src/errors.ts, so a new one fails here until it has its row. Until this
 * suite, only the suites of the built server (test/suites/http-conformance.ts) saw the header on
 * errors.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EXPECTATION_FAILED } from '../../adapters/expectation.js';
import { createMerchantApi, type MerchantApi, type MerchantApiOptions } from '../../src/api.js';
import { MerchantApiError, StorageUnavailableError } from '../../src/errors.js';
import type { RequestInfo } from '../../src/http/context.js';
import { MAX_JSON_BODY_BYTES } from '../../src/http/json-body.js';
import { MAX_QUERY_LENGTH } from '../../src/http/query.js';
import { silentLogger } from '../../src/observe/logger.js';
import { DIRECT_ENTRY, type Pipeline } from '../../src/pipeline/pipeline.js';
import type { Storage } from '../../src/storage/contract.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { basic, ORIGIN, signedUrl, testApi } from '../support/api.js';
import { ROOT } from '../support/processes.js';
import { contractSeed } from '../support/seeds.js';

const M1 = basic('m1', 'key-one');
const json = (body: unknown, headers: Record<string, string> = {}): RequestInit => ({ method: 'POST', headers: { ...M1, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

/** A storage of its own without the optional webhook operations, each call answered by `answer`. */
function plainStorage(answer: (call: () => Promise<unknown>) => Promise<unknown> = (call) => call()): Storage {
  const inner = new MemoryStorage(contractSeed());
  return {
    getMerchant: (id) => answer(() => inner.getMerchant(id)) as never,
    recordSalt: (record) => answer(() => inner.recordSalt(record)) as never,
    listUsers: (query) => answer(() => inner.listUsers(query)) as never,
    getUser: (merchant, user) => answer(() => inner.getUser(merchant, user)) as never,
    listKeys: (merchant) => answer(() => inner.listKeys(merchant)) as never,
    ping: () => inner.ping(),
    close: () => inner.close(),
  };
}
const failing = (error: unknown) => plainStorage(() => Promise.reject(error));

/** A storage that has pruned removals, so a change feed from before them is 410 `gone`. */
function prunedRemovals(): Storage {
  const storage = plainStorage();
  const listUsers = storage.listUsers.bind(storage);
  storage.listUsers = async (query) => Object.assign(await listUsers(query), { removals: [], removalsPrunedThrough: '2024-01-01T00:00:00.000000+00:00' });
  return storage;
}

interface Case {
  status: number;
  what: string;
  /** The handler, its options beside the memory storage of the contract seed. */
  options?: Partial<MerchantApiOptions>;
  /** A request sent first on the same handler (a first endpoint, a first failure). */
  before?: () => [string, RequestInit?, RequestInfo?];
  /** The request; `method` is HEAD for the direct entry's HEAD (a signature is signed with it). */
  request: (method?: 'GET' | 'HEAD') => [string, RequestInit?, RequestInfo?];
}

const webhooks = { allowPrivate: true, allowHttp: true, maxEndpointsPerMerchant: 1 };
const address = { clientAddress: '192.0.2.7' };

const CASES: Case[] = [
  { status: 400, what: 'a signature that does not match', request: (method) => [signedUrl({ key: 'wrong', method })] },
  { status: 400, what: 'a bad parameter (envelope)', request: () => [`${ORIGIN}/merchant/users?limit=abc`, { headers: M1 }] },
  { status: 400, what: 'malformed JSON', options: { webhooks }, request: () => [`${ORIGIN}/merchant/webhooks`, { ...json({}), body: '{' }] },
  { status: 401, what: 'no credentials', request: () => [`${ORIGIN}/merchant/users`] },
  { status: 403, what: 'a disabled merchant', request: () => [`${ORIGIN}/merchant/users`, { headers: basic('off', 'key-off') }] },
  { status: 403, what: 'a key outside its networks', request: () => [`${ORIGIN}/merchant/users`, { headers: basic('keyed', 'limited-key-2') }, address] },
  { status: 404, what: 'an unknown path', request: () => [`${ORIGIN}/nowhere`] },
  { status: 404, what: 'an unknown user', request: () => [`${ORIGIN}/merchant/users/no-such-user`, { headers: M1 }] },
  { status: 405, what: 'POST to /validatesignature', request: () => [signedUrl(), { method: 'POST' }] },
  { status: 405, what: 'DELETE of the users', request: () => [`${ORIGIN}/merchant/users`, { method: 'DELETE', headers: M1 }] },
  { status: 408, what: 'a request too slow to arrive (the Node adapter\'s refusal)', request: () => [`${ORIGIN}/`, {}, { refusal: new MerchantApiError('request_timeout', 'The request took too long to arrive.') }] },
  {
    status: 409,
    what: 'an endpoint more than the merchant may have',
    options: { webhooks },
    before: () => [`${ORIGIN}/merchant/webhooks`, json({ url: 'http://127.0.0.1:9/first' })],
    request: () => [`${ORIGIN}/merchant/webhooks`, json({ url: 'http://127.0.0.1:9/second' })],
  },
  { status: 410, what: 'a change feed from before removals no longer kept', options: { storage: prunedRemovals() }, request: () => [`${ORIGIN}/merchant/users?include_removed=true&updated_since=2020-01-01`, { headers: M1 }] },
  {
    status: 422,
    what: 'an Idempotency-Key used for another request',
    options: { webhooks },
    before: () => [`${ORIGIN}/merchant/webhooks`, json({ url: 'http://127.0.0.1:9/first' }, { 'idempotency-key': 'k-422' })],
    request: () => [`${ORIGIN}/merchant/webhooks`, json({ url: 'http://127.0.0.1:9/other' }, { 'idempotency-key': 'k-422' })],
  },
  { status: 413, what: 'a JSON body too large', options: { webhooks }, request: () => [`${ORIGIN}/merchant/webhooks`, json({ url: `http://127.0.0.1:9/${'x'.repeat(MAX_JSON_BODY_BYTES)}` })] },
  { status: 414, what: 'a query string too long', request: () => [`${ORIGIN}/merchant/users?limit=1&x=${'y'.repeat(MAX_QUERY_LENGTH)}`, { headers: M1 }] },
  { status: 415, what: 'a body that is not JSON', options: { webhooks }, request: () => [`${ORIGIN}/merchant/webhooks`, { ...json({ url: 'http://127.0.0.1:9/x' }), headers: { ...M1, 'content-type': 'text/plain' } }] },
  { status: 417, what: 'an expectation other than 100-continue (the adapters\' refusal)', request: () => [`${ORIGIN}/merchant/users`, { headers: M1 }, { refusal: EXPECTATION_FAILED }] },
  {
    status: 429,
    what: 'the failed-authentication throttle',
    options: { throttle: { pairFailures: 1, pairBlockSeconds: 60 } },
    before: () => [`${ORIGIN}/merchant/users`, { headers: basic('m1', 'wrong') }, address],
    request: () => [`${ORIGIN}/merchant/users`, { headers: basic('m1', 'wrong') }, address],
  },
  {
    status: 429,
    what: 'a connection cap (the Node adapter\'s refusal)',
    request: () => [`${ORIGIN}/merchant/users`, {}, { refusal: new MerchantApiError('too_many_requests', 'The server has too many connections at once; retry later.', { retryAfter: 1 }), connectionLimit: 'connections' }],
  },
  { status: 431, what: 'headers too large (the Node adapter\'s refusal)', request: () => [`${ORIGIN}/`, {}, { refusal: new MerchantApiError('headers_too_large', 'The request headers are too large.') }] },
  { status: 500, what: 'a hook that throws', options: { hooks: { onRequest: () => { throw new Error('a bug'); } } }, request: () => [`${ORIGIN}/merchant/users`, { headers: M1 }] },
  { status: 500, what: 'the same on /validatesignature', options: { hooks: { onAuthenticated: () => { throw new TypeError('a bug'); } } }, request: (method) => [signedUrl({ method })] },
  { status: 501, what: 'webhooks on a storage that keeps none', options: { storage: plainStorage() }, request: () => [`${ORIGIN}/merchant/webhooks`, { headers: M1 }] },
  { status: 503, what: 'the storage unavailable', options: { storage: failing(new StorageUnavailableError('down')) }, request: () => [`${ORIGIN}/merchant/users`, { headers: M1 }] },
  { status: 503, what: 'the same on /validatesignature', options: { storage: failing(new StorageUnavailableError('down')) }, request: (method) => [signedUrl({ method })] },
];

/** The statuses of src/errors.ts's `statusByCode`: every status the handler's errors answer. */
function documentedStatuses(): number[] {
  const source = readFileSync(`${ROOT}src/errors.ts`, 'utf8');
  const table = /const statusByCode[^{]*\{([^}]*)\}/.exec(source)?.[1];
  if (!table) throw new Error('no statusByCode in src/errors.ts');
  return [...new Set([...table.matchAll(/:\s*(\d{3})/g)].map((m) => Number(m[1])))].sort();
}

function apiFor(c: Case): MerchantApi {
  return c.options?.storage ? createMerchantApi({ logger: silentLogger, throttle: false, ...c.options, storage: c.options.storage }) : testApi({ throttle: false, ...c.options }).api;
}

/** The direct entry's answer, from a head made of the `Request` (as adapters/node-direct.ts makes one of Node's request). */
async function direct(api: MerchantApi, request: Request, info?: RequestInfo) {
  const entry = (api as unknown as { [DIRECT_ENTRY]: Pipeline['direct'] })[DIRECT_ENTRY];
  const answer = await entry({ method: request.method, url: request.url, header: (name) => request.headers.get(name), request: () => request }, info);
  return answer instanceof Response ? { status: answer.status, cacheControl: answer.headers.get('cache-control') } : { status: answer.status, cacheControl: answer.headers['cache-control'] };
}

describe('Cache-Control: no-store on every error answer, in process', () => {
  it('has a case for every status of src/errors.ts', () => {
    expect([...new Set(CASES.map((c) => c.status))].sort()).toEqual(documentedStatuses());
  });

  for (const c of CASES) {
    it(`${c.status}: ${c.what}`, async () => {
      const api = apiFor(c);
      if (c.before) {
        const [url, init, info] = c.before();
        await (await api.fetch(new Request(url, init), info)).text();
      }
      const [url, init, info] = c.request();
      const response = await api.fetch(new Request(url, init), info);
      const body = await response.text();
      expect(response.status, body).toBe(c.status);
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(response.headers.get('content-type')).toBe('application/json');
      const method = init?.method ?? 'GET';
      if (method === 'GET') {
        // The direct entry (GET and HEAD only), for GET and for HEAD; a fresh handler where a first request set it up.
        for (const head of [false, true]) {
          const fresh = c.before ? apiFor(c) : api;
          if (c.before) {
            const [beforeUrl, beforeInit, beforeInfo] = c.before();
            await (await fresh.fetch(new Request(beforeUrl, beforeInit), beforeInfo)).text();
          }
          const [again, againInit, againInfo] = c.request(head ? 'HEAD' : 'GET');
          const answer = await direct(fresh, new Request(again, { ...againInit, method: head ? 'HEAD' : 'GET' }), againInfo);
          expect(answer, head ? 'HEAD' : 'GET').toEqual({ status: c.status, cacheControl: 'no-store' });
        }
      }
    });
  }
});
