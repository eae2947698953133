/**
 * `merchant-api audit list`: the audit trail on MySQL (docs/cli.md#the-audit-trail), newest first,
 * paged; and `AUDIT_RETENTION`, the age after which `migrate` and the server prune it.
 */
import { erasureSubject, listAuditEvents, pruneAuditEvents, type AuditRecord } from '../../storage/mysql/index.js';
import type { CliIo } from '../io.js';
import type { MysqlConfig } from '../config.js';
import { CliUsageError } from '../usage-error.js';
import { runMysqlCommand, withDatabase } from './mysql-env.js';
import { commandGroup, parseCommandArgs } from './parse-args.js';

const USAGE = `Usage: merchant-api audit <subcommand>
  list [--merchant ID] [--action A] [--user ID] [--since T] [--limit N] [--before ID] [--json]
        administrative changes, newest first: N per page (default 50, at most 1000);
        --since takes an RFC 3339 time or a duration back (24h, 7d); --before pages on
        (the next page's id is printed last, or "next_before" with --json)`;

export const auditCommand = commandGroup('audit', USAGE, { list });

/** Default `AUDIT_RETENTION`: 400 days. */
export const DEFAULT_AUDIT_RETENTION_DAYS = 400;

/** `AUDIT_RETENTION` in seconds: days (`400`) or a duration (`400d`, `12h`); at least one day. */
export function auditRetentionSeconds(env: Record<string, string | undefined>): number {
  const text = env.AUDIT_RETENTION?.trim();
  if (text === undefined || text === '') return DEFAULT_AUDIT_RETENTION_DAYS * 86_400;
  const match = /^(\d{1,6})([smhd]?)$/.exec(text);
  const seconds = match ? Number(match[1]) * ({ '': 86_400, s: 1, m: 60, h: 3600, d: 86_400 } as Record<string, number>)[match[2]!]! : Number.NaN;
  if (!(seconds >= 86_400)) throw new CliUsageError(`AUDIT_RETENTION must be at least one day: days (400) or a duration (400d); got ${JSON.stringify(text.slice(0, 40))}.`);
  return seconds;
}

/** Prunes the trail by `AUDIT_RETENTION`; resolves to how many events went. */
export async function pruneAuditTrail(db: Parameters<typeof pruneAuditEvents>[0], env: Record<string, string | undefined>): Promise<number> {
  return pruneAuditEvents(db, auditRetentionSeconds(env));
}

async function list(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parseCommandArgs(args, { merchant: { type: 'string' }, action: { type: 'string' }, since: { type: 'string' }, limit: { type: 'string' }, before: { type: 'string' }, user: { type: 'string' }, json: { type: 'boolean' } }, USAGE);
  if (parsed === 'help') {
    io.out(USAGE);
    return 0;
  }
  if (parsed.positionals.length > 0) throw new CliUsageError(`audit list takes no arguments.\n${USAGE}`);
  const limitText = (parsed.values.limit as string | undefined) ?? '50';
  if (!/^\d{1,4}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 1000) throw new CliUsageError('--limit must be a whole number from 1 to 1000.');
  const before = parsed.values.before as string | undefined;
  if (before !== undefined && !/^\d{1,20}$/.test(before)) throw new CliUsageError('--before must be an event id, as the previous page printed it.');
  const since = sinceOf(parsed.values.since as string | undefined);
  // --user ID: the erasures of that shared user id, found by its keyed hash (MASTER_KEY), never stored.
  const user = parsed.values.user as string | undefined;
  const subject = user === undefined ? undefined : erasureSubject(config.masterKey(), user);
  return runMysqlCommand(io, 'audit list', () =>
    withDatabase(config, async (db) => {
      const { events, nextBefore } = await listAuditEvents(db, {
        merchantId: parsed.values.merchant as string | undefined,
        action: parsed.values.action as string | undefined,
        since,
        before,
        subject,
        limit: Number(limitText),
      });
      if (parsed.values.json) {
        io.out(JSON.stringify({ events, next_before: nextBefore ?? null }));
        return 0;
      }
      if (events.length === 0) io.out('No audit events match.');
      for (const event of events) io.out(line(event));
      if (nextBefore !== undefined) io.out(`More: merchant-api audit list --before ${nextBefore} (with the same filters).`);
      return 0;
    }),
  );
}

function line(event: AuditRecord): string {
  const target = [event.merchant_id === null ? undefined : `merchant ${JSON.stringify(event.merchant_id)}`, event.key_id ?? undefined].filter(Boolean).join(' ');
  return `${event.id}  ${event.at}  ${event.actor}  ${event.action}${target ? `  ${target}` : ''}  ${JSON.stringify(event.summary)}`;
}

/** `--since`: an RFC 3339 time, or a duration back from now; canonical UTC. */
function sinceOf(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  const duration = /^(\d{1,6})([smhd])$/.exec(text.trim());
  const at = duration ? Date.now() - Number(duration[1]) * { s: 1, m: 60, h: 3600, d: 86_400 }[duration[2] as 's']! * 1000 : /\d{4}-\d{2}-\d{2}T.*(Z|[+-]\d{2}:\d{2})$/i.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(at)) throw new CliUsageError('--since must be an RFC 3339 time with a zone (2026-11-28T00:00:00Z) or a duration back (24h, 7d).');
  return new Date(at).toISOString().replace('Z', '000+00:00');
}
