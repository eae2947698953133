/**
 * The replay store's live-salt counts by expiry second (src/storage/memory/salt-expiry.ts):
 * against a plain model over random sequences (seconds out of order, the clock moving on, the
 * queue growing, compacting and emptying), and the memory they take: one entry per second that
 * has salts, never one per salt.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ExpiryCounts } from '../../../src/storage/memory/salt-expiry.js';

describe('ExpiryCounts', () => {
  it('answers as a plain list of expiry seconds does, over random adds and expiries', () => {
    const op = fc.oneof(
      // A salt expiring `ahead` seconds after the clock: mostly in the window, out of order.
      { weight: 6, arbitrary: fc.record({ add: fc.integer({ min: 0, max: 12 }) }) },
      { weight: 2, arbitrary: fc.record({ advance: fc.integer({ min: 0, max: 4 }) }) },
      { weight: 1, arbitrary: fc.record({ advance: fc.integer({ min: 10, max: 20 }) }) },
      { weight: 1, arbitrary: fc.constant({ clear: true as const }) },
    );
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 300 }), (ops) => {
        const counts = new ExpiryCounts();
        let model: number[] = [];
        let now = 1000;
        for (const o of ops) {
          if ('add' in o) {
            counts.add(now + o.add);
            model.push(now + o.add);
          } else if ('advance' in o) {
            now += o.advance;
            model = model.filter((second) => second >= now);
            expect(counts.expire(now)).toBe(model.length);
          } else {
            counts.clear();
            model = [];
          }
          expect(counts.total).toBe(model.length);
          if (model.length > 0) expect(counts.oldest()).toBe(Math.min(...model));
        }
      }),
      { numRuns: 500 },
    );
  });

  it('empties, and starts again from any state', () => {
    const counts = new ExpiryCounts();
    for (const second of [50, 10, 30, 20, 40, 10, 60]) counts.add(second);
    expect(counts.expire(15)).toBe(5);
    expect(counts.oldest()).toBe(20);
    counts.clear();
    expect(counts.total).toBe(0);
    expect(counts.expire(0)).toBe(0);
    counts.add(7).add(5);
    expect(counts.total).toBe(2);
    expect(counts.oldest()).toBe(5);
    expect(counts.expire(6)).toBe(1);
    expect(counts.oldest()).toBe(7);
    expect(counts.expire(8)).toBe(0);
  });

  it('takes memory by the seconds that have salts, not by the salts: 2,000,000 salts over 20,000 seconds in KBs, not MBs', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    // mulberry32: the same sequence every run.
    let state = 42;
    const random = () => {
      state = (state + 0x6d2b79f5) | 0;
      let t = Math.imul(state ^ (state >>> 15), 1 | state);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    gc();
    const before = process.memoryUsage().arrayBuffers;
    const counts = new ExpiryCounts();
    let now = 1_700_000_000;
    for (let i = 0; i < 2_000_000; i++) {
      if (i % 100 === 0) counts.expire(++now);
      // First every salt signed now and kept 300 s (in order, the common case), then signed up to
      // 300 s either side of the clock (expiring 0 to 600 s from now, any order). The arrays keep
      // the largest size they ever took.
      counts.add(i < 1_000_000 ? now + 300 : now + Math.floor(random() * 601));
    }
    gc();
    const grown = process.memoryUsage().arrayBuffers - before;
    // At most 601 seconds have salts: two arrays of at most 2,048 entries, 16 KB. An entry per salt
    // (about 30,000 live) or a queue that grows when it could move its entries down (20,000 seconds
    // gone by) takes from 128 KB to 1 MB.
    expect(counts.total).toBeGreaterThan(20_000);
    expect(grown).toBeLessThan(64 * 1024);
  });
});
