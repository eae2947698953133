/**
 * The audit trail (docs/cli.md#the-audit-trail): one row of `audit_events` per administrative
 * change, written by `writeAuditEvent` inside the change's own transaction, so a change without
 * its record (or a record of a change rolled back) cannot happen. A row says when, who (the
 * actor: `--actor`, `MERCHANT_API_ACTOR` or the OS user), what (`action`), which merchant and key,
 * and a summary of ids and counts: never a secret or a user's field (`auditSummaryProblem`
 * refuses anything else before it is written).
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import type { MerchantApiDatabase } from '../schema.js';
import { canonicalColumn, toSqlDatetime } from '../sql-values.js';

type Db = Kysely<MerchantApiDatabase> | Transaction<MerchantApiDatabase>;

/** A value a summary may hold: counts, flags, ids, lists of ids, networks, scopes, times. */
export type AuditValue = string | number | boolean | null | readonly string[];

/** One administrative change, as `writeAuditEvent` records it. */
export interface AuditEvent {
  /** What was done, snake_case: `merchant_added`, `key_updated`, `user_erased`, `webhook_endpoint_added`, ... */
  action: string;
  merchantId?: string | null;
  keyId?: string | null;
  /** What changed, by ids and counts; never a secret or a user's field. */
  summary?: Record<string, AuditValue>;
}

/** An event as `audit list` shows it; `at` canonical UTC. */
export interface AuditRecord {
  id: string;
  at: string;
  actor: string;
  action: string;
  merchant_id: string | null;
  key_id: string | null;
  summary: Record<string, AuditValue>;
}

const ACTION = /^[a-z][a-z0-9_]{0,63}$/;
/** Summary keys that would hold what the trail must never hold. */
const FORBIDDEN_KEYS = /key$|secret|password|token|email|name|street|zip|city|phone/i;
const ALLOWED_KEYS = new Set(['key_id', 'key_ids', 'new_key_id', 'old_key_ids', 'revoked_key_ids', 'expiring_key_ids', 'name_changed']);
const MAX_ACTOR_LENGTH = 128;

/** Why `event` may not be recorded, or undefined. */
export function auditEventProblem(event: AuditEvent): string | undefined {
  if (!ACTION.test(event.action)) return `action ${JSON.stringify(event.action)} must be snake_case, at most 64 characters`;
  for (const key of Object.keys(event.summary ?? {})) {
    if (FORBIDDEN_KEYS.test(key) && !ALLOWED_KEYS.has(key)) return `summary field ${JSON.stringify(key)} may hold a secret or a personal field: the audit trail keeps ids and counts only`;
  }
  return undefined;
}

/** The actor as stored: control characters out, at most 128 characters, `unknown` when empty. */
function storedActor(actor: string): string {
  const clean = actor.replace(/[\u0000-\u001f\u007f-\u009f]/g, '').trim().slice(0, MAX_ACTOR_LENGTH);
  return clean === '' ? 'unknown' : clean;
}

/**
 * Records one administrative change: call it with the transaction of the change (`trx`), so the
 * record and the change commit together. The one function every command uses, and the one a new
 * administrative command calls (webhook endpoints: `action: 'webhook_endpoint_added'`, ...).
 * Throws a `TypeError` for an event that could hold a secret (`auditEventProblem`).
 */
export async function writeAuditEvent(trx: Db, actor: string, event: AuditEvent): Promise<void> {
  const problem = auditEventProblem(event);
  if (problem !== undefined) throw new TypeError(`writeAuditEvent: ${problem}.`);
  await insertAuditRows(trx, actor, [event]);
}

/** Rows of one multi-row insert in `writeAuditEvents`. */
const INSERT_CHUNK = 500;

/** Records several changes at once (an import's per-merchant counts): as `writeAuditEvent`, in chunks. */
export async function writeAuditEvents(trx: Db, actor: string, events: readonly AuditEvent[]): Promise<void> {
  for (const event of events) {
    const problem = auditEventProblem(event);
    if (problem !== undefined) throw new TypeError(`writeAuditEvents: ${problem}.`);
  }
  for (let start = 0; start < events.length; start += INSERT_CHUNK) await insertAuditRows(trx, actor, events.slice(start, start + INSERT_CHUNK));
}

/** One multi-row insert of checked events, at the server's clock. */
async function insertAuditRows(trx: Db, actor: string, events: readonly AuditEvent[]): Promise<void> {
  const stored = storedActor(actor);
  await trx
    .insertInto('audit_events')
    .values(
      events.map((event) => ({
        at: sql<string>`UTC_TIMESTAMP(6)`,
        actor: stored,
        action: event.action,
        merchant_id: event.merchantId ?? null,
        key_id: event.keyId ?? null,
        summary: JSON.stringify(event.summary ?? {}),
      })),
    )
    .execute();
}

/** Filters and the page of `audit list`. */
export interface AuditQuery {
  merchantId?: string;
  action?: string;
  /** Canonical UTC: only events at or after it. */
  since?: string;
  /** Events per page (1-1000). */
  limit: number;
  /** The `next_before` of the previous page: only events older than it. */
  before?: string;
  /** Only erasures of this subject (`erasureSubject`: a keyed hash of a shared user id). */
  subject?: string;
}

/** Newest first, `limit` at most; `nextBefore` pages on (undefined on the last page). */
export async function listAuditEvents(db: Db, query: AuditQuery): Promise<{ events: AuditRecord[]; nextBefore: string | undefined }> {
  let select = db
    .selectFrom('audit_events')
    .select(['id', canonicalColumn<string>('at').as('at'), 'actor', 'action', 'merchant_id', 'key_id', 'summary'])
    .orderBy('id', 'desc')
    .limit(query.limit + 1);
  if (query.merchantId !== undefined) select = select.where('merchant_id', '=', query.merchantId);
  if (query.action !== undefined) select = select.where('action', '=', query.action);
  if (query.since !== undefined) select = select.where('at', '>=', toSqlDatetime(query.since));
  if (query.before !== undefined) select = select.where('id', '<', query.before);
  if (query.subject !== undefined) select = select.where('action', 'in', ['user_erased']).where(sql<string>`JSON_VALUE(summary, '$.subject')`, '=', query.subject);
  const rows = await select.execute();
  const page = rows.slice(0, query.limit);
  const events = page.map((row) => ({ ...row, id: String(row.id), summary: JSON.parse(row.summary) as Record<string, AuditValue> }));
  return { events, nextBefore: rows.length > query.limit ? events.at(-1)!.id : undefined };
}

/** Rows deleted per statement when pruning. */
const PRUNE_BATCH = 5000;

/** Deletes events older than `retentionSeconds`, in batches; resolves to how many went. */
export async function pruneAuditEvents(db: Kysely<MerchantApiDatabase>, retentionSeconds: number): Promise<number> {
  let deleted = 0;
  for (;;) {
    const result = await sql`DELETE FROM audit_events WHERE at < UTC_TIMESTAMP(6) - INTERVAL ${Math.floor(retentionSeconds)} SECOND ORDER BY at LIMIT ${PRUNE_BATCH}`.execute(db);
    const count = Number(result.numAffectedRows ?? 0n);
    deleted += count;
    if (count < PRUNE_BATCH) return deleted;
  }
}
