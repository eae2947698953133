import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_SCHEDULE, nextRetryDelay, parseDurationMs, parseRetrySchedule, retryAfterMs } from '../../src/webhooks/retry-schedule.js';

describe('the retry schedule', () => {
  it('defaults to Standard Webhooks: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h', () => {
    expect(DEFAULT_RETRY_SCHEDULE).toEqual(parseRetrySchedule('5s,5m,30m,2h,5h,10h,14h,20h,24h'));
  });

  it('parses WEBHOOK_RETRY_SCHEDULE and names a bad item', () => {
    expect(parseRetrySchedule('1s,1s,2s')).toEqual([1000, 1000, 2000]);
    expect(parseRetrySchedule(' 500ms , 1d')).toEqual([500, 86_400_000]);
    expect(() => parseRetrySchedule('1s,,2s')).toThrow(/item 2/);
    expect(() => parseRetrySchedule('5')).toThrow(/item 1/);
    expect(() => parseRetrySchedule('8d')).toThrow(/7 days/);
    expect(() => parseRetrySchedule(Array(51).fill('1s').join(','))).toThrow(/at most 50/);
    expect(parseDurationMs('-1s')).toBeUndefined();
  });

  it('every delay is the schedule\'s plus at most 10% jitter, and the schedule ends', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 86_400_000 }), { minLength: 1, maxLength: 12 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (schedule, random) => {
        for (let attempts = 1; attempts <= schedule.length; attempts++) {
          const delay = nextRetryDelay(schedule, attempts, random)!;
          expect(delay).toBeGreaterThanOrEqual(schedule[attempts - 1]!);
          expect(delay).toBeLessThanOrEqual(Math.round(schedule[attempts - 1]! * 1.1));
        }
        expect(nextRetryDelay(schedule, schedule.length + 1, random)).toBeUndefined();
        expect(nextRetryDelay(schedule, 0, random)).toBeUndefined();
      }),
    );
  });

  it('honours a longer Retry-After up to the cap, never a shorter one', () => {
    expect(nextRetryDelay([1000], 1, 0, 30_000)).toBe(30_000);
    expect(nextRetryDelay([60_000], 1, 0, 1000)).toBe(60_000);
    expect(nextRetryDelay([1000], 1, 0, 10 * 3_600_000, 3_600_000)).toBe(3_600_000);
    expect(retryAfterMs('120', 0)).toBe(120_000);
    expect(retryAfterMs(new Date(90_000).toUTCString(), 0)).toBe(90_000);
    expect(retryAfterMs('soon', 0)).toBeUndefined();
    expect(retryAfterMs(undefined, 0)).toBeUndefined();
  });
});
