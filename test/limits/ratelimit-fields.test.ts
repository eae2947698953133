/**
 * The RateLimit fields on every answer of a limited route
 * (docs/protocol.md#ratelimit-fields): an authenticated request to
 * `GET /merchant/users` holds one of the merchant's listing slots
 * (`merchantConcurrency`), and its answer, whatever it is, says the policy
 * and how many slots are left; the 429 of the slots names them with r=0, and
 * a 429 of another limit (fair sharing) lists both. Through `api.fetch` and a
 * real Node server (its direct path).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { serve, type Served } from '../../adapters/node.js';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import type { Storage } from '../../src/storage/contract.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { basic, call, ORIGIN } from '../support/api.js';
import { sendRaw } from '../support/http-client.js';
import { contractSeed } from '../support/seeds.js';

const M1 = basic('m1', 'key-one');
const POLICY = (q: number) => `"listings";q=${q};qu="concurrent-requests"`;

/** A handler whose listings of m1 wait in the storage while `hold` is on, until `release`. */
function gatedApi(merchantConcurrency: number) {
  const inner = new MemoryStorage(contractSeed());
  let open!: () => void;
  let gate = new Promise<void>((resolve) => (open = resolve));
  const state = { hold: false, waiting: 0 };
  const storage: Storage = Object.assign(Object.create(inner), {
    listUsers: async (query: Parameters<Storage['listUsers']>[0]) => {
      if (query.merchantId === 'm1' && state.hold) {
        state.waiting++;
        await gate;
      }
      return inner.listUsers(query);
    },
    getMerchant: (id: string) => inner.getMerchant(id),
    getUser: (merchantId: string, sharedUserId: string) => inner.getUser(merchantId, sharedUserId),
  });
  const api = createMerchantApi({ storage, logger: silentLogger, tracing: false, accessLog: false, merchantConcurrency });
  return {
    api,
    state,
    release: () => {
      open();
      gate = new Promise<void>((resolve) => (open = resolve));
    },
  };
}

const fields = (response: Response) => [response.status, response.headers.get('ratelimit-policy'), response.headers.get('ratelimit')];

describe('RateLimit fields of the listing slots', () => {
  it('every answer of an authenticated listing: page, stream, HEAD, 304, a 400; the slots left while it runs', async () => {
    const { api } = gatedApi(4);
    const get = (query: string, headers: Record<string, string> = {}, method = 'GET') => call(api, `${ORIGIN}/merchant/users${query}`, { method, headers: { ...M1, ...headers } });
    const page = await get('?limit=2');
    expect(fields(page.response)).toEqual([200, POLICY(4), '"listings";r=3']);
    expect(fields((await get('')).response)).toEqual([200, POLICY(4), '"listings";r=3']);
    expect(fields((await get('?limit=2', {}, 'HEAD')).response)).toEqual([200, POLICY(4), '"listings";r=3']);
    expect(fields((await get('?limit=2', { 'if-none-match': page.response.headers.get('etag')! })).response)).toEqual([304, POLICY(4), '"listings";r=3']);
    expect(fields((await get('?limit=0')).response)).toEqual([400, POLICY(4), '"listings";r=3']);
  });

  it('counts the listings running: r falls to 0, the next is the 429 of the slots, and r comes back as they end', async () => {
    const { api, state, release } = gatedApi(3);
    const list = () => api.fetch(new Request(`${ORIGIN}/merchant/users?limit=1`, { headers: M1 }));
    state.hold = true;
    const running = [list(), list()];
    await vi.waitFor(() => expect(state.waiting).toBe(2));
    state.hold = false;
    expect(fields(await list())).toEqual([200, POLICY(3), '"listings";r=0']);
    state.hold = true;
    running.push(list());
    await vi.waitFor(() => expect(state.waiting).toBe(3));
    state.hold = false;
    const refused = await list();
    expect(fields(refused)).toEqual([429, POLICY(3), '"listings";r=0;t=1']);
    expect(refused.headers.get('retry-after')).toBe('1');
    // Another merchant's slots are its own.
    expect(fields(await api.fetch(new Request(`${ORIGIN}/merchant/users?limit=1`, { headers: basic('m2', 'key-two') })))).toEqual([200, POLICY(3), '"listings";r=2']);
    release();
    // Each answer says the slots left when it took its own: 2 and 1 for the first two, 0 for the third.
    expect((await Promise.all(running)).map(fields)).toEqual([
      [200, POLICY(3), '"listings";r=2'],
      [200, POLICY(3), '"listings";r=1'],
      [200, POLICY(3), '"listings";r=0'],
    ]);
    expect(fields(await list())).toEqual([200, POLICY(3), '"listings";r=2']);
  });

  it('a request not authenticated, and a route without the limit, say nothing of it', async () => {
    const { api } = gatedApi(4);
    const unauthenticated = await call(api, `${ORIGIN}/merchant/users?limit=1`, { headers: basic('m1', 'wrong') });
    expect(fields(unauthenticated.response)).toEqual([401, null, null]);
    const one = await call(api, `${ORIGIN}/merchant/users/a-001`, { headers: M1 });
    expect(fields(one.response)).toEqual([200, null, null]);
  });
});

describe('on a real Node server', () => {
  let served: Served;
  beforeAll(async () => {
    served = await serve(gatedApi(4).api, { port: 0, hostname: '127.0.0.1' });
  });
  afterAll(() => served?.close());

  it('a page and the streamed list carry the fields on the wire', async () => {
    const port = Number(new URL(served.url).port);
    for (const target of ['/merchant/users?limit=1', '/merchant/users']) {
      const answer = await sendRaw(port, `GET ${target} HTTP/1.1\r\nHost: api.test\r\nAuthorization: ${M1.authorization}\r\nConnection: close\r\n\r\n`);
      expect([target, answer.status, answer.headers['ratelimit-policy'], answer.headers.ratelimit]).toEqual([target, 200, POLICY(4), '"listings";r=3']);
    }
  });
});
