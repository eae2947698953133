import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalTimestamp } from '../../src/storage/timestamps.js';
import { compareCodePoints } from '../../src/storage/order.js';

describe('canonicalTimestamp', () => {
  const valid: [string, string][] = [
    ['2019-12-12T12:19:17.193961+00:00', '2019-12-12T12:19:17.193961+00:00'],
    ['2019-12-12T13:19:17.193961+01:00', '2019-12-12T12:19:17.193961+00:00'],
    ['2019-12-12T12:19:17.193961-0530', '2019-12-12T17:49:17.193961+00:00'],
    ['2019-12-12T12:19:17Z', '2019-12-12T12:19:17.000000+00:00'],
    ['2019-12-12t12:19:17.1z', '2019-12-12T12:19:17.100000+00:00'],
    ['2019-12-12 12:19:17,5', '2019-12-12T12:19:17.500000+00:00'],
    ['2019-12-12T12:19', '2019-12-12T12:19:00.000000+00:00'],
    ['2019-12-12', '2019-12-12T00:00:00.000000+00:00'],
    ['2020-02-29T00:00:00Z', '2020-02-29T00:00:00.000000+00:00'],
    ['2000-01-01T00:30:00+01:00', '1999-12-31T23:30:00.000000+00:00'],
    ['0099-06-01T00:00:00Z', '0099-06-01T00:00:00.000000+00:00'],
    ['9999-12-31T23:59:59.999999Z', '9999-12-31T23:59:59.999999+00:00'],
    // RFC 3339: a leap second, any number of fractional digits (truncated), year 0000.
    ['2016-12-31T23:59:60Z', '2016-12-31T23:59:59.999999+00:00'],
    ['2016-12-31T23:59:60.5Z', '2016-12-31T23:59:59.999999+00:00'],
    ['2017-01-01T00:59:60+01:00', '2016-12-31T23:59:59.999999+00:00'],
    ['2019-12-12T12:00:00.1234567Z', '2019-12-12T12:00:00.123456+00:00'],
    ['2019-12-12T12:00:00.9999999999999999999Z', '2019-12-12T12:00:00.999999+00:00'],
    ['2019-12-12T12:00:00.0000009Z', '2019-12-12T12:00:00.000000+00:00'],
    ['0000-01-01', '0000-01-01T00:00:00.000000+00:00'],
    ['0000-01-01T00:00:00Z', '0000-01-01T00:00:00.000000+00:00'],
    ['0000-02-29T12:00:00Z', '0000-02-29T12:00:00.000000+00:00'],
  ];
  for (const [input, expected] of valid) it(`reads ${input}`, () => expect(canonicalTimestamp(input)).toBe(expected));

  const invalid = [
    '', 'yesterday', '2019-13-01', '2019-00-10', '2019-02-29', '2019-04-31', '2019-12-12T24:00:00Z', '2019-12-12T12:60:00Z',
    '2019-12-12T12:00:61Z', '2019-12-12T12:00:00.Z', '2019-12-12T12:00:00+24:00', '2019-12-12T12:00:00 01:00',
    '0000-01-01T00:30:00+01:00', '1577836800', '2019-1-1', ' 2019-12-12', '2019-12-12T12:00:00+01:00:00', '9999-12-31T23:59:59-01:00',
  ];
  for (const input of invalid) it(`rejects ${JSON.stringify(input)}`, () => expect(canonicalTimestamp(input)).toBeUndefined());
});

describe('canonicalTimestamp accepts every RFC 3339 date-time', () => {
  const two = (n: number) => String(n).padStart(2, '0');
  const dateTime = fc
    .record({
      year: fc.integer({ min: 0, max: 9999 }),
      month: fc.integer({ min: 1, max: 12 }),
      day: fc.integer({ min: 1, max: 31 }),
      hour: fc.integer({ min: 0, max: 23 }),
      minute: fc.integer({ min: 0, max: 59 }),
      second: fc.integer({ min: 0, max: 60 }),
      fraction: fc.option(fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: 1, maxLength: 20 }), { nil: undefined }),
      offset: fc.oneof(fc.constantFrom('Z', 'z', '+00:00', '-00:00'), fc.tuple(fc.constantFrom('+', '-'), fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 })).map(([sign, h, m]) => `${sign}${two(h)}:${two(m)}`)),
      separator: fc.constantFrom('T', 't'),
    })
    .filter(({ year, month, day }) => day <= new Date(Date.UTC(2000 + (year % 400), month, 0)).getUTCDate());

  it('in the canonical form, at a stable point (reading the result gives it back)', () => {
    fc.assert(
      fc.property(dateTime, (t) => {
        const input = `${String(t.year).padStart(4, '0')}-${two(t.month)}-${two(t.day)}${t.separator}${two(t.hour)}:${two(t.minute)}:${two(t.second)}${t.fraction === undefined ? '' : `.${t.fraction}`}${t.offset}`;
        const result = canonicalTimestamp(input);
        // Only an offset that moves the instant outside years 0000-9999 may be refused.
        const edge = (t.year === 0 && t.month === 1 && t.day === 1) || (t.year === 9999 && t.month === 12 && t.day === 31);
        if (result === undefined) {
          expect(edge).toBe(true);
          return;
        }
        expect(result).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}\+00:00$/);
        expect(canonicalTimestamp(result)).toBe(result);
        if (t.second < 60 && /^(Z|z|[+-]00:00)$/.test(t.offset)) {
          expect(result.slice(0, 19)).toBe(input.slice(0, 19).replace('t', 'T'));
          expect(result.slice(20, 26)).toBe((t.fraction ?? '').slice(0, 6).padEnd(6, '0'));
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe('compareCodePoints', () => {
  it('orders by code point, not by UTF-16 unit', () => {
    const ids = ['😀', '\uffff', 'a', 'B', '\ue000', '中', ''];
    expect([...ids].sort(compareCodePoints)).toEqual(['', 'B', 'a', '中', '\ue000', '\uffff', '😀']);
    expect(['😀', '\uffff'].sort()).toEqual(['😀', '\uffff']);
  });
  it('puts a prefix first', () => {
    expect(compareCodePoints('ab', 'abc')).toBeLessThan(0);
    expect(compareCodePoints('abc', 'abc')).toBe(0);
  });
});
