/**
 * The `merchant-api` command line: dispatches `merchant-api <command> ...`
 * to its command, and turns usage errors into one line and exit code 2.
 */
import { checkCommand } from './commands/check.js';
import type { CliCommand, CliIo } from './io.js';
import { CliUsageError } from './usage-error.js';
import { readMysqlConfig } from './config.js';
import { serveCommand, type ServeRuntime } from './commands/serve.js';

export interface CliRuntime extends ServeRuntime {
  /** Further commands (the MySQL administration: migrate, import, merchant). */
  commands?: Record<string, CliCommand>;
}

const USAGE = `Usage: merchant-api <command>

  serve                                 start the server (default); configured by environment, see docs/configuration.md
  migrate [--status]                    create or update the MySQL schema, or list migrations
  import FILE [--format seed|ndjson] [--batch-size N] [--set-status]
                                        import a seed document or an NDJSON users file into MySQL
  merchant add ID [--disabled] [--json] add a merchant; prints its new API key once
  merchant rotate-key ID [--revoke-old] [--expire-old-in DURATION] [--json]
                                        add a key (printed once); the older ones keep working, stop now, or stop later
  merchant keys ID [--json]             a merchant's keys by id and fingerprint (never the keys)
  merchant revoke-key ID KEY_ID         revoke one key
  merchant delete ID [--yes]            delete a merchant with its keys and user shares
  merchant disable ID | enable ID       block or restore a merchant
  merchant list [--json]                list merchants (never keys)
  throttle list [--json]                failed-authentication blocks in force (MySQL shared throttle)
  throttle unblock --address A [--merchant ID]
                                        lift a block on every server
  check --base-url URL --merchant-id ID as a merchant: test the API key, clock, URL and connection (key from MERCHANT_API_KEY or a prompt)
  help                                  this text

MySQL commands read DATABASE_URL and MASTER_KEY from the environment.`;

export async function runCli(args: string[], io: CliIo, runtime: CliRuntime): Promise<number> {
  const [command = 'serve', ...rest] = args;
  try {
    if (command === 'help' || command === '--help' || command === '-h') {
      io.out(USAGE);
      return 0;
    }
    if (command === 'serve') return await serveCommand(runtime, io, rest);
    if (command === 'check') return await checkCommand(rest, io);
    const other = runtime.commands?.[command];
    if (!other) throw new CliUsageError(`Unknown command "${command}".\n${USAGE}`);
    return await other(rest, io, readMysqlConfig(io.env));
  } catch (error) {
    if (error instanceof CliUsageError) {
      io.err(error.message);
      return 2;
    }
    io.err(`merchant-api ${command} failed: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
    return 1;
  }
}
