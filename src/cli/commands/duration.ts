/** Durations on the command line: `90s`, `30m`, `24h`, `7d`, or whole seconds. */
import { CliUsageError } from '../usage-error.js';
import { EXPIRE_OLD_IN } from './option-limits.js';

const UNIT_SECONDS: Record<string, number> = { '': 1, s: 1, m: 60, h: 3600, d: 86_400 };

/** Seconds of `text`, or a usage error naming `option` and the accepted forms. */
export function parseDuration(text: string, option: string): number {
  const match = /^(\d{1,9})([smhd]?)$/.exec(text.trim());
  const seconds = match ? Number(match[1]) * UNIT_SECONDS[match[2]!]! : Number.NaN;
  if (!(seconds >= EXPIRE_OLD_IN.min && seconds <= EXPIRE_OLD_IN.max)) {
    throw new CliUsageError(`${option} must be a duration from 1s to 366d: whole seconds, or a number with s, m, h or d (e.g. 24h, 7d).`);
  }
  return seconds;
}
