/**
 * `serve` with DATABASE_READ_URL: the MySQL storage with its user reads on
 * the replica while it keeps up (docs/mysql.md#read-replicas); merchants and
 * keys stay on the primary. When reads move to the primary and back is
 * logged, one event each time (`replica_bypassed`, `replica_used`). The
 * replica is checked at start as DATABASE_URL is: what only configuration
 * mends (an unknown database, access denied, a host name that does not
 * exist) refuses the start; an outage is waited out on the primary.
 */
import { sql } from 'kysely';
import type { Logger, Storage } from '../index.js';
import { configurationProblem } from './commands/mysql-env.js';
import { createMysqlKysely, withReplicaReads, type MasterKey } from '../storage/mysql/index.js';
import type { MysqlConfig } from './config.js';
import type { CliIo } from './io.js';
import { CliUsageError } from './usage-error.js';

export async function withReplicaConfig(primary: Storage, config: MysqlConfig, masterKey: MasterKey, io: CliIo, logger?: Logger): Promise<Storage> {
  if (config.replica === undefined) return primary;
  let replicaDb;
  try {
    replicaDb = createMysqlKysely(config.replica.url, { connectTimeout: config.storageTimeout, queryTimeout: config.storageTimeout });
  } catch (error) {
    await primary.close();
    throw new CliUsageError(`DATABASE_READ_URL: ${(error as Error).message}`);
  }
  try {
    await sql`SELECT 1`.execute(replicaDb);
  } catch (error) {
    const problem = configurationProblem(error, config.replica.url, { dnsAgainIsTransient: true, variable: 'DATABASE_READ_URL' });
    if (problem) {
      await replicaDb.destroy().catch(() => undefined);
      await primary.close();
      throw new CliUsageError(`serve: ${problem} Refusing to start.`);
    }
    io.err(`Warning: the replica of DATABASE_READ_URL does not answer (${(error as { code?: string }).code ?? 'error'}); user reads go to the primary until it does.`);
  }
  return withReplicaReads(primary, {
    replicaDb,
    masterKey,
    maxLagSeconds: config.replica.maxLagSeconds,
    destroyOnClose: true,
    onChange: (usable, reason) => {
      if (logger === undefined) io.err(usable ? `replica_used: user reads go to the replica again: ${reason}.` : `Warning: replica_bypassed: user reads go to the primary: ${reason}.`);
      else if (usable) logger.info({ event: 'replica_used', reason }, 'user reads go to the replica again');
      else logger.warn({ event: 'replica_bypassed', reason }, 'user reads go to the primary');
    },
  });
}
