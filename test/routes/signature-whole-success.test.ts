/**
 * Only a whole success is a success (docs/security.md#only-a-whole-success-is-a-success):
 * a signed request whose signature verifies but whose `ts` is outside the
 * window, or whose salt was already used, is a failure for the
 * failed-authentication throttle (never a reset of the count), is not
 * admitted to the merchant's fair share (no `afterAuthentication`, no
 * `onAuthenticated`, no `ctx.merchantId`, so nothing charged to the merchant),
 * and a request refused on its `ts` writes nothing (no `recordSalt`).
 * The 400 answers keep their bytes. Through api.fetch with the client address
 * an adapter passes; the same attack over HTTP on Node, Bun and Deno is in
 * test/adapters/replay-throttle.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createMerchantApi, type MerchantApiOptions } from '../../src/api.js';
import type { RequestContext } from '../../src/http/context.js';
import { silentLogger } from '../../src/observe/logger.js';
import type { Storage } from '../../src/storage/contract.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { basic, NOW, NOW_MS, ORIGIN, signedUrl } from '../support/api.js';
import { contractSeed } from '../support/seeds.js';
import { sleep } from '../support/sleep.js';

const ADDRESS = '203.0.113.7';
const EXPIRED_TEXT = '{"status":"error","message":"Invalid timestamp: ts is outside the accepted window of 300 seconds from the server\'s time.","is_valid":false}';
const REPLAYED_TEXT = '{"status":"error","message":"This salt was already used: every request needs a new salt.","is_valid":false}';
const NOT_WHOLE_TEXT = '{"status":"error","message":"Invalid timestamp: ts must be a Unix time in whole seconds.","is_valid":false}';

/** The storage with its `recordSalt` calls counted. */
function countingSalts(inner: MemoryStorage): { storage: Storage; recorded: () => number } {
  let recorded = 0;
  const storage = new Proxy(inner, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (name === 'recordSalt') recorded++;
        return value.apply(target, args);
      };
    },
  });
  return { storage, recorded: () => recorded };
}

function api(options: Partial<MerchantApiOptions> = {}) {
  const { storage, recorded } = countingSalts(new MemoryStorage(contractSeed()));
  const authenticated: (string | undefined)[] = [];
  const finished: { status: number; merchantId: string | undefined; authFailure: string | undefined }[] = [];
  const handler = createMerchantApi({
    storage,
    now: () => NOW_MS,
    logger: silentLogger,
    tracing: false,
    tarpit: false,
    hooks: {
      onAuthenticated: (ctx: RequestContext) => void authenticated.push(ctx.merchantId),
      onFinish: (ctx, summary) => void finished.push({ status: summary.status, merchantId: ctx.merchantId, authFailure: ctx.authFailure }),
    },
    ...options,
  });
  const call = async (url: string, headers: Record<string, string> = {}) => {
    const response = await handler.fetch(new Request(url.startsWith('http') ? url : `${ORIGIN}${url}`, { headers }), { clientAddress: ADDRESS });
    return { status: response.status, text: await response.text() };
  };
  return { call, recorded, authenticated, finished };
}

describe('a captured URL is a failure, never a success', () => {
  const captured = {
    expired: () => signedUrl({ ts: NOW - 301 }),
    'ahead of the window': () => signedUrl({ ts: NOW + 301 }),
    'not in whole seconds': () => signedUrl({ ts: `${NOW}.5` }),
  } as const;

  for (const [kind, url] of Object.entries(captured)) {
    it(`${kind}: does not reset the count of wrong keys; it counts as one, so the 10th wrong check is refused`, async () => {
      const { call } = api();
      for (let i = 0; i < 9; i++) expect((await call(signedUrl({ key: `wrong-${i}` }))).status).toBe(400);
      const old = await call(url());
      expect(old.text).toBe(kind === 'not in whole seconds' ? NOT_WHOLE_TEXT : EXPIRED_TEXT);
      expect((await call(signedUrl({ key: 'wrong-9' }))).status).toBe(429);
    });
  }

  it('an already-used URL: does not reset the count of wrong Basic keys; it counts as one', async () => {
    const { call } = api();
    const used = signedUrl();
    expect((await call(used)).status).toBe(200);
    for (let i = 0; i < 9; i++) expect((await call('/merchant/users/a-001', basic('m1', `wrong-${i}`))).status).toBe(401);
    expect(await call(used)).toEqual({ status: 400, text: REPLAYED_TEXT });
    expect((await call('/merchant/users/a-001', basic('m1', 'wrong-9'))).status).toBe(429);
  });

  it('replayed or expired URLs alone block the pair after 10, as wrong keys do', async () => {
    const { call } = api();
    const used = signedUrl();
    expect((await call(used)).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await call(used)).status).toBe(400);
    for (let i = 0; i < 5; i++) expect((await call(signedUrl({ ts: NOW - 1000 }))).status).toBe(400);
    expect((await call(signedUrl())).status).toBe(429);
  });

  it('a whole success still resets the count', async () => {
    const { call } = api();
    for (let i = 0; i < 9; i++) expect((await call(signedUrl({ key: `wrong-${i}` }))).status).toBe(400);
    expect((await call(signedUrl())).status).toBe(200);
    for (let i = 0; i < 9; i++) expect((await call(signedUrl({ key: `again-${i}` }))).status).toBe(400);
    expect((await call(signedUrl())).status).toBe(200);
  });
});

