/**
 * The MySQL side of the `merchant-api` bin: `migrate`, `import`,
 * `merchant ...`, and the storage `serve` opens when DATABASE_URL is set.
 * Configuration: DATABASE_URL, MASTER_KEY, KEY_CACHE_TTL (seconds, default
 * 10), STORAGE_TIMEOUT (ms, default 5000: also the per-query timeout).
 */
import type { Logger, Storage } from '../../index.js';
import { createMigrator, createMysqlKysely, durabilityReport, galeraProblems, MasterKeyError, migrateToLatest, MysqlStorage, openApiKey, pruneIdempotencyKeys, type DurabilityReport, type MigrationHooks } from '../../storage/mysql/index.js';
import { durabilityVerdict } from './mysql-durability.js';
import { storageError } from '../../cli-internal.js';
import type { CliCommand, CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';
import { importCommand } from './mysql-import.js';
import { merchantCommand } from './mysql-merchant.js';
import { throttleCommand } from './mysql-throttle.js';
import { auditCommand, auditRetentionSeconds, pruneAuditTrail } from './mysql-audit.js';
import { pruneRemovals, removalRetentionSeconds } from './mysql-removals.js';
import { userCommand } from './mysql-user.js';
import { webhookCommand } from './mysql-webhook.js';

export { startWebhookDispatcher } from './mysql-webhook.js';
import { parseCommandArgs } from './parse-args.js';
import type { MysqlConfig } from '../config.js';
import { configurationProblem, databaseUrl, runMysqlCommand, withDatabase } from './mysql-env.js';
import { withReplicaConfig } from '../replica-storage.js';

const MIGRATE_USAGE = `Usage: merchant-api migrate [--status]
  (no option)   apply the pending migrations; safe on every deploy
  --status      list the migrations, applied or pending`;

/**
 * What `migrate` says of a migration an earlier run left part-way (killed, or its connection
 * lost), which this run completes; and the suites' hook: with MERCHANT_API_TEST_MIGRATE_PAUSE set to
 * `<migration>:<step number>`, it stops after that step, says so on stderr and waits to be killed
 * (test/storage/mysql/mysql-migrate-killed.test.ts kills it there).
 */
function migrateHooks(io: CliIo): MigrationHooks {
  const resumed = new Set<string>();
  const pauseAt = io.env.MERCHANT_API_TEST_MIGRATE_PAUSE;
  return {
    async afterStep({ migration, step, index, of, outcome }) {
      if (outcome !== 'applied' && !resumed.has(migration)) {
        resumed.add(migration);
        io.out(`Completing migration ${migration}: an earlier migrate stopped part-way through it.`);
      }
      if (outcome === 'found') io.out(`  step ${index} of ${of} (${step}) had finished after that migrate stopped.`);
      if (pauseAt === `${migration}:${index}`) {
        io.err(`migrate paused after step ${index} of ${of} of ${migration} (MERCHANT_API_TEST_MIGRATE_PAUSE)`);
        await new Promise(() => setInterval(() => undefined, 60_000));
      }
    },
  };
}

/** `merchant-api migrate [--status]`: applies pending migrations (idempotent, and completes a run that died), or lists them. */
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
      const { results = [] } = await migrateToLatest(db, migrateHooks(io));
      for (const result of results) io.out(`Applied migration ${result.migrationName}.`);
      io.out(results.length === 0 ? 'The schema is up to date; nothing to apply.' : `The schema is up to date (${results.length} migration(s) applied).`);
      // The audit trail keeps AUDIT_RETENTION (default 400 days); every deploy's migrate prunes it.
      const pruned = await pruneAuditTrail(db, io.env);
      if (pruned > 0) io.out(`Pruned ${pruned} audit event(s) older than AUDIT_RETENTION.`);
      // The change feed's tombstones keep REMOVAL_RETENTION (default 30 days), pruned the same way.
      const removals = await pruneRemovals(db, io.env);
      if (removals > 0) io.out(`Pruned ${removals} share removal(s) older than REMOVAL_RETENTION.`);
      // Idempotency keys live 24 hours (docs/protocol.md#safe-retries); serving instances prune them hourly.
      const keys = await pruneIdempotencyKeys(db);
      if (keys > 0) io.out(`Pruned ${keys} expired idempotency key(s).`);
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
  audit: auditCommand,
  user: userCommand,
  webhook: webhookCommand,
};

