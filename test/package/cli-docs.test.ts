/**
 * docs/cli.md#options-with-defaults-and-ranges against the parsers' own table
 * (src/cli/commands/option-limits.ts), both ways, and the parsers against that table: a
 * default or a range changed in one place and not the other fails here.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BATCH_SIZE, EXPIRE_OLD_IN, OPTION_LIMITS } from '../../src/cli/commands/option-limits.js';
import { parseDuration } from '../../src/cli/commands/duration.js';
import { importCommand } from '../../src/cli/commands/mysql-import.js';
import { readMysqlConfig } from '../../src/cli/config.js';
import { DEFAULT_BATCH_SIZE } from '../../src/storage/mysql/index.js';

const cli = readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8');

/** The rows of the table under `## Options with defaults and ranges`. */
function documentedLimits(): { command: string; option: string; default: string | undefined; min: string; max: string }[] {
  const section = cli.split('\n## Options with defaults and ranges\n')[1]!.split('\n## ')[0]!;
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const [command, option, defaultText, range] = line.split('|').slice(1, -1).map((cell) => cell.trim());
      const [, min, max] = /^`([^`]+)` to `([^`]+)`$/.exec(range!)!;
      return { command: command!.replaceAll('`', ''), option: option!.replaceAll('`', ''), default: defaultText === 'none' ? undefined : defaultText!.replaceAll('`', ''), min: min!, max: max! };
    });
}

describe('docs/cli.md: options with defaults and ranges', () => {
  it('lists exactly the parsers\' table, default and range alike', () => {
    expect(documentedLimits()).toEqual(OPTION_LIMITS.map((limit) => ({ ...limit })));
  });

  it('every other mention of those options in docs/cli.md agrees', () => {
    expect(cli).toContain(`| \`--batch-size N\` | \`${BATCH_SIZE.default}\` | users per statement and transaction, ${BATCH_SIZE.min} to ${BATCH_SIZE.max} |`);
    expect(cli).toContain(`1s to ${EXPIRE_OLD_IN.max / 86_400}d`);
  });

  it('the library\'s default batch size is the CLI\'s', () => {
    expect(DEFAULT_BATCH_SIZE).toBe(BATCH_SIZE.default);
  });

  it('the parsers accept the bounds and refuse one past each', async () => {
    expect(parseDuration(`${EXPIRE_OLD_IN.min}s`, '--x')).toBe(EXPIRE_OLD_IN.min);
    expect(parseDuration(`${EXPIRE_OLD_IN.max / 86_400}d`, '--x')).toBe(EXPIRE_OLD_IN.max);
    expect(() => parseDuration('0s', '--x')).toThrow(/from 1s to 366d/);
    expect(() => parseDuration(`${EXPIRE_OLD_IN.max + 1}`, '--x')).toThrow(/from 1s to 366d/);
    const refused = async (size: number) => {
      const errors: string[] = [];
      const io = { env: {}, out: () => {}, err: (line: string) => errors.push(line) };
      await importCommand(['missing.json', '--batch-size', String(size)], io, readMysqlConfig({})).catch((error: Error) => errors.push(error.message));
      return errors.join('\n');
    };
    // Within the range the file is looked at (and is missing); outside it the option is refused first.
    expect(await refused(BATCH_SIZE.min)).toMatch(/no such file/);
    expect(await refused(BATCH_SIZE.max)).toMatch(/no such file/);
    expect(await refused(BATCH_SIZE.min - 1)).toMatch(new RegExp(`--batch-size must be a whole number from ${BATCH_SIZE.min} to ${BATCH_SIZE.max}`));
    expect(await refused(BATCH_SIZE.max + 1)).toMatch(/--batch-size must be a whole number/);
  });
});
