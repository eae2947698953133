/**
 * The MySQL side of the `merchant-api` bin: `migrate`, `import`,
 * `merchant ...`, and the storage `serve` opens when DATABASE_URL is set.
 * Configuration: DATABASE_URL, MASTER_KEY, KEY_CACHE_TTL (seconds, default
 * 10), STORAGE_TIMEOUT (ms, default 5000: also the per-query timeout).
 */
import type { Logger, Storage } from '../../index.js';
import { createMigrator, createMysqlKysely, MasterKeyError, migrateToLatest, MysqlStorage, openApiKey } from '../../storage/mysql/index.js';
import { storageError } from '../../cli-internal.js';
import type { CliCommand, CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';
import { importCommand } from './mysql-import.js';
import { merchantCommand } from './mysql-merchant.js';
import { throttleCommand } from './mysql-throttle.js';
import { webhookCommand } from './mysql-webhook.js';

export { startWebhookDispatcher } from './mysql-webhook.js';
import { parseCommandArgs } from './parse-args.js';
import type { MysqlConfig } from '../config.js';
import { databaseUrl, runMysqlCommand, withDatabase } from './mysql-env.js';
import { withReplicaConfig } from '../replica-storage.js';

const MIGRATE_USAGE = `Usage: merchant-api migrate [--status]
  (no option)   apply the pending migrations; safe on every deploy
  --status      list the migrations, applied or pending`;

/** `merchant-api migrate [--status]`: applies pending migrations (idempotent), or lists them. */
const migrateCommand: CliCommand = async (args, io, config) => {
  const parsed = parseCommandArgs(args, { status: { type: 'boolean' } }, MIGRATE_USAGE);
  if (parsed === 'help') {
    io.out(MIGRATE_USAGE);
    return 0;
  }
  if (parsed.positionals.length > 0) throw new CliUsageError(`migrate takes no arguments (got "${parsed.positionals[0]}").\n${MIGRATE_USAGE}`);
  const status = Boolean(parsed.values.status);
  return runMysqlCommand(io, 'migrate', () =>
    withDatabase(config, async (db) => {
      if (status) {
        for (const migration of await createMigrator(db).getMigrations()) {
          io.out(`${migration.executedAt ? 'applied' : 'pending'}  ${migration.name}`);
        }
        return 0;
      }
      const { results = [] } = await migrateToLatest(db);
      for (const result of results) io.out(`Applied migration ${result.migrationName}.`);
      io.out(results.length === 0 ? 'The schema is up to date; nothing to apply.' : `The schema is up to date (${results.length} migration(s) applied).`);
      return 0;
    }),
  );
};

/** The MySQL commands, by name, for the CLI's dispatch. */
export const mysqlCommands: Record<string, CliCommand> = {
  migrate: migrateCommand,
  import: importCommand,
  merchant: merchantCommand,
  throttle: throttleCommand,
  webhook: webhookCommand,
};

/**
 * The storage `serve` uses when DATABASE_URL is set. Refuses (usage error)
 * without a valid MASTER_KEY, or when the stored keys were sealed under
 * another one. An unreachable database does not stop the start: the server
 * answers 503 (and /readyz 503) until MySQL answers, then recovers by itself.
 */
export async function openMysqlStorage(config: MysqlConfig, io: CliIo, logger?: Logger): Promise<Storage> {
  const url = databaseUrl(config);
  const key = config.masterKey();
  const ttl = config.keyCacheTtlMs;
  const timeout = config.storageTimeout;
  let db;
  try {
    db = createMysqlKysely(url, { connectTimeout: timeout, queryTimeout: timeout });
  } catch (error) {
    throw new CliUsageError((error as Error).message);
  }
  try {
    const pending = (await createMigrator(db).getMigrations()).filter((migration) => !migration.executedAt);
    if (pending.length > 0) io.err(`Warning: ${pending.length} migration(s) pending; run \`merchant-api migrate\` (until then requests may fail with 503).`);
    const sample = await db.selectFrom('merchant_keys').select(['merchant_id', 'sealed_key']).limit(1).executeTakeFirst();
    if (sample) await openApiKey(key, sample.merchant_id, sample.sealed_key);
  } catch (error) {
    if (error instanceof MasterKeyError) {
      await db.destroy();
      throw new CliUsageError(`${error.message} Refusing to start: set the MASTER_KEY the keys were sealed with.`);
    }
    io.err(`Warning: ${storageError(error, 'start-up check').message} Serving 503 until MySQL answers.`);
  }
  const primary = new MysqlStorage({
    db,
    masterKey: key,
    keyCacheTtlMs: ttl,
    destroyOnClose: true,
    onBackgroundError: (error) => io.err(`Warning: ${error.message}`),
  });
  return withReplicaConfig(primary, config, key, io, logger);
}
