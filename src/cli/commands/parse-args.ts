/**
 * `util.parseArgs` for the administration commands, with what its errors lack: `--help`/`-h`
 * on every command prints the command's usage (exit 0), and an unknown or malformed option is
 * one plain sentence followed by the usage (exit 2), not Node's advice about `--`.
 */
import { parseArgs } from 'node:util';
import type { CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';

type Options = NonNullable<Parameters<typeof parseArgs>[0]>['options'];

/** The parsed values and positionals, or `'help'` when `--help` was asked for. */
export function parseCommandArgs(args: string[], options: Options, usage: string): { values: Record<string, string | boolean | undefined>; positionals: string[] } | 'help' {
  let parsed;
  try {
    parsed = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (error) {
    throw new CliUsageError(`${plainParseError(error)}\n${usage}`);
  }
  if (parsed.values.help) return 'help';
  return { values: parsed.values as Record<string, string | boolean | undefined>, positionals: parsed.positionals };
}

/** Node's parseArgs message, cut to its first sentence and the option it names. */
function plainParseError(error: unknown): string {
  const { code, message } = error as { code?: string; message: string };
  const option = /'(-[^' ]*)/.exec(message)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) return `Unknown option ${option}.`;
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option) return `Option ${option} ${/argument missing/.test(message) ? 'needs a value' : 'takes no value'}.`;
  return message.split('. ')[0]!.replace(/\.?$/, '.');
}

/**
 * Runs the subcommand `args[0]` names in `subcommands` with the arguments after it;
 * `--help`, `-h` or `help` prints the usage (exit 0), none or an unknown one is a usage error.
 */
export async function runSubcommand(command: string, args: string[], io: CliIo, usage: string, subcommands: Record<string, (rest: string[]) => Promise<number>>): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === '--help' || sub === '-h' || sub === 'help') {
    io.out(usage);
    return 0;
  }
  const run = sub !== undefined && Object.hasOwn(subcommands, sub) ? subcommands[sub] : undefined;
  if (run === undefined) throw new CliUsageError(sub === undefined ? usage : `Unknown ${command} subcommand "${sub}".\n${usage}`);
  return run(rest);
}