/**
 * The storage `serve` uses when DATABASE_URL is set. Refuses (usage error, exit 2)
 * what only a change of configuration mends: no valid MASTER_KEY, stored keys
 * sealed under another one, a URL naming no database, and what the start-up
 * check finds wrong with DATABASE_URL (an unknown database, access denied, a
 * host name that does not exist), named like the admin commands name it.
 * An outage does not stop the start (refused, reset, timed out, a resolver
 * that does not answer): the server answers 503 (and /readyz 503) until MySQL
 * answers, then recovers by itself.
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
  let problems: string[] = [];
  let durability: DurabilityReport | undefined;
  try {
    // What a Galera node must give the storage (docs/mysql.md#galera-cluster): nothing asked of one server.
    problems = await galeraProblems(db);
    // What a salt needs to survive a crash (docs/mysql.md#durability).
    durability = await durabilityReport(db);
    const pending = (await createMigrator(db).getMigrations()).filter((migration) => !migration.executedAt);
    if (pending.length > 0) io.err(`Warning: ${pending.length} migration(s) pending; run \`merchant-api migrate\` (until then requests may fail with 503).`);
    const sample = await db.selectFrom('merchant_keys').select(['merchant_id', 'sealed_key']).limit(1).executeTakeFirst();
    if (sample) await openApiKey(key, sample.merchant_id, sample.sealed_key);
  } catch (error) {
    if (error instanceof MasterKeyError) {
      await db.destroy();
      throw new CliUsageError(`${error.message} Refusing to start: set the MASTER_KEY the keys were sealed with.`);
    }
    const problem = configurationProblem(error, url, { dnsAgainIsTransient: true });
    if (problem) {
      await db.destroy().catch(() => undefined);
      throw new CliUsageError(`serve: ${problem} Refusing to start.`);
    }
    io.err(`Warning: ${storageError(error, 'start-up check').message} Serving 503 until MySQL answers.`);
  }
  if (problems.length > 0) {
    await db.destroy();
    throw new CliUsageError(`This Galera node lacks what the storage needs: ${problems.join('; ')}. Refusing to start.`);
  }
  const refusal = durabilityVerdict(durability, io, logger);
  if (refusal) {
    await db.destroy();
    throw refusal;
  }
  scheduleAuditPrune(db, io);
  const primary = new MysqlStorage({
    db,
    masterKey: key,
    keyCacheTtlMs: ttl,
    destroyOnClose: true,
    onBackgroundError: (error) => io.err(`Warning: ${error.message}`),
  });
  return withReplicaConfig(primary, config, key, io, logger);
}

/** How often a serving instance prunes the audit trail (as `migrate` does on every deploy). */
const AUDIT_PRUNE_INTERVAL_MS = 86_400_000;

/** How often a serving instance prunes expired idempotency keys (they live 24 hours): a row outlives its key by at most this. */
const IDEMPOTENCY_PRUNE_INTERVAL_MS = 3_600_000;

/**
 * Once a day, the events older than AUDIT_RETENTION go, and the share removals older than
 * REMOVAL_RETENTION; the timer never keeps the process alive.
 */
function scheduleAuditPrune(db: Parameters<typeof pruneAuditTrail>[0], io: CliIo): void {
  auditRetentionCheck(io);
  removalRetentionSeconds(io.env);
  const timer = setInterval(() => {
    pruneAuditTrail(db, io.env).catch((error: unknown) => io.err(`Warning: ${storageError(error, 'audit pruning').message}`));
    pruneRemovals(db, io.env).catch((error: unknown) => io.err(`Warning: ${storageError(error, 'removal pruning').message}`));
  }, AUDIT_PRUNE_INTERVAL_MS);
  (timer as { unref?: () => void }).unref?.();
  // Bounded batches (20 of 5,000 rows a run): a larger backlog goes at the next hour's run.
  const keys = setInterval(() => {
    pruneIdempotencyKeys(db).catch((error: unknown) => io.err(`Warning: ${storageError(error, 'idempotency key pruning').message}`));
  }, IDEMPOTENCY_PRUNE_INTERVAL_MS);
  (keys as { unref?: () => void }).unref?.();
}

/** A bad AUDIT_RETENTION refuses the start (usage error), as any bad setting does. */
function auditRetentionCheck(io: CliIo): void {
  auditRetentionSeconds(io.env);
}
