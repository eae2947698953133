/**
 * The throttle's bounded tables (src/limits/bounded-states.ts): whatever is
 * set, in any order and at any time, the table stays within its cap, forgets
 * at most one entry per set, never the one just set, and forgets a block in
 * force only when every other entry was a block when it was set (it tells
 * a block that has ended from one in force by looking at the oldest only).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BoundedStates } from '../../src/limits/bounded-states.js';

describe('BoundedStates', () => {
  it('stays within its cap and forgets a block in force only when nothing but blocks is left', () => {
    const step = fc.record({ key: fc.integer({ min: 0, max: 30 }), until: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 300 })), dt: fc.integer({ min: 0, max: 20 }) });
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.array(step, { maxLength: 200 }), (max, steps) => {
        const table = new BoundedStates<{ until: number }>(max, (value) => value.until);
        /** What the table should hold: every entry set and not forgotten since, with when it was set. */
        const held = new Map<string, { until: number; setAt: number }>();
        let now = 100;
        for (const { key, until, dt } of steps) {
          now += dt;
          const name = `k${key}`;
          table.set(name, { until }, now);
          held.set(name, { until, setAt: now });
          const forgotten = [...held].filter(([k]) => table.get(k) === undefined);
          expect(forgotten.length).toBeLessThanOrEqual(1);
          for (const [k] of forgotten) held.delete(k);
          expect(table.get(name)).toEqual({ until });
          expect(table.size).toBe(held.size);
          expect(table.size).toBeLessThanOrEqual(max);
          const [gone] = forgotten;
          if (gone !== undefined && gone[1].until > now) {
            for (const [k, value] of held) if (k !== name) expect(value.until).toBeGreaterThan(value.setAt);
          }
        }
      }),
      { numRuns: 500 },
    );
  });
});
