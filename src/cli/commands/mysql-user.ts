/**
 * `merchant-api user erase SHARED_USER_ID [--merchant ID] [--dry-run] [--json]`: erasure on
 * MySQL (docs/cli.md#erasure). Says what went by counts, never by fields; audited.
 */
import { eraseUser } from '../../storage/mysql/index.js';
import type { CliIo } from '../io.js';
import type { MysqlConfig } from '../config.js';
import { CliUsageError } from '../usage-error.js';
import { ACTOR_OPTION, actorOf } from './actor.js';
import { erasureRecordOf, REASON_OPTION } from './erasure-record.js';
import { logAdminChange } from './admin-log.js';
import { runMysqlCommand, withDatabase } from './mysql-env.js';
import { commandGroup, parseCommandArgs } from './parse-args.js';

const USAGE = `Usage: merchant-api user <subcommand>
  erase SHARED_USER_ID [--merchant ID] [--dry-run] [--json] [--actor NAME] [--reason TEXT]
        remove the person's share with merchant ID, or (without --merchant) with every merchant,
        and the person's record once no share remains; --dry-run says what would go. The audit
        trail keeps a keyed hash of the id (audit list --user ID finds it) and --reason
  For many at once: merchant-api import --erase FILE`;

export const userCommand = commandGroup('user', USAGE, { erase });

async function erase(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parseCommandArgs(args, { merchant: { type: 'string' }, 'dry-run': { type: 'boolean' }, json: { type: 'boolean' }, ...ACTOR_OPTION, ...REASON_OPTION }, USAGE);
  if (parsed === 'help') {
    io.out(USAGE);
    return 0;
  }
  if (parsed.positionals.length !== 1 || parsed.positionals[0] === '') throw new CliUsageError(`Give exactly one SHARED_USER_ID.\n${USAGE}`);
  const [sharedUserId] = parsed.positionals as [string];
  const merchantId = parsed.values.merchant as string | undefined;
  const dryRun = Boolean(parsed.values['dry-run']);
  const record = erasureRecordOf(parsed.values, config, dryRun);
  return runMysqlCommand(io, 'user erase', () =>
    withDatabase(config, async (db) => {
      const result = await eraseUser(db, sharedUserId, { merchantId, dryRun, actor: actorOf(parsed.values, io), ...record });
      const scope = merchantId === undefined ? 'every_merchant' : 'one_merchant';
      if (!dryRun && result.shares > 0) logAdminChange(io, 'user_erased', { merchant_id: merchantId ?? null, scope, shares: result.shares, users: result.users, merchants: result.merchants }, 'user erased');
      if (parsed.values.json) {
        io.out(JSON.stringify({ dry_run: dryRun, scope, merchant_id: merchantId ?? null, shares: result.shares, users: result.users, merchants: result.merchants, changed: !dryRun && result.shares > 0 }));
        return 0;
      }
      const where = merchantId === undefined ? 'any merchant' : `merchant "${merchantId}"`;
      if (result.shares === 0) io.out(`No share of this user with ${where}; nothing changed.`);
      else if (dryRun) io.out(`Would remove ${result.shares} share(s) with ${result.merchants} merchant(s) and ${result.users} user record(s); nothing changed (--dry-run).`);
      else io.out(`Removed ${result.shares} share(s) with ${result.merchants} merchant(s) and ${result.users} user record(s) no share remained for.`);
      return 0;
    }),
  );
}
