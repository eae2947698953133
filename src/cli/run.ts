/**
 * The `merchant-api` command line: dispatches `merchant-api <command> ...`
 * to its command, and turns usage errors into one line and exit code 2.
 */
import { checkCommand } from './commands/check.js';
import type { CliCommand, CliIo } from './io.js';
import { CliUsageError } from './usage-error.js';
import type { ServeRuntime } from './commands/serve.js';
import { missingPackageMessage } from './missing-package.js';
import { isCommandGroup, parseCommandArgs, unknownOption } from './commands/parse-args.js';

export interface CliRuntime extends ServeRuntime {
  /** Further commands (the MySQL administration: migrate, import, merchant). */
  commands?: Record<string, CliCommand>;
}

const USAGE = `Usage: merchant-api <command>

  serve                                 start the server (default); configured by environment, see docs/configuration.md
  check --base-url URL --merchant-id ID as a merchant: test the API key, clock, URL and connection (key from MERCHANT_API_KEY or a prompt)
  migrate [--status]                    create or update the MySQL schema, or list migrations
  import FILE [--format seed|ndjson] [--batch-size N] [--set-status]
                                        import a seed document or an NDJSON users file into MySQL
  import --erase FILE [--dry-run]       erase the shares an NDJSON file names, and users left with none
  merchant add ID [--disabled] [KEY OPTIONS] [--json]
                                        add a merchant; prints its new API key once
  merchant add-key ID [KEY OPTIONS] [--json]
                                        add a key beside the others (printed once)
  merchant rotate-key ID [--revoke-old] [--expire-old-in DURATION] [KEY OPTIONS] [--json]
                                        add a key (printed once); the older ones keep working, stop now, or stop later
  merchant update-key ID KEY_ID [KEY OPTIONS] [--no-expiry]
                                        change a key's name, scopes, networks or end
  merchant keys ID [--json]             a merchant's keys by id and fingerprint (never the keys)
  merchant revoke-key ID KEY_ID         revoke one key
  merchant delete ID [--yes]            delete a merchant with its keys and user shares
  merchant disable ID | enable ID       block or restore a merchant
  merchant list [--json]                list merchants (never keys)
  user erase SHARED_USER_ID [--merchant ID] [--dry-run]
                                        erase a person's shares, and their record once none remains
  audit list [--merchant ID] [--action A] [--since T] [--json]
                                        administrative changes, newest first
  throttle list [--json]                failed-authentication blocks in force (MySQL shared throttle)
  throttle unblock --address A [--merchant ID]
                                        lift a block on every server
  webhook add|list|remove|rotate-secret|enable|deliveries|redeliver
                                        webhook endpoints of merchants, and their deliveries (docs/webhooks.md)
  help                                  this text

Every command takes --help (-h), which lists its options (KEY OPTIONS: merchant add-key --help).
MySQL commands read DATABASE_URL and MASTER_KEY from the environment.`;

/** The commands of every runtime, by name; a runtime adds its own (`CliRuntime.commands`). */
const BUILT_IN: Record<string, (args: string[], io: CliIo, runtime: CliRuntime) => Promise<number>> = {
  help: async (args, io) => {
    // Words after `help` are ignored, an option is not: `help --bogus` is refused like any other.
    parseCommandArgs(args, {}, USAGE);
    io.out(USAGE);
    return 0;
  },
  // Loaded when run: serve needs prom-client (and the storages' peers), which help and check do not.
  serve: async (args, io, runtime) => (await import('./commands/serve.js')).serveCommand(runtime, io, args),
  check: (args, io) => checkCommand(args, io),
};

/**
 * Every command line this CLI answers, as the words that name it: `merchant-api` itself, each
 * command, and each subcommand of a command made of them (`merchant add`). Every one takes
 * `--help` and refuses an unknown option in one line; test/cli/every-command.test.ts runs them all.
 */
export function everyCommand(commands: CliRuntime['commands'] = {}): string[][] {
  const lines: string[][] = [[]];
  for (const name of [...Object.keys(BUILT_IN), ...Object.keys(commands)]) {
    lines.push([name]);
    const command = Object.hasOwn(commands, name) ? commands[name]! : undefined;
    if (command && isCommandGroup(command)) for (const sub of command.subcommands) lines.push([name, sub]);
  }
  return lines;
}

export async function runCli(args: string[], io: CliIo, runtime: CliRuntime): Promise<number> {
  const [command = 'serve', ...rest] = args;
  try {
    if (command === '--help' || command === '-h') return await BUILT_IN.help!(rest, io, runtime);
    if (command.startsWith('-')) throw new CliUsageError(`${unknownOption(command)}\n${USAGE}`);
    const builtIn = Object.hasOwn(BUILT_IN, command) ? BUILT_IN[command]! : undefined;
    if (builtIn) return await builtIn(rest, io, runtime);
    const other = runtime.commands && Object.hasOwn(runtime.commands, command) ? runtime.commands[command]! : undefined;
    if (!other) throw new CliUsageError(`Unknown command "${command}".\n${USAGE}`);
    const { readMysqlConfig } = await import('./config.js');
    return await other(rest, io, readMysqlConfig(io.env));
  } catch (error) {
    if (error instanceof CliUsageError) {
      io.err(error.message);
      return 2;
    }
    const missing = missingPackageMessage(error);
    if (missing) {
      io.err(missing);
      return 1;
    }
    io.err(`merchant-api ${command} failed: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
    return 1;
  }
}
