/**
 * The administration commands' options that have a default or a range, in one table: the
 * parsers read their bounds from it, and test/package/cli-docs.test.ts compares it with the
 * table in docs/cli.md#options-with-defaults-and-ranges, so the two cannot drift apart.
 */
import { DEFAULT_BATCH_SIZE } from '../../storage/mysql/index.js';

export interface OptionLimit {
  command: string;
  option: string;
  /** As the docs write it; undefined: no default (the option is off unless given). */
  default: string | undefined;
  /** Smallest and largest value, as the docs write them. */
  min: string;
  max: string;
}

/** Users per transaction of an import: the library's own default, so the two cannot differ. */
export const BATCH_SIZE = { default: DEFAULT_BATCH_SIZE, min: 1, max: 100_000 } as const;
/** How long rolled keys keep working, in seconds. */
export const EXPIRE_OLD_IN = { min: 1, max: 366 * 86_400 } as const;

export const OPTION_LIMITS: readonly OptionLimit[] = [
  { command: 'import', option: '--batch-size', default: String(BATCH_SIZE.default), min: String(BATCH_SIZE.min), max: String(BATCH_SIZE.max) },
  { command: 'merchant rotate-key', option: '--expire-old-in', default: undefined, min: `${EXPIRE_OLD_IN.min}s`, max: `${EXPIRE_OLD_IN.max / 86_400}d` },
  { command: 'webhook rotate-secret', option: '--expire-old-in', default: undefined, min: `${EXPIRE_OLD_IN.min}s`, max: `${EXPIRE_OLD_IN.max / 86_400}d` },
];
