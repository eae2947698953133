/**
 * `merchant-api throttle list|unblock`: the failed-authentication throttle's blocks as the
 * servers share them on MySQL (docs/security.md#lifting-a-block). `unblock` marks the rows
 * lifted; every server reads the change within its poll interval (a second by default) and
 * drops the block, whichever instance made it.
 */
import { liftThrottleBlocks, listThrottleBlocks } from '../../storage/mysql/index.js';
import { addressKey, isShareableAddress, merchantIdProblem } from '../../cli-internal.js';
import type { CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';
import type { MysqlConfig } from '../config.js';
import { logAdminChange } from './admin-log.js';
import { runMysqlCommand, withDatabase } from './mysql-env.js';
import { commandGroup, parseCommandArgs } from './parse-args.js';

const USAGE = `Usage: merchant-api throttle <subcommand>   (the MySQL shared throttle)
  list [--json]                         blocks in force: address, merchant, until when
  unblock --address A [--merchant ID]   lift the blocks of address A (its own and every merchant's from it),
                                        or with --merchant only that merchant's from A; every server within a second`;

/** Most blocks `list` shows. */
const LIST_LIMIT = 1000;

/**
 * The throttle's key of a client address, as the servers store it in `auth_failures.address`:
 * the servers' own rule (an IPv6 address counts per IPV6_PREFIX network), so that an operator
 * types the address a log line shows, or the network a `throttle list` shows, and `unblock`
 * finds the row.
 */
export function throttleKeyOfAddress(address: string, ipv6Prefix: number): string {
  return addressKey(address, ipv6Prefix);
}

/** The `throttle` command. */
export const throttleCommand = commandGroup('throttle', USAGE, { list, unblock });

async function list(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parseCommandArgs(args, { json: { type: 'boolean' } }, USAGE);
  if (parsed === 'help') return help(io);
  if (parsed.positionals.length > 0) throw new CliUsageError(`throttle list takes no arguments.\n${USAGE}`);
  return runMysqlCommand(io, 'throttle list', () =>
    withDatabase(config, async (db) => {
      const now = Math.floor(Date.now() / 1000);
      const blocks = await listThrottleBlocks(db, now, LIST_LIMIT);
      if (parsed.values.json) {
        io.out(JSON.stringify(blocks.map((b) => ({ ...b, blocked_until: new Date(b.blocked_until * 1000).toISOString(), seconds_left: b.blocked_until - now }))));
        return 0;
      }
      if (blocks.length === 0) {
        io.out('No blocks in force.');
        return 0;
      }
      const rows = [['ADDRESS', 'MERCHANT', 'BLOCKED UNTIL (UTC)', 'SECONDS LEFT', 'BLOCKS'], ...blocks.map((b) => [b.address, b.merchant_id ?? '(every merchant)', new Date(b.blocked_until * 1000).toISOString().slice(0, 19), String(b.blocked_until - now), b.scope === 'pair' ? String(b.blocks) : '-'])];
      const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
      for (const row of rows) io.out(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd());
      if (blocks.length === LIST_LIMIT) io.out(`(the ${LIST_LIMIT} longest blocks; there may be more)`);
      return 0;
    }),
  );
}

async function unblock(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parseCommandArgs(args, { address: { type: 'string' }, merchant: { type: 'string' } }, USAGE);
  if (parsed === 'help') return help(io);
  const address = parsed.values.address as string | undefined;
  const merchantId = parsed.values.merchant as string | undefined;
  if (address === undefined || parsed.positionals.length > 0) throw new CliUsageError(`Give the client address: throttle unblock --address A [--merchant ID].\n${USAGE}`);
  const key = throttleKeyOfAddress(address.trim(), config.ipv6Prefix);
  if (!isShareableAddress(key)) throw new CliUsageError(`--address must be a client address as the access log shows it (printable ASCII, at most 64 characters).`);
  if (merchantId !== undefined && merchantIdProblem(merchantId) !== undefined) throw new CliUsageError(`--merchant: ${merchantIdProblem(merchantId)}.`);
  return runMysqlCommand(io, 'throttle unblock', () =>
    withDatabase(config, async (db) => {
      const changed = await liftThrottleBlocks(db, key, merchantId);
      const who = merchantId === undefined ? `address ${key} (and every merchant from it)` : `merchant "${merchantId}" from address ${key}`;
      if (changed === 0) {
        io.out(`Nothing to lift: no failures are counted for ${who}.`);
        return 0;
      }
      logAdminChange(io, 'throttle_unblocked', { client_address: key, merchant_id: merchantId ?? null, rows: changed }, 'throttle block lifted');
      io.out(`Lifted the block of ${who}, and its count starts again; every server drops it within about a second.`);
      return 0;
    }),
  );
}

function help(io: CliIo): number {
  io.out(USAGE);
  return 0;
}
