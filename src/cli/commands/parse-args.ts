/**
 * `util.parseArgs` for every command, with what its errors lack: `--help`/`-h` on every command
 * prints the command's usage (exit 0), and an unknown or malformed option is one plain sentence
 * followed by the usage (exit 2), not Node's advice about `--`. Commands made of subcommands
 * (`merchant`, `throttle`) are built by `commandGroup`, which names them for the list of every
 * command (`everyCommand` in ../run.ts).
 */
import { parseArgs } from 'node:util';
import type { CliCommand } from '../io.js';
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
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) return unknownOption(option);
  // "argument missing" at the end of the arguments, "argument is ambiguous" before another option.
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option) return `Option ${option} ${/argument (missing|is ambiguous)/.test(message) ? 'needs a value' : 'takes no value'}.`;
  return message.split('. ')[0]!.replace(/\.?$/, '.');
}

/** The one line for an option no command knows (`--bogus=1` is named `--bogus`). */
export function unknownOption(option: string): string {
  return `Unknown option ${option.split('=')[0]}.`;
}

/** A command made of subcommands, with their names. */
export type CommandGroup = CliCommand & { readonly subcommands: readonly string[] };

/**
 * The command `command` made of `subcommands`: runs the one its first argument names with the
 * arguments after it; `--help`, `-h` or `help` prints the usage (exit 0); none, an unknown one or
 * an option is a usage error. Each subcommand parses its own options (`parseCommandArgs`).
 */
export function commandGroup(command: string, usage: string, subcommands: Record<string, CliCommand>): CommandGroup {
  const run: CliCommand = async (args, io, config) => {
    const [sub, ...rest] = args;
    if (sub === '--help' || sub === '-h' || sub === 'help') {
      io.out(usage);
      return 0;
    }
    if (sub?.startsWith('-')) throw new CliUsageError(`${unknownOption(sub)}\n${usage}`);
    const found = sub !== undefined && Object.hasOwn(subcommands, sub) ? subcommands[sub] : undefined;
    if (found === undefined) throw new CliUsageError(sub === undefined ? usage : `Unknown ${command} subcommand "${sub}".\n${usage}`);
    return found(rest, io, config);
  };
  return Object.assign(run, { subcommands: Object.keys(subcommands) });
}

/** Whether `command` is made of subcommands (`commandGroup`). */
export function isCommandGroup(command: CliCommand): command is CommandGroup {
  return Array.isArray((command as Partial<CommandGroup>).subcommands);
}
