/** docs/protocol.md#endpoints and #failures: routing, health, the OpenAPI document and failures. */
import { describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import type { Storage } from '../../src/storage/contract.js';
import { basic, call, ORIGIN, signedUrl, testApi } from '../support/api.js';
import { contractSeed } from '../support/seeds.js';
import { within } from '../support/within.js';
import { recordingLogger } from '../support/recording.js';

describe('routing', () => {
  it('404 not_found in the envelope for an unknown path, never HTML', async () => {
    const { api } = testApi();
    for (const path of ['/', '/nope', '/validatesignature/', '/merchant', '/merchant/users/a/b', '/healthz/x']) {
      const { status, body, response } = await call(api, ORIGIN + path);
      expect(status).toBe(404);
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(body).toEqual({ status: 'error', data: [], errors: [{ code: 'not_found', message: 'No such endpoint.' }] });
    }
  });

  it('405 with Allow on every known path for other methods', async () => {
    const { api } = testApi();
    for (const path of ['/merchant/users', '/merchant/users/a-001', '/healthz', '/readyz', '/openapi.json']) {
      for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
        const { status, response } = await call(api, ORIGIN + path, { method });
        expect(status).toBe(405);
        expect(response.headers.get('allow')).toBe('GET, HEAD');
      }
    }
  });

  it('serves everything under basePath and, for a path as the client sent it, nothing outside it', async () => {
    const { api } = testApi({ basePath: '/merchant-api' });
    const asSent = { pathAsSent: true };
    expect((await call(api, `${ORIGIN}/merchant-api/healthz`, {}, asSent)).status).toBe(200);
    expect((await call(api, `${ORIGIN}/merchant-api/merchant/users`, { headers: basic('m1', 'key-one') }, asSent)).status).toBe(200);
    expect((await call(api, `${ORIGIN}/healthz`, {}, asSent)).status).toBe(404);
    expect((await call(api, `${ORIGIN}/merchant-apix/healthz`, {}, asSent)).status).toBe(404);
    expect((await call(api, `${ORIGIN}/merchant-api`, {}, asSent)).status).toBe(404);
  });

  it('takes a path outside basePath as one a host stripped the prefix from (Hono mount), unless told it is as sent', async () => {
    const { api } = testApi({ basePath: '/merchant-api' });
    expect((await call(api, `${ORIGIN}/healthz`)).status).toBe(200);
    expect((await call(api, `${ORIGIN}/merchant/users`, { headers: basic('m1', 'key-one') })).status).toBe(200);
    expect((await call(api, `${ORIGIN}/nowhere`)).status).toBe(404);
  });

  it('rejects a basePath that is not a path', () => {
    expect(() => testApi({ basePath: 'api' })).toThrow(/basePath/);
    expect(() => createMerchantApi({} as never)).toThrow(/storage/);
  });
});

describe('health and the OpenAPI document', () => {
  it('/healthz and /readyz answer {"status":"ok"}', async () => {
    const { api } = testApi();
    for (const path of ['/healthz', '/readyz']) {
      const { status, text, response } = await call(api, ORIGIN + path);
      expect(status).toBe(200);
      expect(text).toBe('{"status":"ok"}');
      expect(response.headers.get('cache-control')).toBe('no-store');
    }
  });

  it('/openapi.json is an OpenAPI 3.1 document of every endpoint, with the basePath as server', async () => {
    const { api } = testApi({ basePath: '/mapi' });
    const { status, body } = await call(api, `${ORIGIN}/mapi/openapi.json`);
    expect(status).toBe(200);
    expect(body.openapi).toBe('3.1.0');
    expect(body.servers).toEqual([{ url: '/mapi' }]);
    expect(Object.keys(body.paths).sort()).toEqual([
      '/healthz',
      '/merchant/keys',
      '/merchant/keys/{key_id}',
      '/merchant/keys/{key_id}/rotate',
      '/merchant/test/events',
      '/merchant/test/reset',
      '/merchant/users',
      '/merchant/users/{shared_user_id}',
      '/merchant/webhooks',
      '/merchant/webhooks/{id}',
      '/merchant/webhooks/{id}/deliveries',
      '/merchant/webhooks/{id}/redeliver',
      '/merchant/webhooks/{id}/rotate-secret',
      '/merchant/webhooks/{id}/test',
      '/openapi.json',
      '/readyz',
      '/validatesignature',
    ]);
    expect(body.components.schemas.User.required).toHaveLength(14);
    for (const path of Object.values(body.paths) as Record<string, { responses: Record<string, unknown> }>[]) {
      for (const operation of Object.values(path).filter((o) => typeof o === 'object')) expect(Object.keys(operation.responses).some((s) => s.startsWith('2'))).toBe(true);
    }
  });
});

/** A storage whose calls can be made to hang or fail, to stand for a database that went away. */
function flakyStorage() {
  const inner = new MemoryStorage(contractSeed());
  const state = { mode: 'ok' as 'ok' | 'hang' | 'fail', calls: 0 };
  const wrap =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      state.calls++;
      if (state.mode === 'hang') return new Promise<R>(() => {});
      if (state.mode === 'fail') throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:3306 for user "secret"'), { code: 'ECONNREFUSED' });
      return fn(...args);
    };
  const storage: Storage = {
    getMerchant: wrap((id) => inner.getMerchant(id)),
    recordSalt: wrap((r) => inner.recordSalt(r)),
    listUsers: wrap((q) => inner.listUsers(q)),
    getUser: wrap((m, u) => inner.getUser(m, u)),
    ping: wrap(() => inner.ping()),
    listKeys: wrap((m: string) => inner.listKeys(m)),
    close: () => inner.close(),
  };
  return { storage, state };
}

