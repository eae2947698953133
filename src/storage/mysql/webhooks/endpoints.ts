/**
 * Webhook endpoints on MySQL (docs/webhooks.md#endpoints), for the CLI and the merchant API: add,
 * list, remove, rotate the secret, enable again, send a test event. The URL is checked by the caller
 * against the address guard of `src/webhooks/` before it comes here; here it is only stored. A
 * secret is sealed under the master key with the merchant id in the JWE header (`key-sealing.ts`):
 * shown once when made, never listed. Every operation given a `merchantId` acts only on that
 * merchant's endpoints: another merchant's id is not found, as one that does not exist. Every
 * change writes its audit event (`webhook_endpoint_added`, ...) in its own transaction, under the
 * `actor` given (the CLI's `--actor`, the API's `merchant:ID key:KEY_ID`; `library` without one),
 * and from the API the id of the key that made it in the row's `key_id` (`keyId`).
 * A transaction that lost a write conflict (a deadlock, a Galera certification failure) runs again,
 * as every administrative change does (`write-conflicts.ts`).
 */
import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import { sealApiKey, type MasterKey } from '../../sql/key-sealing.js';
import { newWebhookEndpointId, newWebhookSecret, rotationOverlapMessage, takeWebhookTest, type WebhookEndpointMode } from '../../webhook-endpoints.js';
import { newEventId, type WebhookEndpointSummary } from '../../webhook-outbox.js';
import type { MerchantApiDatabase } from '../schema.js';
import { DEFAULTS } from '../../../defaults.js';
import { writeAuditEvent } from '../admin/audit.js';
import { fromSqlDatetime } from '../sql-values.js';
import { LIBRARY_ACTOR } from '../admin/merchant-admin.js';
import { retryOnConflict } from '../write-conflicts.js';
import type { WebhookDelivery } from '../../webhook-deliveries.js';
import { deliveryColumns, deliveryOf, type DeliveryRow } from './delivery-rows.js';

type Db = Kysely<MerchantApiDatabase>;

/**
 * The endpoints an operation may act on: of `merchantId` when given, and of `mode` when given (the
 * API always gives it: a test key acts on test endpoints only, a live key on live ones,
 * docs/test-mode.md#webhooks; the operator's CLI gives none and reaches both).
 */
export function endpointScope(merchantId: string | undefined, mode: WebhookEndpointMode | undefined): RawBuilder<unknown> {
  const merchant = merchantId === undefined ? sql`` : sql`AND merchant_id = ${merchantId}`;
  return mode === undefined ? merchant : sql`${merchant} AND mode = ${mode}`;
}

