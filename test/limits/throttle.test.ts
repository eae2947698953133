/**
 * Throttling of failed authentication and fair sharing between merchants,
 * through api.fetch with the client address an adapter passes
 * (docs/security.md#throttling).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createMerchantApi, type MerchantApiOptions } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import type { Storage } from '../../src/storage/contract.js';
import { FailureThrottle } from '../../src/limits/throttle.js';
import { DEFAULTS } from '../../src/defaults.js';
import { basic, NOW_MS, ORIGIN, signedUrl } from '../support/api.js';
import { contractSeed } from '../support/seeds.js';
import { sleep } from '../support/sleep.js';

function counted(inner: Storage) {
  const calls: string[] = [];
  const storage = new Proxy(inner, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.push(String(name));
        return value.apply(target, args);
      };
    },
  });
  return { storage, calls };
}

function throttledApi(options: Partial<MerchantApiOptions> = {}) {
  let now = NOW_MS;
  const { storage, calls } = counted(new MemoryStorage(contractSeed()));
  const api = createMerchantApi({ storage, now: () => now, logger: silentLogger, tracing: false, ...options });
  const call = (url: string, headers: Record<string, string> = {}, address = '203.0.113.7') =>
    api.fetch(new Request(url.startsWith('http') ? url : `${ORIGIN}${url}`, { headers }), { clientAddress: address });
  return { api, calls, call, advance: (seconds: number) => (now += seconds * 1000) };
}

describe('throttling failed authentication', () => {
  it('blocks a (merchant, address) pair after 10 consecutive failures; another merchant from the address is unaffected', async () => {
    const { call } = throttledApi();
    for (let i = 0; i < 10; i++) expect((await call('/merchant/users/a-001', basic('m1', `wrong-${i}`))).status).toBe(401);
    const blocked = await call('/merchant/users/a-001', basic('m1', 'wrong-11'));
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).toBe('300');
    expect(blocked.headers.get('ratelimit-policy')).toBe('"auth-merchant";q=10;w=300');
    expect(blocked.headers.get('ratelimit')).toBe('"auth-merchant";r=0;t=300');
    expect(await blocked.json()).toEqual({
      status: 'error',
      data: [],
      errors: [{ code: 'too_many_requests', message: 'Too many failed authentications from this merchant from this address; try again in 300 seconds.' }],
    });
    expect((await call('/merchant/users', basic('m2', 'key-two'))).status).toBe(200);
    expect((await call('/merchant/users/a-001', basic('m1', 'key-one'), '198.51.100.1')).status).toBe(200);
  });

  it('refuses a blocked pair even with the right key, before any storage call, in each endpoint\'s shape', async () => {
    const { call, calls } = throttledApi();
    for (let i = 0; i < 10; i++) await call(signedUrl({ key: 'wrong-key' }));
    calls.length = 0;
    const right = await call(signedUrl());
    expect(right.status).toBe(429);
    expect(await right.json()).toEqual({ status: 'error', message: 'Too many failed authentications from this merchant from this address; try again in 300 seconds.', is_valid: false });
    expect((await call('/merchant/users', basic('m1', 'key-one'))).status).toBe(429);
    expect(calls).toEqual([]);
  });

  it('doubles each further block of a pair, up to an hour; a success resets it', async () => {
    const { call, advance } = throttledApi();
    const failTen = async () => {
      for (let i = 0; i < 10; i++) await call('/merchant/users', basic('m1', 'nope'));
    };
    const retryAfter = async () => (await call('/merchant/users', basic('m1', 'key-one'))).headers.get('retry-after');
    const blocks: (string | null)[] = [];
    for (let round = 0; round < 6; round++) {
      await failTen();
      const wait = await retryAfter();
      blocks.push(wait);
      advance(Number(wait));
    }
    expect(blocks).toEqual(['300', '600', '1200', '2400', '3600', '3600']);
    expect((await call('/merchant/users', basic('m1', 'key-one'))).status).toBe(200);
    await failTen();
    expect(await retryAfter()).toBe('300');
  });

  it('blocks an address for every merchant after 100 failures in an hour, unknown merchants included', async () => {
    const { call } = throttledApi();
    for (let i = 0; i < 100; i++) await call('/merchant/users', basic(`invented-${i}`, 'x'));
    const refused = await call('/merchant/users', basic('m2', 'key-two'));
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('3600');
    expect(refused.headers.get('ratelimit-policy')).toBe('"auth-address";q=100;w=3600');
    expect((await call('/merchant/users', basic('m2', 'key-two'), '198.51.100.2')).status).toBe(200);
    expect((await call('/healthz')).status).toBe(200);
  });

  it('keeps no entry per invented merchant id: only existing merchants get a pair', () => {
    const throttle = new FailureThrottle();
    for (let i = 0; i < 1000; i++) throttle.failed('192.0.2.9', undefined, 1000);
    expect(throttle.size).toEqual({ addresses: 1, pairs: 0 });
    for (let i = 0; i < 3; i++) throttle.failed(`192.0.2.${10 + i}`, 'real', 1000);
    expect(throttle.size).toEqual({ addresses: 4, pairs: 3 });
  });

  it('never blocks a pair for a merchant id that does not exist, however often it fails', async () => {
    const { call } = throttledApi();
    // Past the pair limit (10) with one invented id, below the address limit (100): all answered 401.
    for (let i = 0; i < 30; i++) expect((await call('/merchant/users', basic('invented', `x-${i}`))).status).toBe(401);
    for (let i = 0; i < 30; i++) expect((await call(signedUrl({ cp: 'invented' }))).status).toBe(404);
    const next = await call('/merchant/users', basic('invented', 'x'));
    expect(next.status).toBe(401);
    expect(next.headers.get('ratelimit-policy')).toBeNull();
  });

  it('forgets the oldest entries beyond maxEntries', () => {
    const throttle = new FailureThrottle({ maxEntries: 50 });
    for (let i = 0; i < 10_000; i++) throttle.failed(`10.0.${i >> 8}.${i & 255}`, 'real', 1000);
    expect(throttle.size).toEqual({ addresses: 50, pairs: 50 });
    // The newest pair kept its failure (9 more make 10: blocked); the oldest was forgotten (9 more make 9).
    for (let i = 0; i < 9; i++) throttle.failed('10.0.39.15', 'real', 1000);
    for (let i = 0; i < 9; i++) throttle.failed('10.0.0.0', 'real', 1000);
    expect(throttle.blocked('10.0.39.15', () => 'real', 1000)?.scope).toBe('pair');
    expect(throttle.blocked('10.0.0.0', () => 'real', 1000)).toBeUndefined();
  });

  it('checks its options; an option given as undefined keeps its default', () => {
    for (const name of ['pairFailures', 'pairBlockSeconds', 'pairMaxBlockSeconds', 'addressFailures', 'addressWindowSeconds', 'addressBlockSeconds', 'maxEntries']) {
      for (const value of [0, -1, 1.5, Number.NaN]) expect(() => new FailureThrottle({ [name]: value }), `${name}: ${value}`).toThrow(`throttle.${name} must be a whole number, at least 1.`);
      expect(new FailureThrottle({ [name]: 1 }).rules).toMatchObject({ [name]: 1 });
    }
    expect(new FailureThrottle({ pairFailures: undefined }).rules).toEqual(DEFAULTS.throttle);
  });

  it('counts nothing without a client address, and nothing when turned off', async () => {
    const { api } = throttledApi();
    for (let i = 0; i < 20; i++) await api.fetch(new Request(`${ORIGIN}/merchant/users`, { headers: basic('m1', 'nope') }));
    expect((await api.fetch(new Request(`${ORIGIN}/merchant/users`, { headers: basic('m1', 'key-one') }))).status).toBe(200);
    const off = throttledApi({ throttle: false });
    for (let i = 0; i < 20; i++) await off.call('/merchant/users', basic('m1', 'nope'));
    expect((await off.call('/merchant/users', basic('m1', 'key-one'))).status).toBe(200);
  });

  it('takes the client address from the nearest proxy only, with trustProxy', async () => {
    const { call } = throttledApi({ trustProxy: true });
    for (let i = 0; i < 10; i++) await call('/merchant/users', { ...basic('m1', 'nope'), 'x-forwarded-for': `${i}.1.1.1, 192.0.2.50` }, '10.0.0.1');
    // The client varied the first entry; the proxy's entry was the same each time.
    expect((await call('/merchant/users', { ...basic('m1', 'key-one'), 'x-forwarded-for': '192.0.2.50' }, '10.0.0.1')).status).toBe(429);
    expect((await call('/merchant/users', { ...basic('m1', 'key-one'), 'x-forwarded-for': '192.0.2.51' }, '10.0.0.1')).status).toBe(200);
  });

  it('starts an address window again once addressWindowSeconds have passed, not a second earlier', () => {
    const rules = { addressFailures: 3, addressWindowSeconds: 100, addressBlockSeconds: 30 };
    const reset = new FailureThrottle(rules);
    for (const t of [1000, 1050, 1100]) reset.failed('a', undefined, t);
    expect(reset.blocked('a', () => undefined, 1100)).toBeUndefined();
    const within = new FailureThrottle(rules);
    for (const t of [1000, 1050, 1099]) within.failed('a', undefined, t);
    expect(within.blocked('a', () => undefined, 1099)).toEqual({ scope: 'address', retryAfter: 30, limit: 3, window: 100 });
  });

  it('counts 100 failures of an address within the hour through the handler, and starts again after it', async () => {
    const { call, advance } = throttledApi();
    for (let i = 0; i < 99; i++) await call('/merchant/users', basic(`invented-${i}`, 'x'));
    advance(3599);
    expect((await call('/merchant/users', basic('invented', 'x'))).status).toBe(401);
    expect((await call('/merchant/users', basic('m2', 'key-two'))).status).toBe(429);
    const later = throttledApi();
    for (let i = 0; i < 99; i++) await later.call('/merchant/users', basic(`invented-${i}`, 'x'));
    later.advance(3600);
    expect((await later.call('/merchant/users', basic('invented', 'x'))).status).toBe(401);
    expect((await later.call('/merchant/users', basic('m2', 'key-two'))).status).toBe(200);
  });

  // Small limits, so that random sequences reach address blocks, their end and new windows as often as pair blocks.
  const SMALL = { pairFailures: 3, pairBlockSeconds: 10, pairMaxBlockSeconds: 50, addressFailures: 5, addressWindowSeconds: 100, addressBlockSeconds: 30 };
  for (const [name, rules, maxDt] of [
    ['the default rules', DEFAULTS.throttle, 400],
    ['small limits', SMALL, 15],
  ] as const) {
    it(`matches a model of the rules, address and pair, over random sequences of failures and successes (${name})`, () => {
      const event = fc.record({ address: fc.constantFrom('a', 'b'), merchant: fc.constantFrom('m', 'n', undefined), ok: fc.boolean(), dt: fc.integer({ min: 0, max: maxDt }) });
      let addressBlocks = 0;
      fc.assert(
        fc.property(fc.array(event, { minLength: 20, maxLength: 300, size: 'max' }), (events) => {
          const throttle = new FailureThrottle(rules);
          const pairs = new Map<string, { n: number; blocks: number; until: number }>();
          const addresses = new Map<string, { n: number; start: number; until: number }>();
          let now = 1_000_000;
          for (const e of events) {
            now += e.dt;
            const pairKey = `${e.address}/${e.merchant}`;
            const pair = pairs.get(pairKey) ?? { n: 0, blocks: 0, until: 0 };
            const address = addresses.get(e.address);
            const expected =
              address !== undefined && address.until > now
                ? { scope: 'address', retryAfter: address.until - now, limit: rules.addressFailures, window: rules.addressWindowSeconds }
                : e.merchant !== undefined && pair.until > now
                  ? { scope: 'pair', retryAfter: pair.until - now, limit: rules.pairFailures, window: rules.pairBlockSeconds }
                  : undefined;
            expect(throttle.blocked(e.address, () => e.merchant, now)).toEqual(expected);
            if (expected) continue;
            if (e.ok && e.merchant !== undefined) {
              throttle.succeeded(e.address, e.merchant);
              pairs.delete(pairKey);
            } else if (!e.ok) {
              throttle.failed(e.address, e.merchant, now);
              const counted = address === undefined || now - address.start >= rules.addressWindowSeconds ? { n: 0, start: now, until: address?.until ?? 0 } : address;
              counted.n++;
              if (counted.n >= rules.addressFailures) {
                Object.assign(counted, { n: 0, start: now, until: now + rules.addressBlockSeconds });
                addressBlocks++;
              }
              addresses.set(e.address, counted);
              if (e.merchant !== undefined) {
                pair.n++;
                if (pair.n >= rules.pairFailures) {
                  pair.until = now + Math.min(rules.pairMaxBlockSeconds, rules.pairBlockSeconds * 2 ** pair.blocks);
                  pair.blocks++;
                  pair.n = 0;
                }
                pairs.set(pairKey, pair);
              }
            }
          }
        }),
        { numRuns: 300 },
      );
      if (rules === SMALL) expect(addressBlocks).toBeGreaterThan(100);
    });
  }
});

describe('IPv6 clients, counted per network', () => {
  const inOne64 = (i: number) => `2001:db8:1:2:${((i * 7919) & 0xffff).toString(16)}::${(i + 1).toString(16)}`;

  it('blocks a merchant for the whole /64 after 10 wrong keys from 10 of its addresses; another /64 and IPv4 are unaffected', async () => {
    const { call } = throttledApi();
    for (let i = 0; i < 10; i++) expect((await call('/merchant/users', basic('m1', `wrong-${i}`), inOne64(i))).status).toBe(401);
    expect((await call('/merchant/users', basic('m1', 'key-one'), inOne64(99))).status).toBe(429);
    expect((await call('/merchant/users', basic('m1', 'key-one'), '2001:db8:1:3::1')).status).toBe(200);
    expect((await call('/merchant/users', basic('m1', 'key-one'), '192.0.2.1')).status).toBe(200);
  });

  it('blocks the /64 for every merchant after 100 failures spread over its addresses', async () => {
    const { call } = throttledApi();
    for (let i = 0; i < 100; i++) await call('/merchant/users', basic(`invented-${i}`, 'x'), inOne64(i));
    const refused = await call('/merchant/users', basic('m2', 'key-two'), inOne64(500));
    expect(refused.status).toBe(429);
    expect(refused.headers.get('ratelimit-policy')).toBe('"auth-address";q=100;w=3600');
  });

  it('takes an IPv4-mapped IPv6 client as its IPv4 address', async () => {
    const { call } = throttledApi();
    for (let i = 0; i < 10; i++) await call('/merchant/users', basic('m1', 'nope'), i % 2 ? '::ffff:192.0.2.8' : '192.0.2.8');
    expect((await call('/merchant/users', basic('m1', 'key-one'), '::ffff:c000:208')).status).toBe(429);
  });

  it('counts per ipv6Prefix: with 128 each address is its own, with 48 a whole /48 is one', async () => {
    const perAddress = throttledApi({ ipv6Prefix: 128 });
    for (let i = 0; i < 10; i++) await perAddress.call('/merchant/users', basic('m1', 'nope'), inOne64(i));
    expect((await perAddress.call('/merchant/users', basic('m1', 'key-one'), inOne64(99))).status).toBe(200);
    const per48 = throttledApi({ ipv6Prefix: 48 });
    for (let i = 0; i < 10; i++) await per48.call('/merchant/users', basic('m1', 'nope'), `2001:db8:1:${i.toString(16)}::1`);
    expect((await per48.call('/merchant/users', basic('m1', 'key-one'), '2001:db8:1:ffff::1')).status).toBe(429);
    expect(() => createMerchantApi({ storage: new MemoryStorage(contractSeed()), ipv6Prefix: 16 })).toThrow(/ipv6Prefix must be a whole number from 32 to 128/);
  });
});

describe('the throttle at its size cap', () => {
  it('forgets plain counters, never a block in force, whatever other addresses fail', () => {
    const throttle = new FailureThrottle({ maxEntries: 3, addressFailures: 2, pairFailures: 2 });
    const now = 1000;
    throttle.failed('198.51.100.1', 'm1', now);
    throttle.failed('198.51.100.1', 'm1', now);
    // Both the address and its pair are blocked now; a flood of failures from fresh addresses follows.
    for (let i = 0; i < 500; i++) throttle.failed(`203.0.113.${i % 250}`, i % 2 ? 'm1' : undefined, now + (i >> 8));
    expect(throttle.blocked('198.51.100.1', () => 'm1', now + 10)?.scope).toBe('address');
    expect(throttle.size.addresses).toBeLessThanOrEqual(3);
    expect(throttle.size.pairs).toBeLessThanOrEqual(3);
  });

  it('keeps a pair\'s block and its doubling through a flood of other pairs\' failures', () => {
    const throttle = new FailureThrottle({ maxEntries: 3, pairFailures: 2, addressFailures: 1_000_000 });
    const failTwice = (now: number) => [now, now].forEach((t) => throttle.failed('198.51.100.1', 'm1', t));
    failTwice(1000);
    for (let i = 0; i < 500; i++) throttle.failed(`203.0.113.${i % 250}`, `m${i}`, 1001);
    expect(throttle.blocked('198.51.100.1', () => 'm1', 1001)?.retryAfter).toBe(299);
    // After the block, the next one doubles: the pair's count of blocks was kept.
    failTwice(1300);
    expect(throttle.blocked('198.51.100.1', () => 'm1', 1300)?.retryAfter).toBe(600);
  });

  it('forgets a block that has ended before a counter, and a block in force only when nothing else is left', () => {
    const throttle = new FailureThrottle({ maxEntries: 2, addressFailures: 1, addressBlockSeconds: 100 });
    throttle.failed('198.51.100.1', undefined, 1000); // blocked until 1100
    throttle.failed('198.51.100.2', undefined, 1050); // blocked until 1150
    throttle.failed('198.51.100.3', undefined, 1120); // the first block has ended: it goes
    expect(throttle.blocked('198.51.100.1', () => undefined, 1120)).toBeUndefined();
    expect(throttle.blocked('198.51.100.2', () => undefined, 1120)?.scope).toBe('address');
    expect(throttle.blocked('198.51.100.3', () => undefined, 1120)?.scope).toBe('address');
    // Every entry a block in force: the oldest goes, as a last resort, and the cap holds.
    throttle.failed('198.51.100.4', undefined, 1121);
    expect(throttle.size.addresses).toBe(2);
    expect(throttle.blocked('198.51.100.2', () => undefined, 1121)).toBeUndefined();
    expect(throttle.blocked('198.51.100.4', () => undefined, 1121)?.scope).toBe('address');
  });
});

describe('fair sharing between merchants', () => {
  it('runs at most merchantConcurrency listings of one merchant at once; the next gets 429, another merchant is unaffected', async () => {
    const inner = new MemoryStorage(contractSeed());
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow: Storage = Object.assign(Object.create(inner), {
      listUsers: async (query: Parameters<Storage['listUsers']>[0]) => {
        if (query.merchantId === 'm1') await gate;
        return inner.listUsers(query);
      },
      getMerchant: (id: string) => inner.getMerchant(id),
    });
    const api = createMerchantApi({ storage: slow, logger: silentLogger, tracing: false, merchantConcurrency: 2 });
    const list = (id: string, key: string) => api.fetch(new Request(`${ORIGIN}/merchant/users?limit=1`, { headers: basic(id, key) }), { clientAddress: '192.0.2.1' });
    const running = [list('m1', 'key-one'), list('m1', 'key-one')];
    await sleep(10);
    const third = await list('m1', 'key-one');
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe('1');
    expect((await third.json()).errors[0].code).toBe('too_many_requests');
    expect((await list('m2', 'key-two')).status).toBe(200);
    release();
    for (const response of await Promise.all(running)) {
      expect(response.status).toBe(200);
      await response.text();
    }
    expect((await list('m1', 'key-one')).status).toBe(200);
  });

  it('gives the slot back when a streamed list ends or is cancelled', async () => {
    const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), logger: silentLogger, tracing: false, merchantConcurrency: 1, streamBatchSize: 1 });
    const list = () => api.fetch(new Request(`${ORIGIN}/merchant/users`, { headers: basic('m1', 'key-one') }));
    const first = await list();
    expect((await list()).status).toBe(429);
    await first.body!.cancel();
    const second = await list();
    expect(second.status).toBe(200);
    await second.text();
    expect((await list()).status).toBe(200);
  });
});

describe('headers on every answer', () => {
  it('X-Content-Type-Options: nosniff everywhere; Strict-Transport-Security over https', async () => {
    const { call } = throttledApi();
    for (const path of ['/healthz', '/nope', '/merchant/users']) expect((await call(path)).headers.get('x-content-type-options')).toBe('nosniff');
    expect((await call('/healthz')).headers.get('strict-transport-security')).toBeNull();
    expect((await call('https://api.test/healthz')).headers.get('strict-transport-security')).toBe('max-age=31536000');
  });
});
