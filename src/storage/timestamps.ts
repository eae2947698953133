/**
 * Timestamps as docs/protocol.md#users writes them: UTC, exactly six fractional
 * digits, explicit offset: `2019-12-12T12:19:17.193961+00:00`. A JavaScript
 * `Date` keeps only milliseconds, so the fraction is carried as text and only
 * the whole seconds go through `Date.UTC`.
 */

// Any number of fractional digits (RFC 3339 sets no limit); only six are kept.
const ISO_TIMESTAMP =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(Z|z|[+-]\d{2}:?\d{2})?)?$/;

/**
 * Parses an ISO 8601 timestamp into the canonical form, or returns undefined.
 * A date alone means midnight UTC; a time without offset is taken as UTC.
 *
 * @example
 * canonicalTimestamp('2019-12-12T13:19:17.193961+01:00') // '2019-12-12T12:19:17.193961+00:00'
 */
export function canonicalTimestamp(text: string): string | undefined {
  const match = ISO_TIMESTAMP.exec(text);
  if (!match) return undefined;
  const [, y, mo, d, h = '00', mi = '00', s = '00', fraction = '', offset = 'Z'] = match;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 60) return undefined;
  let offsetMinutes = 0;
  if (offset !== 'Z' && offset !== 'z') {
    const digits = offset.replace(':', '');
    const offsetHours = Number(digits.slice(1, 3));
    const offsetMins = Number(digits.slice(3, 5));
    if (offsetHours > 23 || offsetMins > 59) return undefined;
    offsetMinutes = (offsetHours * 60 + offsetMins) * (digits[0] === '-' ? -1 : 1);
  }
  // Date.UTC maps years 0-99 to 1900-1999; setUTCFullYear does not.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  // A leap second (:60) has no instant of its own in Unix time: it is read as
  // the last microsecond of second :59, so it still sorts inside its minute.
  const leapSecond = second === 60;
  date.setUTCHours(hour, minute, leapSecond ? 59 : second, 0);
  const epochSeconds = date.getTime() / 1000 - offsetMinutes * 60;
  const utcYear = new Date(epochSeconds * 1000).getUTCFullYear();
  if (utcYear < 0 || utcYear > 9999) return undefined;
  // Truncated, not rounded: rounding could carry into the next second.
  return formatEpochSeconds(epochSeconds, leapSecond ? '999999' : fraction.slice(0, 6).padEnd(6, '0'));
}

/** Whole Unix seconds plus a six-digit fraction, in the canonical form. */
export function formatEpochSeconds(epochSeconds: number, micros = '000000'): string {
  const date = new Date(epochSeconds * 1000);
  const year = date.getUTCFullYear();
  if (year < 0 || year > 9999) throw new RangeError('timestamp outside years 0000-9999');
  return `${date.toISOString().slice(0, 19)}.${micros}+00:00`;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}
