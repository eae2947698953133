/**
 * What "never a second 200" needs of MySQL's durability (docs/mysql.md#durability): a salt is
 * recorded by a commit, and a commit a crash takes back is a salt forgotten, so a URL accepted
 * just before the crash is accepted again after it, for as long as its timestamp is within the
 * tolerance. Checked when `serve` starts, as the Redis check refuses an evicting policy:
 *
 * - `innodb_flush_log_at_trx_commit=0` (the log written once a second): a crash of the server
 *   process alone loses the last second. On one server that is any crash; on Galera it is every
 *   node's process crashing within that second (Jepsen, MDEV-38977), which a shared bug or a
 *   cluster-wide kill makes routine. The promise would be false: refused.
 * - `innodb_flush_log_at_trx_commit=2` (written at commit, flushed once a second): a process crash
 *   loses nothing (the OS holds the write), a crash of the machine loses the last second; on
 *   Galera only when every node's machine fails within that second. Warned, not refused: the
 *   promise narrows to process crashes, which operators may choose knowingly.
 * - `sync_binlog` other than 1 with the binary log on: a crash of the machine may lose commits
 *   whose binary log was not flushed (recovery rolls them back) and leave replicas ahead of the
 *   primary. Warned, for the same reason.
 * - A setting the server will not show (a proxy or a server without the variable): the check
 *   cannot tell, so it says so (the caller warns) and does not refuse.
 */
import { sql, type Kysely } from 'kysely';
import { mysqlErrorCode } from './storage-error.js';

export interface DurabilitySettings {
  flushLogAtTrxCommit: number;
  logBin: boolean;
  syncBinlog: number;
  /** A Galera node (a wsrep provider is loaded): the promise then rests on every node. */
  galera: boolean;
}

export interface DurabilityFinding {
  setting: 'innodb_flush_log_at_trx_commit' | 'sync_binlog';
  value: number;
  /** `refuse`: the promise would be false on a process crash; `warn`: false on a machine crash only. */
  verdict: 'refuse' | 'warn';
  /** What is lost and how to mend it; names no value but the setting's. */
  problem: string;
}

export interface DurabilityReport {
  findings: DurabilityFinding[];
  /** Set when the server would not show its settings: why (the error code). Nothing is then refused. */
  unreadable?: string;
}

const FIX_FLUSH = 'set innodb_flush_log_at_trx_commit=1';

/** The verdicts on `settings`; empty when every salt a commit recorded survives a crash. */
export function durabilityFindings(settings: DurabilitySettings): DurabilityFinding[] {
  const findings: DurabilityFinding[] = [];
  const { flushLogAtTrxCommit: flush, galera } = settings;
  const everywhere = galera ? ' on every node' : '';
  if (flush === 0) {
    findings.push({
      setting: 'innodb_flush_log_at_trx_commit',
      value: 0,
      verdict: 'refuse',
      problem: galera
        ? `innodb_flush_log_at_trx_commit is 0 on this Galera node: InnoDB writes its log once a second, so when every node's server process crashes within a second (a coordinated crash, as Jepsen found: MDEV-38977) the last second of commits is lost on all of them, and signed URLs accepted in it are accepted again (${FIX_FLUSH}${everywhere})`
        : `innodb_flush_log_at_trx_commit is 0: InnoDB writes its log once a second, so a crash of the server process loses up to a second of commits, and signed URLs accepted in it are accepted again after the restart (${FIX_FLUSH})`,
    });
  } else if (flush === 2) {
    findings.push({
      setting: 'innodb_flush_log_at_trx_commit',
      value: 2,
      verdict: 'warn',
      problem: galera
        ? `innodb_flush_log_at_trx_commit is 2 on this Galera node: commits reach the disk once a second, so when every node's machine fails within a second (a power loss of the whole cluster; MDEV-38977) the last second of salts is lost and signed URLs accepted in it are accepted again; a crash of the server processes alone loses nothing (${FIX_FLUSH}${everywhere})`
        : `innodb_flush_log_at_trx_commit is 2: commits reach the disk once a second, so a crash of the machine (power loss, kernel panic) loses up to a second of salts and signed URLs accepted in it are accepted again; a crash of the server process alone loses nothing (${FIX_FLUSH})`,
    });
  }
  if (settings.logBin && settings.syncBinlog !== 1) {
    findings.push({
      setting: 'sync_binlog',
      value: settings.syncBinlog,
      verdict: 'warn',
      problem: `sync_binlog is ${settings.syncBinlog} with the binary log on: the binary log is not flushed at each commit, so a crash of the machine may take back commits (recovery rolls back those the binary log lacks), salts among them, and leave replicas ahead of the primary (set sync_binlog=1${everywhere})`,
    });
  }
  return findings;
}

/**
 * Reads the settings of the server under `db` and judges them. A server that answers with an
 * error (the variable unknown, access refused by a proxy) makes an `unreadable` report; a server
 * that does not answer at all rejects, as every start-up query does.
 */
export async function durabilityReport(db: Kysely<any>): Promise<DurabilityReport> {
  let row;
  try {
    ({
      rows: [row],
    } = await sql<{ flush: string | number; log_bin: string | number; sync_binlog: string | number }>`SELECT @@global.innodb_flush_log_at_trx_commit AS flush, @@global.log_bin AS log_bin, @@global.sync_binlog AS sync_binlog`.execute(db));
  } catch (error) {
    const code = mysqlErrorCode(error);
    if (code?.startsWith('ER_')) return { findings: [], unreadable: code };
    throw error;
  }
  const flush = Number(row?.flush);
  const syncBinlog = Number(row?.sync_binlog);
  if (!Number.isInteger(flush) || !Number.isInteger(syncBinlog)) return { findings: [], unreadable: 'no value' };
  const on = (value: string | number | undefined) => Number(value) === 1 || String(value).toUpperCase() === 'ON';
  return { findings: durabilityFindings({ flushLogAtTrxCommit: flush, logBin: on(row?.log_bin), syncBinlog, galera: await isGaleraNode(db) }) };
}

async function isGaleraNode(db: Kysely<any>): Promise<boolean> {
  try {
    const { rows } = await sql<{ provider: string | null }>`SELECT @@global.wsrep_provider AS provider`.execute(db);
    const provider = rows[0]?.provider ?? '';
    return provider !== '' && provider.toLowerCase() !== 'none';
  } catch (error) {
    // MySQL has no wsrep variables: no Galera.
    if (mysqlErrorCode(error) === 'ER_UNKNOWN_SYSTEM_VARIABLE') return false;
    throw error;
  }
}
