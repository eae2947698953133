/**
 * How far a MySQL or MariaDB replica is behind its primary
 * (docs/mysql.md#read-replicas), read with `SHOW REPLICA STATUS` (MariaDB
 * 10.5+, MySQL 8.0.22+), or `SHOW SLAVE STATUS` on servers that know only
 * that. The user needs the privilege to run it (`REPLICATION CLIENT`, or
 * MariaDB 10.5.9+ `REPLICA MONITOR`/`SLAVE MONITOR`).
 */
import { sql, type Kysely } from 'kysely';

/** The replica's state: its lag in seconds, or why it has none. */
export type ReplicaLag = { seconds: number } | { problem: string; stopped?: true };

export async function readReplicaLag(db: Kysely<any>): Promise<ReplicaLag> {
  let rows: Record<string, unknown>[];
  try {
    rows = (await sql<Record<string, unknown>>`SHOW REPLICA STATUS`.execute(db)).rows;
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'ER_PARSE_ERROR') throw error;
    rows = (await sql<Record<string, unknown>>`SHOW SLAVE STATUS`.execute(db)).rows;
  }
  if (rows.length === 0) return { problem: 'the replica database is not replicating from anywhere' };
  // One row per source (MariaDB multi-source): the most behind decides.
  let worst = 0;
  for (const row of rows) {
    const lag = row.Seconds_Behind_Source ?? row.Seconds_Behind_Master;
    if (lag === null || lag === undefined) return { problem: 'replication is stopped on the replica', stopped: true };
    worst = Math.max(worst, Number(lag));
  }
  return { seconds: worst };
}
