/**
 * The memory storage's replay store (src/storage/memory/salts.ts, its hash siphash.ts, docs/protocol.md#a-bounded-replay-store):
 * checked against a plain Map model over random sequences, its caps and their answers, the refusal
 * of a ts from before the start, its hash against the reference vectors, and its memory per salt.
 * A property failure prints its seed and the shortest sequence that fails.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { createMerchantApi } from '../../../src/api.js';
import { MerchantApiError, StorageUnavailableError } from '../../../src/errors.js';
import { errorHeaders } from '../../../src/http/error-reply.js';
import { silentLogger } from '../../../src/observe/logger.js';
import { signUrl } from '../../../src/signing/index.js';
import { MemoryStorage } from '../../../src/storage/memory/index.js';
import { BEFORE_START_MESSAGE, SaltStore } from '../../../src/storage/memory/salts.js';
import { halfSipHash64, lastFingerprint } from '../../../src/storage/memory/siphash.js';

const START = 1_700_000_000;

describe('HalfSipHash-2-4, 64-bit output', () => {
  // The reference vectors (github.com/veorq/SipHash, vectors_hsip64): key 00..07, message 00..n-1.
  const vectors: Record<number, string> = { 0: '218d1f59b9b83cc8', 2: '064f39ef7c50eb57', 4: 'd5e78a175be52ea1', 6: 'ce3e91358aa2bc25' };
  it('matches the reference vectors', () => {
    for (const [length, hex] of Object.entries(vectors)) {
      const n = Number(length) / 2;
      const units = new Uint16Array(n);
      for (let i = 0; i < n; i++) units[i] = (2 * i) | ((2 * i + 1) << 8);
      halfSipHash64(0x03020100, 0x07060504, units, n);
      const [high, low] = lastFingerprint();
      const bytes = new Uint8Array(new Int32Array([low, high]).buffer);
      expect(Buffer.from(bytes).toString('hex'), `message of ${length} bytes`).toBe(hex);
    }
  });
});

/** What a replay store must answer, written as plainly as possible. */
class Model {
  readonly salts = new Map<string, number>();
  constructor(
    readonly maxSalts: number,
    readonly startedAt: number,
  ) {}

  record(merchant: string, salt: string, expiresAt: number, now: number, ts: number): boolean | 'before_start' | 'merchant_full' | 'store_full' {
    const key = JSON.stringify([merchant, salt]);
    const existing = this.salts.get(key);
    if (existing !== undefined && existing >= now) return false;
    if (expiresAt < now) return true;
    if (ts < this.startedAt) return 'before_start';
    const live = [...this.salts.entries()].filter(([, expiry]) => expiry >= now);
    if (live.filter(([k]) => JSON.parse(k)[0] === merchant).length >= Math.floor(this.maxSalts / 2)) return 'merchant_full';
    if (live.length >= this.maxSalts) return 'store_full';
    this.salts.set(key, expiresAt);
    return true;
  }

  live(now: number): number {
    return [...this.salts.values()].filter((expiry) => expiry >= now).length;
  }
}

function outcome(store: SaltStore, merchant: string, salt: string, expiresAt: number, now: number, ts: number): ReturnType<Model['record']> {
  try {
    return store.record(merchant, salt, expiresAt, now, ts);
  } catch (error) {
    if (error instanceof StorageUnavailableError) return 'store_full';
    if (error instanceof MerchantApiError && error.code === 'too_many_requests') return 'merchant_full';
    if (error instanceof MerchantApiError && error.message === BEFORE_START_MESSAGE) return 'before_start';
    throw error;
  }
}

