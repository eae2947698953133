/**
 * The MySQL commands and storage as each runtime's command line offers them,
 * loaded (mysql.ts, and with it Kysely, mysql2 and ioredis) only when one of
 * them runs: `help` and `check` work in an install without the peers
 * (docs/install.md). The subcommands are named here so the list of every
 * command needs nothing loaded; test/cli/every-command.test.ts checks them
 * against mysql.ts's own.
 */
import type { HealthPart, Logger, Storage } from '../../index.js';
import type { WebhookMetrics } from '../../observe/metrics.js';
import type { MysqlConfig } from '../config.js';
import type { CliCommand, CliIo } from '../io.js';

const load = () => import('./mysql.js');

/** The subcommands of each MySQL command that has them. */
export const MYSQL_SUBCOMMANDS: Readonly<Record<string, readonly string[]>> = {
  merchant: ['add', 'add-key', 'update-key', 'disable', 'enable', 'rotate-key', 'keys', 'revoke-key', 'delete', 'list'],
  throttle: ['list', 'unblock'],
  audit: ['list'],
  user: ['erase'],
  webhook: ['add', 'list', 'remove', 'rotate-secret', 'enable', 'deliveries', 'redeliver'],
};

function lazy(name: string): CliCommand {
  const run: CliCommand = async (args, io, config) => (await load()).mysqlCommands[name]!(args, io, config);
  const subcommands = MYSQL_SUBCOMMANDS[name];
  return subcommands ? Object.assign(run, { subcommands: [...subcommands] }) : run;
}

export const mysqlCommands: Record<string, CliCommand> = {
  migrate: lazy('migrate'),
  import: lazy('import'),
  merchant: lazy('merchant'),
  throttle: lazy('throttle'),
  audit: lazy('audit'),
  user: lazy('user'),
  webhook: lazy('webhook'),
};

/** The storage `serve` opens when DATABASE_URL is set (mysql.ts). */
export async function openMysqlStorage(config: MysqlConfig, io: CliIo, logger: Logger): Promise<Storage> {
  return (await load()).openMysqlStorage(config, io, logger);
}

/** The webhook dispatcher `serve` runs on MySQL (mysql-webhook.ts). */
export async function startWebhookDispatcher(config: MysqlConfig, io: CliIo, logger: Logger, metrics?: WebhookMetrics): Promise<{ stop(): Promise<void>; health(): unknown; healthPart(): HealthPart } | undefined> {
  return (await load()).startWebhookDispatcher(config, io, logger, metrics);
}
