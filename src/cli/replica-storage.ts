/**
 * `serve` with DATABASE_READ_URL: the MySQL storage with its user reads on
 * the replica while it keeps up (docs/mysql.md#read-replicas); merchants and
 * keys stay on the primary. When reads move to the primary and back is
 * logged, one event each time (`replica_bypassed`, `replica_used`).
 */
import type { Logger, Storage } from '../index.js';
import { createMysqlKysely, withReplicaReads, type MasterKey } from '../storage/mysql/index.js';
import type { MysqlConfig } from './config.js';
import type { CliIo } from './io.js';
import { CliUsageError } from './usage-error.js';

export function withReplicaConfig(primary: Storage, config: MysqlConfig, masterKey: MasterKey, io: CliIo, logger?: Logger): Storage {
  if (config.replica === undefined) return primary;
  let replicaDb;
  try {
    replicaDb = createMysqlKysely(config.replica.url, { connectTimeout: config.storageTimeout, queryTimeout: config.storageTimeout });
  } catch (error) {
    throw new CliUsageError(`DATABASE_READ_URL: ${(error as Error).message}`);
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
