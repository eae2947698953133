/**
 * `REMOVAL_RETENTION`: how long the change feed's tombstones of removed shares are kept
 * (docs/protocol.md#removals), and their prune, which `migrate` and the server run as they do the
 * audit trail's. A feed asked from before a pruned removal answers 410 `gone`.
 */
import { pruneShareRemovals } from '../../storage/mysql/index.js';
import { CliUsageError } from '../usage-error.js';

/** Default `REMOVAL_RETENTION`: 30 days. */
export const DEFAULT_REMOVAL_RETENTION_DAYS = 30;

/** `REMOVAL_RETENTION` in seconds: days (`30`) or a duration (`30d`, `720h`); at least one day. */
export function removalRetentionSeconds(env: Record<string, string | undefined>): number {
  const text = env.REMOVAL_RETENTION?.trim();
  if (text === undefined || text === '') return DEFAULT_REMOVAL_RETENTION_DAYS * 86_400;
  const match = /^(\d{1,6})([smhd]?)$/.exec(text);
  const seconds = match ? Number(match[1]) * ({ '': 86_400, s: 1, m: 60, h: 3600, d: 86_400 } as Record<string, number>)[match[2]!]! : Number.NaN;
  if (!(seconds >= 86_400)) throw new CliUsageError(`REMOVAL_RETENTION must be at least one day: days (30) or a duration (30d); got ${JSON.stringify(text.slice(0, 40))}.`);
  return seconds;
}

/** Prunes the tombstones by `REMOVAL_RETENTION`; resolves to how many went. */
export async function pruneRemovals(db: Parameters<typeof pruneShareRemovals>[0], env: Record<string, string | undefined>): Promise<number> {
  return pruneShareRemovals(db, removalRetentionSeconds(env));
}
