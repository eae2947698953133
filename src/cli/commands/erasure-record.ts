/**
 * What `user erase` and `import --erase` record of an erasure besides its counts
 * (docs/cli.md#the-audit-trail): the subject, a keyed hash of each shared user id under
 * `MASTER_KEY`, so that `audit list --user ID` finds it; and `--reason`, the operator's note.
 */
import type { ErasureRecordOptions } from '../../storage/mysql/index.js';
import { erasureReasonProblem } from '../../storage/mysql/index.js';
import type { MysqlConfig } from '../config.js';
import { CliUsageError } from '../usage-error.js';

/** The `--reason` option of the erasing commands. */
export const REASON_OPTION = { reason: { type: 'string' } } as const;

/** The record options of an erasure; a dry run records nothing and needs no master key. */
export function erasureRecordOf(values: Record<string, string | boolean | undefined>, config: MysqlConfig, dryRun: boolean): Omit<ErasureRecordOptions, 'actor'> {
  const reason = typeof values.reason === 'string' ? values.reason : undefined;
  if (reason !== undefined) {
    const problem = erasureReasonProblem(reason);
    if (problem !== undefined) throw new CliUsageError(`${problem} (a ticket number or a short note; never personal data: the trail keeps it).`);
  }
  return dryRun ? {} : { masterKey: config.masterKey(), reason };
}
