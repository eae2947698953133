/**
 * An endpoint's webhook deliveries on MySQL (docs/webhooks.md#deliveries), for the merchant API
 * (`/merchant/webhooks/{id}/deliveries|redeliver`) and the CLI (`webhook deliveries --endpoint`):
 * one page, newest first, and a redelivery of one event or of what was created since a time.
 *
 * Every read walks the index `webhook_deliveries_endpoint (endpoint_id, created_at)` (migration
 * 0013; InnoDB appends the primary key `id`), in the order it is kept: a page reads at most
 * `DELIVERY_SCAN` entries whatever the `state` filter, a redelivery at most `max + 1`.
 * With `merchantId`, only that merchant's endpoint is found: another merchant's is not found, as one
 * that does not exist. A redelivery writes `webhook_redelivered` in its own transaction.
 */
import { sql, type Kysely } from 'kysely';
import { DELIVERY_SCAN, type DeliveryCursor, type DeliveryState, type RedeliveryResult, type WebhookDeliveryPage } from '../../webhook-deliveries.js';
import { deliveryColumns, deliveryOf, type DeliveryRow } from './delivery-rows.js';
import type { MerchantApiDatabase } from '../schema.js';
import { writeAuditEvent } from '../admin/audit.js';
import { LIBRARY_ACTOR } from '../admin/merchant-admin.js';
import { fromSqlDatetime, toSqlDatetime } from '../sql-values.js';
import { retryOnConflict } from '../write-conflicts.js';
import { endpointScope, WebhookAdminError } from './endpoints.js';
import type { WebhookEndpointMode } from '../../webhook-endpoints.js';

type Db = Kysely<MerchantApiDatabase>;

const CANONICAL = '%Y-%m-%dT%H:%i:%s.%f+00:00';

/** The endpoint `id` (of `merchantId` when given) and its status; undefined when there is none. */
async function endpointStatus(db: Db, id: string, merchantId: string | undefined, mode: WebhookEndpointMode | undefined, lock = false): Promise<string | undefined> {
  const scope = endpointScope(merchantId, mode);
  const { rows } = await sql<{ status: string }>`SELECT status FROM webhook_endpoints WHERE id = ${id} ${scope} ${lock ? sql`FOR UPDATE` : sql``}`.execute(db);
  return rows[0]?.status;
}

/** Deliveries older than the cursor, in the index's order (newest first). */
function olderThan(after: DeliveryCursor | undefined) {
  if (after === undefined) return sql``;
  const at = toSqlDatetime(after.createdAt);
  return sql`AND (created_at < ${at} OR (created_at = ${at} AND id < ${after.id}))`;
}

/** Deliveries newer than the cursor, in the index's order (oldest first). */
function newerThan(after: DeliveryCursor | undefined) {
  if (after === undefined) return sql``;
  const at = toSqlDatetime(after.createdAt);
  return sql`AND (created_at > ${at} OR (created_at = ${at} AND id > ${after.id}))`;
}

/**
 * One page of an endpoint's deliveries, newest first (`created_at`, then `id`): at most `limit`,
 * after `after`. In a `state`, at most `DELIVERY_SCAN` deliveries are looked at: a page may come
 * back short with a `next` cursor. Throws `endpoint_not_found` for no such endpoint (of `merchantId`).
 */