describe('a failing storage', () => {
  it('503 in each endpoint\'s shape within the storage timeout, then recovers with no restart', async () => {
    const { storage, state } = flakyStorage();
    const { logger } = recordingLogger();
    const api = createMerchantApi({ storage, storageTimeout: 100, logger, now: () => 1_700_000_000_000 });
    // A hanging storage call ends only at the storage timeout, so the bound is the behaviour: each
    // answer within 20x the timeout, which a loaded machine meets and a call left hanging never does.
    const answered = (what: string, url: string, init?: RequestInit) => within(call(api, url, init), 2_000, `${state.mode}: ${what}`);
    for (const mode of ['hang', 'fail'] as const) {
      state.mode = mode;
      const sig = await answered('/validatesignature', signedUrl());
      expect(sig.status).toBe(503);
      expect(sig.body).toEqual({ status: 'error', message: 'The storage is unavailable; try again shortly.', is_valid: false });
      const users = await answered('/merchant/users', `${ORIGIN}/merchant/users`, { headers: basic('m1', 'key-one') });
      expect(users.status).toBe(503);
      expect(users.body).toEqual({ status: 'error', data: [], errors: [{ code: 'storage_unavailable', message: 'The storage is unavailable; try again shortly.' }] });
      expect(users.response.headers.get('retry-after')).toBe('1');
      expect((await answered('/merchant/users/a-001', `${ORIGIN}/merchant/users/a-001`, { headers: basic('m1', 'key-one') })).status).toBe(503);
      expect((await answered('/readyz', `${ORIGIN}/readyz`)).status).toBe(503);
      expect((await answered('/healthz', `${ORIGIN}/healthz`)).status).toBe(200);
    }
    state.mode = 'ok';
    expect((await call(api, signedUrl())).status).toBe(200);
    expect((await call(api, `${ORIGIN}/readyz`)).status).toBe(200);
  });

  it('503 when the salt cannot be recorded, after the merchant was read', async () => {
    const { storage, state } = flakyStorage();
    const api = createMerchantApi({ storage, storageTimeout: 100, logger: recordingLogger().logger, now: () => 1_700_000_000_000 });
    const original = storage.recordSalt;
    storage.recordSalt = async (r) => {
      state.mode = 'fail';
      try {
        return await original(r);
      } finally {
        state.mode = 'ok';
      }
    };
    expect((await call(api, signedUrl())).status).toBe(503);
  });

  it('logs the failure by code only: no key, credential, salt or message text', async () => {
    const { storage, state } = flakyStorage();
    const { logger, lines } = recordingLogger();
    const api = createMerchantApi({ storage, storageTimeout: 100, logger, now: () => 1_700_000_000_000 });
    state.mode = 'fail';
    await call(api, signedUrl({ salt: 'my-salt-value' }));
    await call(api, `${ORIGIN}/merchant/users`, { headers: basic('m1', 'key-one') });
    const failures = lines.filter((line) => line.event === 'storage_unavailable');
    expect(failures.map((line) => line.operation)).toEqual(['getMerchant', 'getMerchant']);
    for (const line of failures) expect(line).toMatchObject({ level: 'error', error: 'Error', code: 'ECONNREFUSED' });
    expect(lines.length).toBe(4); // and one access line per request
    for (const line of lines) expect(JSON.stringify(line)).not.toMatch(/key-one|my-salt-value|secret|m1|127\.0\.0\.1/);
  });

  it('aborts a streaming list that fails midway, rather than ending it as valid JSON', async () => {
    const { storage, state } = flakyStorage();
    const api = createMerchantApi({ storage, storageTimeout: 100, streamBatchSize: 2, logger: recordingLogger().logger });
    const response = await api.fetch(new Request(`${ORIGIN}/merchant/users`, { headers: basic('m1', 'key-one') }));
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    await reader.read();
    state.mode = 'fail';
    await expect((async () => { for (;;) if ((await reader.read()).done) return; })()).rejects.toBeDefined();
  });
});

describe('unexpected errors', () => {
  it('500 with the envelope and nothing of the internals', async () => {
    const inner = new MemoryStorage(contractSeed());
    const storage: Storage = Object.assign(Object.create(inner), {
      getMerchant: (id: string) => inner.getMerchant(id),
      getUser: async () => ({ shared_user_id: 1n }) as never,
    });
    const { logger, lines } = recordingLogger();
    const api = createMerchantApi({ storage, logger });
    const { status, text } = await call(api, `${ORIGIN}/merchant/users/a-001`, { headers: basic('m1', 'key-one') });
    expect(status).toBe(500);
    expect(text).toBe('{"status":"error","data":[],"errors":[{"code":"internal_error","message":"Internal server error."}]}');
    const events = lines.filter((line) => line.event !== 'request');
    expect(events).toEqual([{ level: 'error', event: 'unexpected_error', request_id: expect.any(String), route: '/merchant/users/{shared_user_id}', error: 'TypeError' }]);
  });
});
