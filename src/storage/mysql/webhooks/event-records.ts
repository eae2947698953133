/**
 * The record of a user event that references its share (migration 0010): the import writes
 * `user.shared`, `user.updated` and `user.deactivated` as (merchant, `shared_user_id`, time) with
 * no `data`, and the record is built when it is sent, from the user's row. That row is the state
 * at the change as long as nothing changed the user since, so whatever changes a user first writes
 * the record into every such event of it (`materializeEventsOf`, in the transaction of the
 * change, from the rows as they still are): every attempt of an event sends the same bytes, the
 * state of its change. Only the import writes users; erasure deletes the events with the person.
 */
import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { ChangedUserRecord } from '../../contract.js';
import { userEventData } from '../../webhook-outbox.js';
import { USER_FIELDS, type MerchantApiDatabase } from '../schema.js';
import { canonicalColumn } from '../sql-values.js';

type Db = Kysely<MerchantApiDatabase> | Transaction<MerchantApiDatabase>;

/** The types whose `data` is the user's record (the others carry their data from the start). */
export const RECORD_EVENT_TYPES = ['user.shared', 'user.updated', 'user.deactivated'] as const;

const DATE_FIELDS = new Set<string>(['date_joined', 'deactivated_at', 'agreed_to_terms_and_conditions', 'agreed_to_marketing']);

/** The user's fields of `alias` (the `users` row), canonical as the API answers them, each named `u_<field>`. */
export function recordColumns(alias: string): RawBuilder<unknown> {
  return sql.join(USER_FIELDS.map((field) => (DATE_FIELDS.has(field) ? sql`${canonicalColumn(`${alias}.${field}`)} AS ${sql.ref(`u_${field}`)}` : sql`${sql.ref(`${alias}.${field}`)} AS ${sql.ref(`u_${field}`)}`)));
}

/**
 * An event's `data` from the user's row read with `recordColumns`, the merchant's id of the user
 * and the event's time (canonical): byte for byte what the import would have written with it.
 */
export function eventDataFromRow(row: Record<string, unknown>, sharedUserId: string, eventAt: string): string {
  const record = { shared_user_id: sharedUserId, updated_at: eventAt } as Record<string, string | null>;
  for (const field of USER_FIELDS) record[field] = (row[`u_${field}`] as string | null | undefined) ?? null;
  return userEventData(record as unknown as ChangedUserRecord);
}

/**
 * Writes the record into the events that reference a share of `userIds` and hold none yet, from
 * the users' rows as they are: called in the transaction that is about to change those users,
 * before it does. Returns how many events it wrote.
 */
export async function materializeEventsOf(trx: Db, userIds: readonly string[]): Promise<number> {
  let written = 0;
  for (let i = 0; i < userIds.length; i += 1000) {
    const { rows } = await sql<Record<string, unknown> & { id: string; merchant_id: string; type: string; created_at: string; event_at: string; shared_user_id: string }>`SELECT e.id, e.merchant_id, e.type,
        DATE_FORMAT(e.created_at, '%Y-%m-%d %H:%i:%s.%f') AS created_at, DATE_FORMAT(e.created_at, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS event_at, s.shared_user_id, ${recordColumns('u')}
      FROM user_shares s
      INNER JOIN webhook_events e ON e.merchant_id = s.merchant_id AND e.shared_user_id = s.shared_user_id
      INNER JOIN users u ON u.id = s.user_id
      WHERE s.user_id IN (${sql.join(userIds.slice(i, i + 1000))}) AND e.data IS NULL
      FOR UPDATE`.execute(trx);
    written += await writeData(trx, rows);
  }
  return written;
}

/** Writes the record into every event that holds none (migration 0010's down), in steps. */
export async function materializeAllEvents(db: Db): Promise<number> {
  let written = 0;
  for (;;) {
    const { rows } = await sql<Record<string, unknown> & { id: string; merchant_id: string; type: string; created_at: string; event_at: string; shared_user_id: string }>`SELECT e.id, e.merchant_id, e.type,
        DATE_FORMAT(e.created_at, '%Y-%m-%d %H:%i:%s.%f') AS created_at, DATE_FORMAT(e.created_at, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS event_at, s.shared_user_id, ${recordColumns('u')}
      FROM webhook_events e
      INNER JOIN user_shares s ON s.merchant_id = e.merchant_id AND s.shared_user_id = e.shared_user_id
      INNER JOIN users u ON u.id = s.user_id
      WHERE e.data IS NULL LIMIT 1000`.execute(db);
    if (rows.length === 0) break;
    written += await writeData(db, rows);
  }
  // A reference whose share is gone (a merchant being deleted) has no record to hold: it goes, with its deliveries.
  await sql`DELETE d FROM webhook_deliveries d INNER JOIN webhook_events e ON e.id = d.event_id WHERE e.data IS NULL`.execute(db);
  await sql`DELETE FROM webhook_events WHERE data IS NULL`.execute(db);
  return written;
}

async function writeData(db: Db, rows: ReadonlyArray<Record<string, unknown> & { id: string; merchant_id: string; type: string; created_at: string; event_at: string; shared_user_id: string }>): Promise<number> {
  if (rows.length === 0) return 0;
  // One statement: the rows exist, so each INSERT of its primary key only sets its data.
  const values = rows.map((row) => sql`(${row.id}, ${row.merchant_id}, ${row.type}, ${eventDataFromRow(row, row.shared_user_id, row.event_at)}, ${row.created_at})`);
  await sql`INSERT INTO webhook_events (id, merchant_id, type, data, created_at) VALUES ${sql.join(values)} ON DUPLICATE KEY UPDATE data = VALUES(data)`.execute(db);
  return rows.length;
}
