/**
 * The memory replay store (src/storage/memory/salts.ts) at its limits, beside the model and the
 * floods of memory-salts.test.ts: its options' bounds and messages, the operator's message of a
 * full store, a salt already expired when it arrives, and a clock read late by one request.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { StorageUnavailableError } from '../../../src/errors.js';
import { MemoryStorage } from '../../../src/storage/memory/index.js';
import { MAX_MAX_SALTS, SaltStore } from '../../../src/storage/memory/salts.js';

const START = 1_700_000_000;

describe('options', () => {
  it(`takes maxSalts up to ${MAX_MAX_SALTS}, with a message naming the bounds beyond`, () => {
    // The table is allocated on the first salt: making the largest store costs nothing here.
    expect(new SaltStore({ maxSalts: MAX_MAX_SALTS }).maxSalts).toBe(100_000_000);
    expect(() => new SaltStore({ maxSalts: MAX_MAX_SALTS + 1 })).toThrow(new RangeError('maxSalts must be a whole number from 2 to 100000000 (got 100000001).'));
    expect(() => new MemoryStorage(undefined, { maxSalts: 1 })).toThrow('maxSalts must be a whole number from 2 to 100000000 (got 1).');
  });

  it('refuses a startedAt that is not a finite number of seconds', () => {
    for (const startedAt of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => new SaltStore({ startedAt })).toThrow(new RangeError(`startedAt must be Unix seconds (got ${startedAt}).`));
    }
    expect(new SaltStore({ startedAt: START + 0.25 }).record('m', 's', START + 300, START + 1, START + 1)).toBe(true);
  });
});

describe('answers', () => {
  it('tells the operator why a full store refuses: the cap and when the oldest salt expires', () => {
    const store = new SaltStore({ maxSalts: 2, startedAt: 0 });
    expect(store.record('a', 'a0', START + 300, START, START)).toBe(true);
    expect(store.record('b', 'b0', START + 310, START + 10, START + 10)).toBe(true);
    const full = (() => {
      try {
        return store.record('c', 'c0', START + 320, START + 20, START + 20);
      } catch (error) {
        return error;
      }
    })();
    expect(full).toBeInstanceOf(StorageUnavailableError);
    expect((full as Error).message).toBe('The replay store is full: 2 unexpired salts (MAX_SALTS); the oldest expires in 281 seconds.');
  });

  it('accepts a salt already expired when it arrives and keeps nothing of it', async () => {
    const storage = new MemoryStorage(undefined, { startedAt: 0 });
    expect(await storage.recordSalt({ merchantId: 'm', salt: 'late', expiresAt: START - 1, now: START })).toBe(true);
    expect(storage.saltCount).toBe(0);
    expect(await storage.recordSalt({ merchantId: 'm', salt: 'late', expiresAt: START - 1, now: START })).toBe(true);
    const store = new SaltStore({ maxSalts: 4, startedAt: 0 });
    for (let i = 0; i < 10; i++) expect(store.record('m', `late-${i}`, START - 1, START, START)).toBe(true);
    expect(store.size).toBe(0);
    expect(store.integrity()).toBeUndefined();
  });

  it('keeps its latest clock when a request brings an earlier one: a salt expired at that clock stays expired', () => {
    // A large table, so that the sweeping hand (8 slots a salt) has not yet emptied the slot of 'a'.
    const store = new SaltStore({ maxSalts: 100_000, startedAt: 0 });
    expect(store.record('m', 'a', START + 37, START, START)).toBe(true);
    expect(store.record('m', 'b', START + 100, START + 40, START + 40)).toBe(true);
    expect(store.size).toBe(1);
    // A request that read the clock 5 s earlier: 'a' expired at START + 37, before the latest second seen.
    expect(store.record('m', 'a', START + 65, START + 35, START + 35)).toBe(true);
    expect(store.size).toBe(2);
    expect(store.integrity()).toBeUndefined();
    expect(store.record('m', 'a', START + 65, START + 41, START + 41)).toBe(false);
  });
});

describe('clear', () => {
  it('forgets every salt, and takes them again', async () => {
    const store = new SaltStore({ maxSalts: 4, startedAt: 0 });
    expect(store.record('m', 'a', START + 300, START, START)).toBe(true);
    expect(store.record('m', 'b', START + 300, START, START)).toBe(true);
    store.clear();
    expect(store.size).toBe(0);
    expect(store.integrity()).toBeUndefined();
    expect(store.record('m', 'a', START + 300, START, START)).toBe(true);
    expect(store.record('m', 'b', START + 300, START, START)).toBe(true);
    expect(store.size).toBe(2);
    // On close, the memory storage lets its salts go.
    const storage = new MemoryStorage(undefined, { startedAt: 0 });
    await storage.recordSalt({ merchantId: 'm', salt: 'a', expiresAt: START + 300, now: START });
    await storage.close();
    expect(storage.saltCount).toBe(0);
  });
});

describe('the start, on the handler\'s clock', () => {
  afterEach(() => vi.restoreAllMocks());

  it('takes a handler clock 2 s or more behind the system\'s as another clock, and one less behind as the same', () => {
    // The system's clock stands still; the handler's is START (whole seconds), 2 s or 1.999 s behind it.
    const at = (systemMs: number) => {
      vi.spyOn(Date, 'now').mockReturnValue(systemMs);
      return new SaltStore();
    };
    // 2 s behind: another clock, so the start is measured back from it: START itself.
    expect(at(START * 1000 + 2000).record('m', 'a', START + 300, START, START)).toBe(true);
    // 1.999 s behind: the same clock read late, so the start is the system's time, START + 1.999.
    expect(() => at(START * 1000 + 1999).record('m', 'a', START + 300, START, START + 1)).toThrow(/before this server started/);
    // Ahead of the system's: another clock too, the start measured back from it (START), not the system's START - 5.
    expect(() => at(START * 1000 - 5000).record('m', 'a', START + 300, START, START - 3)).toThrow(/before this server started/);
  });
});
