/**
 * `constantTimeHexEqual` (src/signing/crypto.ts) answers what `===` answers for hex digests, the
 * 56 characters of SHA-224 (compared in two Buffers it writes over) and any other length, one
 * comparison after another (nothing of one is left for the next).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { constantTimeHexEqual } from '../../src/signing/crypto.js';

const hex = (length: number) => fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: length, maxLength: length });

describe('constantTimeHexEqual', () => {
  it('is true exactly for equal digests, of SHA-224 length or any other', () => {
    fc.assert(
      fc.property(fc.oneof(fc.constant(56), fc.integer({ min: 0, max: 80 })), fc.nat(55), (length, flip) =>
        fc.assert(
          fc.property(hex(length), hex(length), (a, b) => {
            expect(constantTimeHexEqual(a, b)).toBe(a === b);
            expect(constantTimeHexEqual(a, a)).toBe(true);
            if (length > 0) {
              // One character changed, anywhere: unequal.
              const at = flip % length;
              const changed = a.slice(0, at) + (a[at] === '0' ? '1' : '0') + a.slice(at + 1);
              expect(constantTimeHexEqual(a, changed)).toBe(false);
            }
          }),
          { numRuns: 20 },
        ),
      ),
      { numRuns: 50 },
    );
    expect(constantTimeHexEqual('a'.repeat(56), 'a'.repeat(55))).toBe(false);
  });
});