describe('the replay store against a model', () => {
  // Few merchants and salts, so that replays, re-use after expiry and full tables all happen often.
  const step = fc.record({
    merchant: fc.constantFrom('m1', 'm2', 'M1', 'm1 ', 'läden ☃'),
    salt: fc.oneof({ weight: 8, arbitrary: fc.integer({ min: 0, max: 15 }).map(String) }, { weight: 1, arbitrary: fc.string({ maxLength: 4 }) }),
    // ts relative to now, inside the window of 30 s either way.
    offset: fc.integer({ min: -30, max: 30 }),
    advance: fc.oneof({ weight: 6, arbitrary: fc.constant(0) }, { weight: 3, arbitrary: fc.integer({ min: 1, max: 5 }) }, { weight: 1, arbitrary: fc.integer({ min: 20, max: 90 }) }),
  });

  it('never accepts a salt twice inside its window, and answers exactly as the model does (caps included)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 48 }), fc.integer({ min: -40, max: 2 }), fc.array(step, { minLength: 1, maxLength: 400, size: 'large' }), (maxSalts, startOffset, steps) => {
        const tolerance = 30;
        const store = new SaltStore({ maxSalts, startedAt: START + startOffset });
        const model = new Model(maxSalts, START + startOffset);
        let now = START;
        for (const { merchant, salt, offset, advance } of steps) {
          now += advance;
          const ts = now + offset;
          const expected = model.record(merchant, salt, ts + tolerance, now, ts);
          expect(outcome(store, merchant, salt, ts + tolerance, now, ts)).toBe(expected);
          expect(store.size).toBe(model.live(now));
          expect(store.integrity()).toBeUndefined();
        }
      }),
      { numRuns: 300 },
    );
  });

  it('keeps every salt through floods that fill, sweep and wrap the table many times', () => {
    // A large store, several merchants, the clock moving on: no refusal is expected, so every
    // answer is the plain replay rule. Replays of earlier salts are mixed in at random.
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 31 - 1 }), (seed) => {
        // mulberry32
        let state = seed;
        const random = () => {
          state = (state + 0x6d2b79f5) | 0;
          let t = Math.imul(state ^ (state >>> 15), 1 | state);
          t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
          return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
        };
        // About 300 live salts at a time in 2,400 slots: the hand goes round several times.
        const store = new SaltStore({ maxSalts: 1200, startedAt: 0 });
        const model = new Map<string, number>();
        const sent: [string, string][] = [];
        let now = START;
        for (let i = 0; i < 6000; i++) {
          if (random() < 0.05) now += 1;
          const replay = sent.length > 0 && random() < 0.3;
          const [merchant, salt] = replay ? sent[Math.floor(random() * sent.length)]! : [`m${Math.floor(random() * 3)}`, `s${i}`];
          const expiresAt = now + 20;
          const key = `${merchant}\n${salt}`;
          const live = (model.get(key) ?? -1) >= now;
          const accepted = store.record(merchant, salt, expiresAt, now, now);
          expect(accepted).toBe(!live);
          if (accepted) model.set(key, expiresAt);
          if (!replay) sent.push([merchant, salt]);
          if (i % 500 === 0) expect(store.integrity()).toBeUndefined();
        }
        expect(store.integrity()).toBeUndefined();
        expect(store.size).toBe([...model.values()].filter((expiry) => expiry >= now).length);
      }),
      { numRuns: 10 },
    );
  });
});