describe('a captured URL is not admitted to the merchant', () => {
  it('runs no onAuthenticated hook for a URL refused on its ts, and finishes any refused URL without a merchant, noting why', async () => {
    const { call, authenticated, finished } = api();
    const used = signedUrl();
    expect((await call(used)).status).toBe(200);
    expect(authenticated).toEqual(['m1']);
    expect(finished.at(-1)).toEqual({ status: 200, merchantId: 'm1', authFailure: undefined });

    expect((await call(signedUrl({ ts: NOW - 301 }))).status).toBe(400);
    expect(finished.at(-1)).toEqual({ status: 400, merchantId: undefined, authFailure: 'bad_timestamp' });
    expect((await call(signedUrl({ ts: 'soon' }))).status).toBe(400);
    expect(finished.at(-1)).toEqual({ status: 400, merchantId: undefined, authFailure: 'bad_timestamp' });
    expect(authenticated).toEqual(['m1']);

    // A replay inside the window passes the hooks (they run before the salt is recorded, so that their
    // refusal does not spend a URL the client may send again), then is refused and is not the merchant's.
    expect((await call(used)).status).toBe(400);
    expect(finished.at(-1)).toEqual({ status: 400, merchantId: undefined, authFailure: 'replayed_salt' });
  });

  it('a hook that refuses does not spend the salt: the same URL is served after it', async () => {
    let refuse = true;
    const { call } = api({ hooks: { onAuthenticated: () => (refuse ? new Response(null, { status: 429 }) : undefined) } });
    const url = signedUrl();
    expect((await call(url)).status).toBe(429);
    refuse = false;
    expect((await call(url)).status).toBe(200);
  });

  it('with the memory storage, a ts from before it started is refused and not a success, but not the caller\'s failure either (the server restarted)', async () => {
    const { call, finished, authenticated } = api({ storage: new MemoryStorage(contractSeed(), { startedAt: NOW + 10 }) });
    expect((await call(signedUrl())).status).toBe(400);
    expect(finished.at(-1)).toMatchObject({ merchantId: undefined, authFailure: undefined });
    // The storage tells it only as it records the salt, after the hooks.
    expect(authenticated).toEqual(['m1']);
  });

  for (const kind of ['expired', 'already used'] as const) it(`fair share: an attacker replaying an ${kind} URL on several connections of a busy instance spends none of the merchant's share`, async () => {
    // A process that used a whole core since the last sample, every sample: always busy.
    let micros = 0;
    const { storage } = countingSalts(new MemoryStorage(contractSeed()));
    const handler = createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, tracing: false, tarpit: false, throttle: false, fairShare: { cpuTime: () => (micros += 1_000_000) } });
    const from = (clientPort: number, url: string, headers: Record<string, string> = {}) =>
      handler.fetch(new Request(url, { headers }), { clientAddress: ADDRESS, clientPort }).then(async (response) => {
        await response.text();
        return response.status;
      });
    const captured = kind === 'expired' ? signedUrl({ ts: NOW - 1000 }) : signedUrl();
    if (kind === 'already used') expect(await from(40_001, captured)).toBe(200);
    const statuses: number[] = [];
    // The attacker on four kept-alive connections, another merchant now and then, for at least 15 CPU samples.
    const started = performance.now();
    for (let i = 0; i < 600 || performance.now() - started < 1600; i++) {
      statuses.push(await from(50_000 + (i % 4), captured));
      if (i % 20 === 0) expect(await from(40_000, `${ORIGIN}/merchant/users/a-001`, basic('m2', 'key-two'))).toBe(200);
      if (i % 50 === 0) await sleep(1);
    }
    // Refused as a replay every time, never as over the merchant's share: it was never charged to m1.
    expect(new Set(statuses)).toEqual(new Set([400]));
    // The merchant itself, on several connections of its own, is served.
    for (let i = 0; i < 20; i++) expect(await from(60_000 + (i % 4), signedUrl())).toBe(200);
  });
});

describe('a request refused on its ts writes nothing', () => {
  it('records no salt for a ts outside the window or not in whole seconds; records one for a whole success and a replay', async () => {
    const { call, recorded } = api({ throttle: false });
    for (const ts of [NOW - 301, NOW + 301, NOW - 100_000, `${NOW}.0`, '-0', 'x'] as const) expect((await call(signedUrl({ ts }))).status).toBe(400);
    expect(recorded()).toBe(0);
    const url = signedUrl();
    expect((await call(url)).status).toBe(200);
    expect((await call(url)).status).toBe(400);
    expect(recorded()).toBe(2);
  });
});
