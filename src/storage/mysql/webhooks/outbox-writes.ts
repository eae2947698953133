/**
 * Writing webhook events into the outbox inside the transaction of the change that made them
 * (docs/webhooks.md#delivery): nothing is sent for a change that rolled back, nothing is lost for
 * one that committed. One event per share changed, for merchants with an enabled endpoint that
 * receives its type; each event gets one delivery per such endpoint. A merchant without endpoints
 * costs one indexed read per batch, and an import where no merchant has one writes nothing more.
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import type { ChangedUserRecord } from '../../contract.js';
import { newEventId, unsharedEventData, userEventData } from '../../webhook-outbox.js';
import type { MerchantApiDatabase } from '../schema.js';
import { InfileWriter } from '../admin/infile.js';
import { RECORD_EVENT_TYPES } from './event-records.js';
import { lockShareBatches } from './share-batches.js';

/**
 * Loads rows in bulk (the import's `LOAD DATA LOCAL INFILE` from memory): true when it did, false
 * when LOCAL INFILE is not available here (the rows then go in multi-row INSERTs).
 */
export type BulkLoad = (table: string, columns: string, chunks: Buffer[], rows: number) => Promise<boolean>;

/** Rows from which a bulk load pays (below it, one INSERT is as quick). */
const BULK_FROM = 200;

type Db = Kysely<MerchantApiDatabase> | Transaction<MerchantApiDatabase>;

export type UserEventType = 'user.shared' | 'user.updated' | 'user.deactivated';

/** One change of one share, in that merchant's view. */
export interface ShareChange {
  merchantId: string;
  type: UserEventType | 'user.unshared';
  /**
   * The event's `data`, JSON text (`userEventData`, `unsharedEventData`); null for a user event that
   * references its share (`sharedUserId`), whose record is built when sent (`event-records.ts`).
   */
  data: string | null;
  /** The merchant's id of the user: the share the event is about. */
  sharedUserId?: string;
}

/** `DATETIME(6)` text in UTC → the API's canonical timestamp. */
export function canonicalStamp(stamp: string): string {
  return `${stamp.slice(0, 10)}T${stamp.slice(11, 26)}+00:00`;
}

/**
 * The enabled endpoints of `merchantIds` whose merchant is active, each with the event types it
 * receives. A disabled merchant's endpoints receive nothing (docs/webhooks.md#a-disabled-merchant):
 * its changes write no event, as it may no longer read them either. The merchants' status is a
 * locking read, so it is the latest committed whatever the transaction read before (a `merchant
 * disable` that committed after the import's first batch is seen by its next one), and a disable
 * waits for the change that read it; only merchants with an endpoint are read, so an import where
 * none has one costs nothing more. Only live endpoints: a change of live data never reaches a test
 * endpoint (docs/test-mode.md#webhooks), nor a batch row made of them (`share-batches.ts`). Endpoint rows are read without a lock: the dispatcher's claims
 * and records lock them, and must not wait for an import.
 */
export async function subscribedEndpoints(db: Db, merchantIds: Iterable<string>): Promise<Map<string, Array<{ id: string; events: Set<string> }>>> {
  const ids = [...merchantIds];
  const found = new Map<string, Array<{ id: string; events: Set<string> }>>();
  for (let i = 0; i < ids.length; i += 1000) {
    const { rows } = await sql<{ id: string; merchant_id: string; events: string }>`SELECT id, merchant_id, events FROM webhook_endpoints
      WHERE merchant_id IN (${sql.join(ids.slice(i, i + 1000))}) AND status = 'enabled' AND mode = 'live'`.execute(db);
    for (const row of rows) {
      const list = found.get(row.merchant_id) ?? [];
      list.push({ id: row.id, events: new Set(row.events.split(',')) });
      found.set(row.merchant_id, list);
    }
  }
  const subscribed = [...found.keys()];
  for (let i = 0; i < subscribed.length; i += 1000) {
    const chunk = subscribed.slice(i, i + 1000);
    const { rows } = await sql<{ id: string }>`SELECT id FROM merchants WHERE id IN (${sql.join(chunk)}) AND status = 'active' LOCK IN SHARE MODE`.execute(db);
    const active = new Set(rows.map((row) => row.id));
    for (const id of chunk) if (!active.has(id)) found.delete(id);
  }
  return found;
}

/**
 * Writes an event per change that some endpoint of its merchant receives, and its deliveries, due
 * at once. `stamp` (`DATETIME(6)` text) is the event's time. Returns how many events were written.
 */
