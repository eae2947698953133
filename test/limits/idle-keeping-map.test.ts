/**
 * IdleKeepingMap (src/limits/idle-keeping-map.ts): whatever is set and
 * cleared, in any order, it answers as a Map that deletes on clear would,
 * and holds at most `maxIdle` idle entries besides the live ones.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IdleKeepingMap } from '../../src/limits/idle-keeping-map.js';

const step = fc.record({ key: fc.integer({ min: 0, max: 40 }), value: fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined }) });

describe('IdleKeepingMap', () => {
  for (const idle of [0, undefined] as const) {
    it(`answers as a Map that deletes, and stays bounded (idle value ${String(idle)})`, () => {
      fc.assert(
        fc.property(fc.integer({ min: 0, max: 8 }), fc.array(step, { maxLength: 300 }), (maxIdle, steps) => {
          const map = new IdleKeepingMap<number | undefined>(idle, maxIdle);
          const reference = new Map<string, number>();
          for (const { key, value } of steps) {
            const name = `k${key}`;
            if (value === undefined) {
              map.clear(name);
              reference.delete(name);
            } else {
              map.set(name, value);
              reference.set(name, value);
            }
            for (let k = 0; k <= 40; k++) expect(map.get(`k${k}`)).toBe(reference.get(`k${k}`) ?? idle);
            expect(map.size).toBeLessThanOrEqual(reference.size + maxIdle);
          }
        }),
        { numRuns: 300 },
      );
    });
  }

  it('keeps a cleared key for reuse rather than deleting it', () => {
    const map = new IdleKeepingMap<number>(0, 2);
    map.set('a', 1);
    map.clear('a');
    expect(map.size).toBe(1);
    map.set('b', 1);
    map.clear('b');
    map.set('c', 1);
    map.clear('c');
    // The third idle entry passes the bound: every idle one goes.
    expect(map.size).toBe(0);
  });
});