/** An endpoint operation that cannot be done, with a `code` callers switch on. */
export class WebhookAdminError extends Error {
  override name = 'WebhookAdminError';
  constructor(
    readonly code: 'endpoint_not_found' | 'merchant_not_found' | 'too_many_endpoints' | 'endpoint_disabled' | 'rotation_overlapping' | 'too_many_tests',
    message: string,
    /** With `too_many_tests`: the seconds until one more test fits. */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

const summaryColumns = sql`id, merchant_id, url, events, status, disabled_reason, DATE_FORMAT(created_at, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS created_at`;

function summary(row: { id: string; merchant_id: string; url: string; events: string; status: 'enabled' | 'disabled'; disabled_reason: string | null; created_at: string }): WebhookEndpointSummary {
  return { id: row.id, merchantId: row.merchant_id, url: row.url, events: row.events.split(','), status: row.status, disabledReason: row.disabled_reason, createdAt: row.created_at };
}

/**
 * What the audit trail keeps of an endpoint's URL: its origin (scheme, host, port). A receiver's URL
 * often carries a token in its path or query (`/hooks/T0/B0/XXXX`, `?token=...`) or credentials
 * before the host, and the trail must never hold a secret; the endpoint id names the endpoint.
 */
export function auditedUrl(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'invalid';
  }
}

/**
 * Adds an endpoint for `merchantId` receiving `events`; returns it with its secret, the only time
 * the secret is shown. At most `maxPerMerchant` endpoints per merchant (the merchant row is locked,
 * so two adds at once cannot both take the last place). Audited as `webhook_endpoint_added`.
 */
export async function addWebhookEndpoint(db: Db, masterKey: MasterKey, merchantId: string, url: string, events: readonly string[], maxPerMerchant: number = DEFAULTS.webhooks.maxEndpointsPerMerchant, actor: string = LIBRARY_ACTOR, keyId?: string, mode: WebhookEndpointMode = 'live'): Promise<WebhookEndpointSummary & { secret: string }> {
  return retryOnConflict(() => db.transaction().execute(async (trx) => {
    const merchant = await sql<{ id: string }>`SELECT id FROM merchants WHERE id = ${merchantId} FOR UPDATE`.execute(trx);
    if (merchant.rows.length === 0) throw new WebhookAdminError('merchant_not_found', 'No such merchant.');
    // The bound is per mode: test endpoints never take a live one's place.
    const { rows } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM webhook_endpoints WHERE merchant_id = ${merchantId} AND mode = ${mode}`.execute(trx);
    if (Number(rows[0]!.n) >= maxPerMerchant) throw new WebhookAdminError('too_many_endpoints', `A merchant has at most ${maxPerMerchant} webhook endpoints.`);
    const id = newWebhookEndpointId();
    const secret = newWebhookSecret();
    await trx.insertInto('webhook_endpoints').values({ id, merchant_id: merchantId, mode, url, events: events.join(','), sealed_secret: await sealApiKey(masterKey, merchantId, secret) }).execute();
    const { rows: created } = await sql<Parameters<typeof summary>[0]>`SELECT ${summaryColumns} FROM webhook_endpoints WHERE id = ${id}`.execute(trx);
    await writeAuditEvent(trx, actor, { action: 'webhook_endpoint_added', merchantId, keyId, summary: { endpoint_id: id, url_origin: auditedUrl(url), events: [...events], ...(mode === 'test' && { mode }) } });
    return { ...summary(created[0]!), secret };
  }));
}

/** Endpoints, of one merchant or all, oldest first; never a secret. */
export async function listWebhookEndpoints(db: Db, merchantId?: string, read?: <R>(query: RawBuilder<R>) => Promise<R[]>, mode?: WebhookEndpointMode): Promise<WebhookEndpointSummary[]> {
  const where = sql`WHERE 1 = 1 ${endpointScope(merchantId, mode)}`;
  const query = sql<Parameters<typeof summary>[0]>`SELECT ${summaryColumns} FROM webhook_endpoints ${where} ORDER BY created_at, id`;
  // `read`: the merchant's own listing waits on a Galera node for every commit in the cluster (causal-reads.ts),
  // so an endpoint it just added through another node is listed.
  const rows = read ? await read(query) : (await query.execute(db)).rows;
  return rows.map(summary);
}

/** The endpoint `id` (of `merchantId` when given), locked for the change; not found throws. */
async function lockedEndpoint(trx: Transaction<MerchantApiDatabase>, id: string, merchantId: string | undefined, mode?: WebhookEndpointMode): Promise<{ merchant_id: string; url: string; status: string; sealed_secret: string }> {
  const scope = endpointScope(merchantId, mode);
  const { rows } = await sql<{ merchant_id: string; url: string; status: string; sealed_secret: string }>`SELECT merchant_id, url, status, sealed_secret FROM webhook_endpoints WHERE id = ${id} ${scope} FOR UPDATE`.execute(trx);
  const row = rows[0];
  if (row === undefined) throw new WebhookAdminError('endpoint_not_found', 'No such webhook endpoint.');
  return row;
}

/** Removes an endpoint and its deliveries (the events stay until pruned). Audited as `webhook_endpoint_removed`. */
export async function removeWebhookEndpoint(db: Db, id: string, merchantId?: string, actor: string = LIBRARY_ACTOR, keyId?: string, mode?: WebhookEndpointMode): Promise<void> {
  await retryOnConflict(() => db.transaction().execute(async (trx) => {
    const row = await lockedEndpoint(trx, id, merchantId, mode);
    await sql`DELETE FROM webhook_endpoints WHERE id = ${id}`.execute(trx);
    await writeAuditEvent(trx, actor, { action: 'webhook_endpoint_removed', merchantId: row.merchant_id, keyId, summary: { endpoint_id: id, url_origin: auditedUrl(row.url) } });
  }));
}

/**
 * Gives an endpoint a new secret, returned once. The old one keeps signing beside it for
 * `expireOldInMs` (0: it stops at once), so receivers can switch without losing a delivery. An
 * endpoint signs with at most two secrets, and an earlier rotation's overlap runs to the end it was
 * given: a rotation with an overlap while one runs throws `rotation_overlapping` (naming its end);
 * one without replaces the current secret and leaves the running overlap as it is.
 */
export async function rotateWebhookSecret(db: Db, masterKey: MasterKey, id: string, expireOldInMs: number, merchantId?: string, actor: string = LIBRARY_ACTOR, keyId?: string, mode?: WebhookEndpointMode): Promise<{ secret: string; oldExpiresAt: string | null }> {
  return retryOnConflict(() => db.transaction().execute(async (trx) => {
    const row = await lockedEndpoint(trx, id, merchantId, mode);
    const { rows: overlap } = await sql<{ running: number | string | null; ends: string | null }>`SELECT previous_sealed_secret IS NOT NULL AND previous_expires_at > UTC_TIMESTAMP(6) AS running,
      DATE_FORMAT(previous_expires_at, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS ends FROM webhook_endpoints WHERE id = ${id}`.execute(trx);
    const running = Number(overlap[0]!.running) === 1;
    const micros = Math.max(0, Math.round(expireOldInMs * 1000));
    if (micros > 0 && running) throw new WebhookAdminError('rotation_overlapping', rotationOverlapMessage(overlap[0]!.ends!));
    const secret = newWebhookSecret();
    const sealed = await sealApiKey(masterKey, row.merchant_id, secret);
    // Without an overlap, a running one (of an earlier rotation) is left to its end.
    const previous = micros > 0 ? sql`, previous_sealed_secret = ${row.sealed_secret}, previous_expires_at = UTC_TIMESTAMP(6) + INTERVAL ${micros} MICROSECOND`
      : running ? sql`` : sql`, previous_sealed_secret = NULL, previous_expires_at = NULL`;
    await sql`UPDATE webhook_endpoints SET sealed_secret = ${sealed}${previous}, updated_at = UTC_TIMESTAMP(6) WHERE id = ${id}`.execute(trx);
    let oldExpiresAt: string | null = null;
    if (micros > 0) {
      const { rows: after } = await sql<{ expires: string | null }>`SELECT DATE_FORMAT(previous_expires_at, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS expires FROM webhook_endpoints WHERE id = ${id}`.execute(trx);
      oldExpiresAt = after[0]!.expires;
    }
    await writeAuditEvent(trx, actor, { action: 'webhook_secret_rotated', merchantId: row.merchant_id, keyId, summary: { endpoint_id: id, old_expires_at: oldExpiresAt } });
    return { secret, oldExpiresAt };
  }));
}

/**
 * Enables an endpoint again (after a 410 or days of failures); what was cancelled stays cancelled
 * (`redeliver` sends it again). Resolves to false, changing and recording nothing, when it was
 * enabled already; else audited as `webhook_endpoint_enabled` with the reason it was disabled.
 */
export async function enableWebhookEndpoint(db: Db, id: string, merchantId?: string, actor: string = LIBRARY_ACTOR): Promise<boolean> {
  return retryOnConflict(() => db.transaction().execute(async (trx) => {
    const row = await lockedEndpoint(trx, id, merchantId);
    if (row.status === 'enabled') return false;
    const { rows } = await sql<{ reason: string | null }>`SELECT disabled_reason AS reason FROM webhook_endpoints WHERE id = ${id}`.execute(trx);
    await sql`UPDATE webhook_endpoints SET status = 'enabled', disabled_reason = NULL, failing_since = NULL, updated_at = UTC_TIMESTAMP(6) WHERE id = ${id}`.execute(trx);
    await writeAuditEvent(trx, actor, { action: 'webhook_endpoint_enabled', merchantId: row.merchant_id, summary: { endpoint_id: id, disabled_reason: rows[0]?.reason ?? null } });
    return true;
  }));
}

/**
 * Queues a `webhook.test` event for one endpoint, due at once; returns its event id. Within the
 * endpoint's test budget only (`takeWebhookTest`, counted in its row on the database's clock, so
 * across instances): past it, `too_many_tests` with the seconds until one more fits.
 */
export async function sendWebhookTest(db: Db, id: string, merchantId?: string, mode?: WebhookEndpointMode): Promise<string> {
  return retryOnConflict(() => db.transaction().execute(async (trx) => {
    const scope = endpointScope(merchantId, mode);
    const { rows } = await sql<{ merchant_id: string; status: string; now: string; budget_ahead_us: number | string | null }>`SELECT merchant_id, status, DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f') AS now,
        TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), test_budget_until) AS budget_ahead_us
      FROM webhook_endpoints WHERE id = ${id} ${scope} FOR UPDATE`.execute(trx);
    const row = rows[0];
    if (row === undefined) throw new WebhookAdminError('endpoint_not_found', 'No such webhook endpoint.');
    if (row.status !== 'enabled') throw new WebhookAdminError('endpoint_disabled', 'The webhook endpoint is disabled; enable it first.');
    // On the database's clock: `now` is 0 ms, the budget's end is its distance from now.
    const taken = takeWebhookTest(row.budget_ahead_us === null ? 0 : Number(row.budget_ahead_us) / 1000, 0);
    if ('retryAfter' in taken) throw new WebhookAdminError('too_many_tests', 'Too many test events for this endpoint.', taken.retryAfter);
    await sql`UPDATE webhook_endpoints SET test_budget_until = CAST(${row.now} AS DATETIME(6)) + INTERVAL ${Math.round(taken.until * 1000)} MICROSECOND WHERE id = ${id}`.execute(trx);
    const eventId = newEventId();
    await trx.insertInto('webhook_events').values({ id: eventId, merchant_id: row.merchant_id, type: 'webhook.test', data: JSON.stringify({ endpoint_id: id }), created_at: row.now }).execute();
    await trx.insertInto('webhook_deliveries').values({ event_id: eventId, endpoint_id: id, merchant_id: row.merchant_id, next_attempt_at: row.now, created_at: row.now }).execute();
    return eventId;
  }));
}

/** A delivery as `webhook deliveries` lists it: ids, state and the last attempt; never the body (as the API's `deliveryJson`). */
export type WebhookDeliverySummary = WebhookDelivery;

/** The newest deliveries first, of one endpoint and/or in one state; at most `limit`. */
export async function listWebhookDeliveries(db: Db, options: { endpointId?: string; merchantId?: string; state?: string; limit?: number } = {}): Promise<WebhookDeliverySummary[]> {
  const conditions = [sql`1 = 1`];
  if (options.endpointId !== undefined) conditions.push(sql`d.endpoint_id = ${options.endpointId}`);
  if (options.merchantId !== undefined) conditions.push(sql`d.merchant_id = ${options.merchantId}`);
  if (options.state !== undefined) conditions.push(sql`d.state = ${options.state}`);
  const { rows } = await sql<DeliveryRow>`SELECT ${deliveryColumns}
    FROM webhook_deliveries d INNER JOIN webhook_events e ON e.id = d.event_id
    WHERE ${sql.join(conditions, sql` AND `)} ORDER BY d.id DESC LIMIT ${options.limit ?? 100}`.execute(db);
  return rows.map(deliveryOf);
}

/**
 * Sends deliveries again, due at once, with the same event id (receivers deduplicate on it): every
 * delivery of `eventId`, or of `endpointId` created since `since` (`DATETIME(6)` text). Those of a
 * disabled endpoint stay as they are until it is enabled. Returns how many were queued; when some
 * were, audited as `webhook_redelivered` (one event per merchant whose deliveries it queued).
 */
export async function redeliverWebhooks(db: Db, target: { eventId: string } | { endpointId: string; since: string }, actor: string = LIBRARY_ACTOR): Promise<number> {
  const where = 'eventId' in target ? sql`d.event_id = ${target.eventId}` : sql`d.endpoint_id = ${target.endpointId} AND d.created_at >= ${target.since}`;
  return retryOnConflict(() => db.transaction().execute(async (trx) => {
    // Which merchants' deliveries are about to be queued again: read first, under the same lock the update takes.
    const { rows: merchants } = await sql<{ merchant_id: string; n: number | string }>`SELECT d.merchant_id, COUNT(*) AS n FROM webhook_deliveries d INNER JOIN webhook_endpoints p ON p.id = d.endpoint_id
      WHERE ${where} AND p.status = 'enabled' AND (d.state <> 'pending' OR d.leased_until IS NULL) GROUP BY d.merchant_id ORDER BY d.merchant_id FOR UPDATE`.execute(trx);
    const result = await sql`UPDATE webhook_deliveries d INNER JOIN webhook_endpoints p ON p.id = d.endpoint_id
      SET d.state = 'pending', d.next_attempt_at = UTC_TIMESTAMP(6), d.claim_token = NULL, d.leased_until = NULL
      WHERE ${where} AND p.status = 'enabled' AND (d.state <> 'pending' OR d.leased_until IS NULL)`.execute(trx);
    const queued = Number(result.numAffectedRows ?? 0);
    if (queued === 0) return 0;
    const targetSummary: Record<string, string> = 'eventId' in target ? { event_id: target.eventId } : { endpoint_id: target.endpointId, since: fromSqlDatetime(target.since) };
    for (const merchant of merchants) {
      await writeAuditEvent(trx, actor, { action: 'webhook_redelivered', merchantId: merchant.merchant_id, summary: { ...targetSummary, deliveries: Number(merchant.n) } });
    }
    return queued;
  }));
}
