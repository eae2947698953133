/**
 * Writing webhook events into the outbox inside the transaction of the change that made them
 * (docs/webhooks.md#delivery): nothing is sent for a change that rolled back, nothing is lost for
 * one that committed. One event per share changed, for merchants with an enabled endpoint that
 * receives its type; each event gets one delivery per such endpoint. A merchant without endpoints
 * costs one indexed read per batch, and an import where no merchant has one writes nothing more.
 */
import { randomBytes } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { ChangedUserRecord } from '../../contract.js';
import { unsharedEventData, userEventData } from '../../webhook-outbox.js';
import type { MerchantApiDatabase } from '../schema.js';

type Db = Kysely<MerchantApiDatabase> | Transaction<MerchantApiDatabase>;

export type UserEventType = 'user.shared' | 'user.updated' | 'user.deactivated';

/** One change of one share, in that merchant's view. */
export interface ShareChange {
  merchantId: string;
  type: UserEventType | 'user.unshared';
  /** The event's `data`, JSON text (`userEventData`, `unsharedEventData`). */
  data: string;
}

/** A new event id: `evt_` + 24 random bytes, base64url. */
export function newEventId(): string {
  return `evt_${randomBytes(24).toString('base64url')}`;
}

/** `DATETIME(6)` text in UTC → the API's canonical timestamp. */
export function canonicalStamp(stamp: string): string {
  return `${stamp.slice(0, 10)}T${stamp.slice(11, 26)}+00:00`;
}

/** The enabled endpoints of `merchantIds`, each with the event types it receives. */
export async function subscribedEndpoints(db: Db, merchantIds: Iterable<string>): Promise<Map<string, Array<{ id: string; events: Set<string> }>>> {
  const ids = [...merchantIds];
  const found = new Map<string, Array<{ id: string; events: Set<string> }>>();
  for (let i = 0; i < ids.length; i += 1000) {
    const { rows } = await sql<{ id: string; merchant_id: string; events: string }>`SELECT id, merchant_id, events FROM webhook_endpoints
      WHERE merchant_id IN (${sql.join(ids.slice(i, i + 1000))}) AND status = 'enabled'`.execute(db);
    for (const row of rows) {
      const list = found.get(row.merchant_id) ?? [];
      list.push({ id: row.id, events: new Set(row.events.split(',')) });
      found.set(row.merchant_id, list);
    }
  }
  return found;
}

/**
 * Writes an event per change that some endpoint of its merchant receives, and its deliveries, due
 * at once. `stamp` (`DATETIME(6)` text) is the event's time. Returns how many events were written.
 */
export async function writeEvents(db: Db, changes: readonly ShareChange[], stamp: string, endpoints?: Map<string, Array<{ id: string; events: Set<string> }>>): Promise<number> {
  if (changes.length === 0) return 0;
  const subscribers = endpoints ?? (await subscribedEndpoints(db, new Set(changes.map((change) => change.merchantId))));
  if (subscribers.size === 0) return 0;
  const events: Array<{ id: string; merchant_id: string; type: string; data: string; created_at: string }> = [];
  const deliveries: Array<{ event_id: string; endpoint_id: string; merchant_id: string; next_attempt_at: string; created_at: string }> = [];
  for (const change of changes) {
    const receivers = subscribers.get(change.merchantId)?.filter((endpoint) => endpoint.events.has(change.type));
    if (!receivers || receivers.length === 0) continue;
    const id = newEventId();
    events.push({ id, merchant_id: change.merchantId, type: change.type, data: change.data, created_at: stamp });
    for (const endpoint of receivers) deliveries.push({ event_id: id, endpoint_id: endpoint.id, merchant_id: change.merchantId, next_attempt_at: stamp, created_at: stamp });
  }
  for (let i = 0; i < events.length; i += 1000) await db.insertInto('webhook_events').values(events.slice(i, i + 1000)).execute();
  for (let i = 0; i < deliveries.length; i += 1000) await db.insertInto('webhook_deliveries').values(deliveries.slice(i, i + 1000)).execute();
  return events.length;
}

/** The event of a user record shared with a merchant, in that merchant's view. */
export function userChange(merchantId: string, type: UserEventType, record: ChangedUserRecord): ShareChange {
  return { merchantId, type, data: userEventData(record) };
}

/**
 * Writes a `user.unshared` event for the share (`merchantId`, `sharedUserId`) inside `trx`, the
 * transaction that removes the share (the erasure command of issue 31 calls it); nothing when no
 * endpoint of the merchant receives it. Returns the number of events written (0 or 1).
 */
export async function writeUnsharedEvent(trx: Transaction<MerchantApiDatabase>, merchantId: string, sharedUserId: string): Promise<number> {
  const { rows } = await sql<{ now: string }>`SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f') AS now`.execute(trx);
  const stamp = rows[0]!.now;
  return writeEvents(trx, [{ merchantId, type: 'user.unshared', data: unsharedEventData(sharedUserId, canonicalStamp(stamp)) }], stamp);
}
