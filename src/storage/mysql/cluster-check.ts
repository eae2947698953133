/**
 * What the storage needs of a Galera node (docs/mysql.md#galera-cluster), checked when `serve`
 * starts, each problem named, as the Redis eviction check names the policy it needs. Galera
 * replicates InnoDB row events only: a statement-based binary log, a session with `wsrep_on` off
 * (a proxy or an init command can set it) or a table on another engine (MyISAM) would leave the
 * other nodes without the writes, so salts accepted on one node would be accepted again on
 * another. A node with `wsrep_dirty_reads` on answers reads even when cut off from the primary
 * component, so a revoked key or a disabled merchant would be served there from its stale copy. On a server that is no Galera node (no wsrep provider: one MariaDB, MySQL) nothing is
 * asked of it and the check answers no problem.
 */
import { sql, type Kysely } from 'kysely';
import { mysqlErrorCode } from './storage-error.js';

/** The Galera problems of the server under `db`, each naming the setting or table; empty when none. */
export async function galeraProblems(db: Kysely<any>): Promise<string[]> {
  let settings;
  try {
    ({
      rows: [settings],
    } = await sql<{ provider: string | null; global_on: string | number; session_on: string | number; binlog_format: string; dirty_reads: string | number }>`SELECT @@global.wsrep_provider AS provider, @@global.wsrep_on AS global_on, @@session.wsrep_on AS session_on, @@session.binlog_format AS binlog_format, @@session.wsrep_dirty_reads AS dirty_reads`.execute(db));
  } catch (error) {
    // MySQL has no wsrep variables: no Galera, nothing to check.
    if (mysqlErrorCode(error) === 'ER_UNKNOWN_SYSTEM_VARIABLE') return [];
    throw error;
  }
  const provider = settings?.provider ?? 'none';
  if (!settings || provider === '' || provider.toLowerCase() === 'none') return [];
  const on = (value: string | number) => Number(value) === 1 || String(value).toUpperCase() === 'ON';
  const problems: string[] = [];
  if (!on(settings.global_on)) problems.push('wsrep_on is OFF on this node although a wsrep_provider is loaded: its writes are not replicated to the other nodes (set wsrep_on=ON)');
  else if (!on(settings.session_on)) problems.push("wsrep_on is OFF in this connection's session (an init command or a proxy set it): its writes are not replicated (leave the session's wsrep_on ON)");
  // A node cut off from the primary component refuses queries, so its servers answer 503; with dirty
  // reads it answers them from its stale copy, and a key revoked on the other nodes is accepted there
  // (seen in test/storage/galera/galera-partition.test.ts).
  if (on(settings.dirty_reads)) problems.push('wsrep_dirty_reads is ON: cut off from the other nodes, this node would go on answering reads from its stale copy, accepting keys revoked on the others (set wsrep_dirty_reads=OFF, globally and in the session)');
  if (String(settings.binlog_format).toUpperCase() !== 'ROW') problems.push(`binlog_format is ${settings.binlog_format}, Galera replicates only ROW events (set binlog_format=ROW)`);
  const { rows: tables } = await sql<{ name: string; engine: string | null }>`SELECT TABLE_NAME AS name, ENGINE AS engine FROM information_schema.TABLES
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE' AND (ENGINE IS NULL OR ENGINE <> 'InnoDB') ORDER BY TABLE_NAME`.execute(db);
  for (const table of tables) problems.push(`table ${table.name} uses the ${table.engine ?? 'unknown'} engine, which Galera does not replicate (ALTER TABLE ${table.name} ENGINE=InnoDB)`);
  return problems;
}