describe('caps', () => {
  it('a merchant over half the cap gets 429 with Retry-After until its oldest salt expires; a full store 503; never a crash', async () => {
    const storage = new MemoryStorage(undefined, { maxSalts: 10, startedAt: 0 });
    const record = (merchantId: string, salt: string, now: number) => storage.recordSalt({ merchantId, salt, expiresAt: now + 300, now, ts: now });
    for (let i = 0; i < 5; i++) expect(await record('a', `a${i}`, START + i)).toBe(true);
    const refused = await record('a', 'a5', START + 10).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(MerchantApiError);
    expect(refused).toMatchObject({ code: 'too_many_requests', status: 429 });
    // The oldest salt (recorded at START, kept until START + 300) is gone at START + 301.
    expect(errorHeaders(refused as MerchantApiError)).toMatchObject({ 'retry-after': '291', 'ratelimit-policy': '"salts";q=5', ratelimit: '"salts";r=0;t=291' });
    expect((refused as MerchantApiError).message).toMatch(/half of the replay store's 10/);
    // A replay of one of its salts is still a replay, not a 429.
    expect(await record('a', 'a1', START + 10)).toBe(false);

    for (let i = 0; i < 5; i++) expect(await record('b', `b${i}`, START + 20)).toBe(true);
    expect(storage.saltCount).toBe(10);
    const full = await record('c', 'c0', START + 30).catch((error: unknown) => error);
    expect(full).toBeInstanceOf(StorageUnavailableError);
    expect(errorHeaders(full as StorageUnavailableError)).toEqual({ 'retry-after': '271' });

    // Once the oldest salts have expired there is room again.
    expect(await record('c', 'c0', START + 301)).toBe(true);
    expect(await record('a', 'a5', START + 302)).toBe(true);
    expect(storage.saltCount).toBe(10);
  });

  it('answers the caps through the handler: 429 and 503 in the validatesignature shape, with Retry-After', async () => {
    const storage = new MemoryStorage({ merchants: [{ id: 'a', status: 'active', keys: ['ka'] }, { id: 'b', status: 'active', keys: ['kb'] }, { id: 'c', status: 'active', keys: ['kc'] }], users: [] }, { maxSalts: 4, startedAt: Date.now() / 1000 - 60 });
    const api = createMerchantApi({ storage, logger: silentLogger, tracing: false });
    const call = async (merchant: string) => {
      const response = await api.fetch(new Request(signUrl(`k${merchant}`, 'http://api.test/validatesignature', { cp: merchant })));
      return { status: response.status, retryAfter: response.headers.get('retry-after'), body: await response.json() };
    };
    expect((await call('a')).status).toBe(200);
    expect((await call('a')).status).toBe(200);
    const limited = await call('a');
    expect(limited).toMatchObject({ status: 429, body: { status: 'error', is_valid: false } });
    expect(Number(limited.retryAfter)).toBeGreaterThanOrEqual(300);
    expect(limited.body.message).toMatch(/most one merchant may/);
    expect((await call('b')).status).toBe(200);
    expect((await call('b')).status).toBe(200);
    const full = await call('c');
    expect(full).toMatchObject({ status: 503, body: { status: 'error', message: 'The storage is unavailable; try again shortly.', is_valid: false } });
    expect(Number(full.retryAfter)).toBeGreaterThanOrEqual(300);
    expect(storage.saltCount).toBe(4);
  });

  it('checks maxSalts', () => {
    expect(() => new MemoryStorage(undefined, { maxSalts: 1 })).toThrow(RangeError);
    expect(() => new MemoryStorage(undefined, { maxSalts: 2.5 })).toThrow(RangeError);
    expect(new SaltStore().maxSalts).toBe(1_000_000);
  });
});

describe('after a restart', () => {
  it('refuses a ts from before the storage was created, with the documented message; a replay is still a replay', async () => {
    const storage = new MemoryStorage();
    // The next second: a ts of the second the storage was created in is refused too (the test below).
    const now = Math.floor(Date.now() / 1000) + 1;
    const refused = await storage.recordSalt({ merchantId: 'm', salt: 'old', expiresAt: now - 5 + 300, now, ts: now - 5 }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(MerchantApiError);
    expect(refused).toMatchObject({ code: 'invalid_parameter', status: 400, message: 'Invalid timestamp: ts is before this server started; sign the request again with the current time.' });
    expect(storage.saltCount).toBe(0);
    expect(await storage.recordSalt({ merchantId: 'm', salt: 'new', expiresAt: now + 300, now, ts: now })).toBe(true);
    expect(await storage.recordSalt({ merchantId: 'm', salt: 'new', expiresAt: now - 5 + 300, now, ts: now - 5 })).toBe(false);
  });

  it('answers it through the handler: 400 in the validatesignature shape, byte-exact', async () => {
    const storage = new MemoryStorage({ merchants: [{ id: 'a', status: 'active', keys: ['ka'] }], users: [] });
    const api = createMerchantApi({ storage, logger: silentLogger, tracing: false });
    const signedBefore = signUrl('ka', 'http://api.test/validatesignature', { cp: 'a' }, { now: () => Date.now() - 10_000 });
    const response = await api.fetch(new Request(signedBefore));
    expect(response.status).toBe(400);
    expect(await response.text()).toBe('{"status":"error","message":"Invalid timestamp: ts is before this server started; sign the request again with the current time.","is_valid":false}');
    // Signed in the second after the start (a ts of the start's own second is refused: see below).
    expect((await api.fetch(new Request(signUrl('ka', 'http://api.test/validatesignature', { cp: 'a' }, { now: () => Date.now() + 1000 })))).status).toBe(200);
  });

  it('refuses after a restart a URL accepted earlier in the same second: the start is kept to the millisecond', async () => {
    // Early in a second (polled for), so that both lives fall in it: the case a start rounded down to its second let through.
    await vi.waitFor(() => expect(Date.now() % 1000).toBeLessThan(300), { timeout: 2000, interval: 5 });
    const seed = { merchants: [{ id: 'a', status: 'active' as const, keys: ['ka'] }], users: [] };
    const before = createMerchantApi({ storage: new MemoryStorage(seed, { startedAt: Date.now() / 1000 - 60 }), logger: silentLogger, tracing: false });
    const url = signUrl('ka', 'http://api.test/validatesignature', { cp: 'a' });
    expect((await before.fetch(new Request(url))).status).toBe(200);
    // The process restarts: a new storage, created after the URL was accepted.
    const restarted = createMerchantApi({ storage: new MemoryStorage(seed), logger: silentLogger, tracing: false });
    const replay = await restarted.fetch(new Request(url));
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain('ts is before this server started');
  });

  it('reads the start on the handler\'s clock, and takes an explicit startedAt', async () => {
    // A handler clock far from the system's (a test's fixed clock): the start is when the storage was made, on that clock.
    const storage = new MemoryStorage();
    expect(await storage.recordSalt({ merchantId: 'm', salt: 'a', expiresAt: START + 300, now: START, ts: START })).toBe(true);
    await expect(storage.recordSalt({ merchantId: 'm', salt: 'b', expiresAt: START + 290, now: START, ts: START - 10 })).rejects.toThrow(BEFORE_START_MESSAGE);
    const earlier = new MemoryStorage(undefined, { startedAt: START - 100 });
    expect(await earlier.recordSalt({ merchantId: 'm', salt: 'b', expiresAt: START + 290, now: START, ts: START - 10 })).toBe(true);
    // Without a ts (a caller other than the handler) there is nothing to check.
    expect(await storage.recordSalt({ merchantId: 'm', salt: 'c', expiresAt: START + 290, now: START })).toBe(true);
  });
});

describe('memory', () => {
  it('takes at most 48 bytes per salt, all in typed arrays: the heap does not grow with the salts', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const maxSalts = 400_000;
    gc();
    const before = process.memoryUsage();
    const store = new SaltStore({ maxSalts, startedAt: 0 });
    // Full: each of two merchants holds its half, over a window of 300 seconds.
    let accepted = 0;
    for (let i = 0; i < maxSalts; i++) {
      const now = START + Math.floor(i / 2000);
      if (store.record(i % 2 ? 'merchant-a' : 'merchant-b', `salt-${i}-0123456789abcdef`, now + 300, now, now)) accepted++;
    }
    expect(accepted).toBe(maxSalts);
    expect(store.size).toBe(maxSalts);
    gc();
    const after = process.memoryUsage();
    const perSalt = (after.arrayBuffers - before.arrayBuffers) / maxSalts;
    const heapPerSalt = (after.heapUsed - before.heapUsed) / maxSalts;
    expect(perSalt).toBeLessThanOrEqual(48);
    expect(store.tableBytes / maxSalts).toBe(24);
    // Strings, objects and Map entries per salt would be 100+ bytes each.
    expect(heapPerSalt).toBeLessThan(1);
    // And the full store still refuses rather than grows.
    expect(() => store.record('merchant-c', 'one-more', START + 500, START + 200, START + 200)).toThrow(StorageUnavailableError);
  });
});