export async function writeEvents(db: Db, changes: readonly ShareChange[], stamp: string, endpoints?: Map<string, Array<{ id: string; events: Set<string> }>>, bulk?: BulkLoad): Promise<number> {
  if (changes.length === 0) return 0;
  const subscribers = endpoints ?? (await subscribedEndpoints(db, new Set(changes.map((change) => change.merchantId))));
  if (subscribers.size === 0) return 0;
  const events: Array<{ id: string; merchant_id: string; shared_user_id: string | null; type: string; data: string | null; created_at: string }> = [];
  const deliveries: Array<{ event_id: string; endpoint_id: string; merchant_id: string; next_attempt_at: string; created_at: string }> = [];
  for (const change of changes) {
    const receivers = subscribers.get(change.merchantId)?.filter((endpoint) => endpoint.events.has(change.type));
    if (!receivers || receivers.length === 0) continue;
    const id = newEventId();
    events.push({ id, merchant_id: change.merchantId, shared_user_id: change.sharedUserId ?? null, type: change.type, data: change.data, created_at: stamp });
    for (const endpoint of receivers) deliveries.push({ event_id: id, endpoint_id: endpoint.id, merchant_id: change.merchantId, next_attempt_at: stamp, created_at: stamp });
  }
  if (bulk && events.length >= BULK_FROM) {
    const eventRows = new InfileWriter();
    for (const e of events) eventRows.row([e.id, e.merchant_id, e.shared_user_id, e.type, e.data, e.created_at]);
    if (await bulk('webhook_events', 'id, merchant_id, shared_user_id, type, data, created_at', eventRows.finish(), events.length)) {
      const deliveryRows = new InfileWriter();
      for (const d of deliveries) deliveryRows.row([d.event_id, d.endpoint_id, d.merchant_id, d.next_attempt_at, d.created_at]);
      if (await bulk('webhook_deliveries', 'event_id, endpoint_id, merchant_id, next_attempt_at, created_at', deliveryRows.finish(), deliveries.length)) return events.length;
      // LOCAL INFILE went away between the two statements: the deliveries go in by INSERT.
      await insertRows(db, 'webhook_deliveries', deliveries);
      return events.length;
    }
  }
  await insertRows(db, 'webhook_events', events);
  await insertRows(db, 'webhook_deliveries', deliveries);
  return events.length;
}

async function insertRows<T extends 'webhook_events' | 'webhook_deliveries'>(db: Db, table: T, rows: readonly object[]): Promise<void> {
  for (let i = 0; i < rows.length; i += 1000) await db.insertInto(table).values(rows.slice(i, i + 1000) as never).execute();
}

/** The event of a user record shared with a merchant, in that merchant's view. */
export function userChange(merchantId: string, type: UserEventType, record: ChangedUserRecord): ShareChange {
  return { merchantId, type, data: userEventData(record), sharedUserId: record.shared_user_id };
}

/**
 * The event of a change of the share (`merchantId`, `sharedUserId`) that references it: its record
 * is built from the user's row when sent, the state at the change (`event-records.ts`), so the
 * import writes a small row instead of the record a second time.
 */
export function userReference(merchantId: string, type: UserEventType, sharedUserId: string): ShareChange {
  return { merchantId, type, data: null, sharedUserId };
}

/**
 * Writes a `user.unshared` event for the share (`merchantId`, `sharedUserId`) inside `trx`, the
 * transaction that removes the share (the erasure command of issue 31 calls it); nothing when no
 * endpoint of the merchant receives it. Returns the number of events written (0 or 1).
 */
export async function writeUnsharedEvent(trx: Transaction<MerchantApiDatabase>, merchantId: string, sharedUserId: string): Promise<number> {
  const { rows } = await sql<{ now: string }>`SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f') AS now`.execute(trx);
  const stamp = rows[0]!.now;
  return writeEvents(trx, [{ merchantId, type: 'user.unshared', data: unsharedEventData(sharedUserId, canonicalStamp(stamp)), sharedUserId }], stamp);
}

/**
 * Deletes, inside `trx`, the webhook events of the share (`merchantId`, `sharedUserId`) that hold
 * or reference the person's record, `user.shared`, `user.updated` and `user.deactivated`, with
 * their deliveries, sent or not: an erasure leaves no copy of the person in the outbox (issue 31
 * calls it before `writeUnsharedEvent`). Returns how many events went. One index range
 * (`webhook_events_share`, migration 0010).
 */
export async function eraseWebhookEvents(trx: Transaction<MerchantApiDatabase>, merchantId: string, sharedUserId: string): Promise<number> {
  // A batch row of the merchant being expanded now: its events are waited for, and erased below.
  await lockShareBatches(trx, merchantId);
  const { rows } = await sql<{ id: string }>`SELECT id FROM webhook_events WHERE merchant_id = ${merchantId} AND shared_user_id = ${sharedUserId}
    AND type IN (${sql.join([...RECORD_EVENT_TYPES])}) FOR UPDATE`.execute(trx);
  if (rows.length === 0) return 0;
  const ids = rows.map((row) => row.id);
  await sql`DELETE FROM webhook_deliveries WHERE event_id IN (${sql.join(ids)})`.execute(trx);
  await sql`DELETE FROM webhook_events WHERE id IN (${sql.join(ids)})`.execute(trx);
  return ids.length;
}