export async function listEndpointDeliveryPage(db: Db, query: { endpointId: string; merchantId?: string; mode?: WebhookEndpointMode; state?: DeliveryState; limit: number; after?: DeliveryCursor }): Promise<WebhookDeliveryPage> {
  if ((await endpointStatus(db, query.endpointId, query.merchantId, query.mode)) === undefined) throw new WebhookAdminError('endpoint_not_found', 'No such webhook endpoint.');
  const scan = query.state === undefined ? query.limit + 1 : DELIVERY_SCAN;
  // The index alone gives the order and the bound; the state is read from each row looked at.
  const { rows: scanned } = await sql<{ id: string | number; created: string; state: string }>`SELECT id, DATE_FORMAT(created_at, ${CANONICAL}) AS created, state
    FROM webhook_deliveries FORCE INDEX (webhook_deliveries_endpoint)
    WHERE endpoint_id = ${query.endpointId} ${olderThan(query.after)} ORDER BY created_at DESC, id DESC LIMIT ${scan}`.execute(db);
  const matching = scanned.filter((row) => query.state === undefined || row.state === query.state);
  const taken = matching.slice(0, query.limit);
  const keyOf = (row: { id: string | number; created: string }): DeliveryCursor => ({ createdAt: row.created, id: String(row.id) });
  const next = matching.length > query.limit ? keyOf(taken[taken.length - 1]!) : query.state !== undefined && scanned.length === scan ? keyOf(scanned[scanned.length - 1]!) : null;
  if (taken.length === 0) return { items: [], next };
  const { rows } = await sql<DeliveryRow>`SELECT ${deliveryColumns} FROM webhook_deliveries d INNER JOIN webhook_events e ON e.id = d.event_id
    WHERE d.id IN (${sql.join(taken.map((row) => String(row.id)))}) ORDER BY d.created_at DESC, d.id DESC`.execute(db);
  return { items: rows.map(deliveryOf), next };
}

/**
 * Sends an endpoint's deliveries again, due now, with the same event id (receivers deduplicate on
 * it): those of `eventId`, or the oldest `max` created since `since` (canonical; past `after`, the
 * `next` of the previous call, to go on from). One being sent
 * right now (pending and leased) is left to its attempt. Throws `endpoint_not_found` (none of
 * `merchantId`) and `endpoint_disabled`. When some were queued, audited as `webhook_redelivered`
 * in the same transaction, under `actor`, with the key that asked (`keyId`, from the API) as its `key_id`.
 */
export async function redeliverEndpointDeliveries(
  db: Db,
  request: { endpointId: string; merchantId?: string; mode?: WebhookEndpointMode; target: { eventId: string } | { since: string; after?: DeliveryCursor }; max: number; keyId?: string },
  actor: string = LIBRARY_ACTOR,
): Promise<RedeliveryResult> {
  const { endpointId, target, max } = request;
  return retryOnConflict(() => db.transaction().execute(async (trx) => {
    // The endpoint's row locked first, as every endpoint change does: a removal or a disabling waits.
    const status = await endpointStatus(trx, endpointId, request.merchantId, request.mode, true);
    if (status === undefined) throw new WebhookAdminError('endpoint_not_found', 'No such webhook endpoint.');
    if (status !== 'enabled') throw new WebhookAdminError('endpoint_disabled', 'The webhook endpoint is disabled; enable it first.');
    const which = 'eventId' in target ? sql`AND event_id = ${target.eventId}` : sql`AND created_at >= ${toSqlDatetime(target.since)} ${newerThan(target.after)}`;
    const { rows: found } = await sql<{ id: string | number; merchant_id: string; created: string; busy: number | string }>`SELECT id, merchant_id, DATE_FORMAT(created_at, ${CANONICAL}) AS created,
        state = 'pending' AND leased_until IS NOT NULL AS busy
      FROM webhook_deliveries FORCE INDEX (webhook_deliveries_endpoint)
      WHERE endpoint_id = ${endpointId} ${which} ORDER BY created_at, id LIMIT ${max + 1} FOR UPDATE`.execute(trx);
    const taken = found.slice(0, max);
    const ids = taken.filter((row) => Number(row.busy) !== 1).map((row) => String(row.id));
    const next = found.length > max ? { createdAt: taken[taken.length - 1]!.created, id: String(taken[taken.length - 1]!.id) } : null;
    if (ids.length === 0) return { matched: taken.length, queued: 0, next };
    const result = await sql`UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = UTC_TIMESTAMP(6), claim_token = NULL, leased_until = NULL
      WHERE id IN (${sql.join(ids)}) AND (state <> 'pending' OR leased_until IS NULL)`.execute(trx);
    const queued = Number(result.numAffectedRows ?? 0);
    const summary: Record<string, string> = 'eventId' in target ? { endpoint_id: endpointId, event_id: target.eventId } : { endpoint_id: endpointId, since: fromSqlDatetime(toSqlDatetime(target.since)) };
    await writeAuditEvent(trx, actor, { action: 'webhook_redelivered', merchantId: taken[0]!.merchant_id, keyId: request.keyId ?? null, summary: { ...summary, deliveries: queued } });
    return { matched: taken.length, queued, next };
  }));
}
