/**
 * `serve`'s durability check of MySQL (docs/mysql.md#durability): a setting under which a crash of
 * the server process loses commits refuses the start (exit 2), as an evicting Redis does; one under
 * which only a crash of the machine does is a warning event, `mysql_durability_relaxed`; settings
 * the server will not show are a warning event too, `mysql_durability_unknown`, and the start goes on.
 */
import type { Logger } from '../../index.js';
import type { DurabilityReport } from '../../storage/mysql/index.js';
import type { CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';

/** Logs the warnings of `report`; returns the refusal to throw, if a setting makes the promise false. */
export function durabilityVerdict(report: DurabilityReport | undefined, io: CliIo, logger: Logger | undefined): CliUsageError | undefined {
  const warn = (event: string, fields: Record<string, unknown>, message: string) => {
    if (logger) logger.warn({ event, ...fields }, message);
    else io.err(`Warning: ${event}: ${message}: ${Object.values(fields).join('; ')}.`);
  };
  if (report === undefined) {
    warn('mysql_durability_unknown', { reason: 'MySQL did not answer at start' }, 'the durability settings were not checked');
    return undefined;
  }
  if (report.unreadable !== undefined) {
    warn(
      'mysql_durability_unknown',
      { reason: `the server would not show innodb_flush_log_at_trx_commit and sync_binlog (${report.unreadable})` },
      'check that innodb_flush_log_at_trx_commit=1 (and sync_binlog=1 with a binary log) yourself',
    );
    return undefined;
  }
  for (const finding of report.findings.filter((f) => f.verdict === 'warn')) {
    warn('mysql_durability_relaxed', { setting: finding.setting, value: finding.value, problem: finding.problem }, 'a crash of the machine may let signed URLs be accepted twice');
  }
  const refusals = report.findings.filter((f) => f.verdict === 'refuse');
  if (refusals.length === 0) return undefined;
  return new CliUsageError(`serve: MySQL would forget recorded salts in a crash: ${refusals.map((f) => f.problem).join('; ')}. Refusing to start.`);
}
