import { describe, expect, it } from 'vitest';
import { canonicalTimestamp } from '../src/timestamps.js';
import { compareCodePoints } from '../src/order.js';

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
  ];
  for (const [input, expected] of valid) it(`reads ${input}`, () => expect(canonicalTimestamp(input)).toBe(expected));

  const invalid = [
    '', 'yesterday', '2019-13-01', '2019-00-10', '2019-02-29', '2019-04-31', '2019-12-12T24:00:00Z', '2019-12-12T12:60:00Z',
    '2019-12-12T12:00:60Z', '2019-12-12T12:00:00.1234567Z', '2019-12-12T12:00:00+24:00', '2019-12-12T12:00:00 01:00',
    '0000-01-01', '1577836800', '2019-1-1', ' 2019-12-12', '2019-12-12T12:00:00+01:00:00', '9999-12-31T23:59:59-01:00',
  ];
  for (const input of invalid) it(`rejects ${JSON.stringify(input)}`, () => expect(canonicalTimestamp(input)).toBeUndefined());
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
