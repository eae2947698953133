/**
 * Migration `0010_webhook_event_refs`: a user event references its share instead of holding a
 * copy of the record (docs/webhooks.md#the-outbox), so an import with webhooks writes a small row
 * per change rather than the record a second time.
 * - `webhook_events.shared_user_id`: the merchant's id of the user (with `merchant_id`, the share);
 *   filled from `data` for the events there are, so erasure finds a person's events by index
 *   (`webhook_events_share`) rather than by scanning the merchant's JSON.
 * - `webhook_events.data` may be NULL: the record is built when it is sent, from the user's row,
 *   which is the state at the change until a change of the user writes it into the event first
 *   (`src/storage/mysql/webhooks/event-records.ts`).
 * - `webhook_events_created` and `webhook_deliveries_created` go: event ids begin with the time and
 *   delivery ids grow, so pruning walks each primary key; an import writes two index entries fewer.
 * Down writes the record into every event without one, then restores 0008's table.
 */
import { sql, type Kysely } from 'kysely';
import { materializeAllEvents, RECORD_EVENT_TYPES } from '../webhooks/event-records.js';
import { dataStep, defineMigration, schemaStep } from './resumable.js';
import { columnsAbsent, columnsExist, indexExists } from './schema-facts.js';

/** `user_shares.shared_user_id`'s exact type (NULL allowed), so the join compares like for like. */
async function sharedUserIdType(db: Kysely<any>): Promise<string> {
  const { rows } = await sql<{ type: string; charset: string; collation: string }>`SELECT COLUMN_TYPE AS type, CHARACTER_SET_NAME AS charset, COLLATION_NAME AS collation
    FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'user_shares' AND COLUMN_NAME = 'shared_user_id'`.execute(db);
  const row = rows[0];
  return row ? `${row.type} CHARACTER SET ${row.charset} COLLATE ${row.collation} NULL` : 'VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL';
}

const TYPES = RECORD_EVENT_TYPES.map((type) => `'${type}'`).join(', ');

export const webhookEventRefs = defineMigration('0010_webhook_event_refs', {
  up: [
    schemaStep(
      'events: data nullable, add shared_user_id and webhook_events_share',
      (db) => columnsExist(db, 'webhook_events', 'shared_user_id'),
      async (db) => {
        await sql.raw(`ALTER TABLE webhook_events
      MODIFY data MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
      ADD COLUMN shared_user_id ${await sharedUserIdType(db)} AFTER merchant_id,
      DROP INDEX webhook_events_created,
      ADD KEY webhook_events_share (merchant_id, shared_user_id)`).execute(db);
      },
    ),
    schemaStep(
      'deliveries: drop webhook_deliveries_created',
      async (db) => !(await indexExists(db, 'webhook_deliveries', 'webhook_deliveries_created')),
      async (db) => {
        await sql.raw('ALTER TABLE webhook_deliveries DROP INDEX webhook_deliveries_created').execute(db);
      },
    ),
    // Exactly once (resumable.ts); and only events that hold their record and no reference yet, so
    // that an event written as a reference (data NULL) meanwhile keeps its shared_user_id.
    dataStep('fill shared_user_id from data', async (trx) => {
      await sql.raw(`UPDATE webhook_events SET shared_user_id = JSON_UNQUOTE(JSON_EXTRACT(data, '$.shared_user_id'))
        WHERE type IN (${TYPES}, 'user.unshared') AND shared_user_id IS NULL AND data IS NOT NULL`).execute(trx);
    }),
  ],
  down: [
    { name: 'write every record into its event', undone: (db) => columnsAbsent(db, 'webhook_events', 'shared_user_id'), run: async (db) => void (await materializeAllEvents(db)) },
    {
      name: 'deliveries: add webhook_deliveries_created',
      undone: (db) => indexExists(db, 'webhook_deliveries', 'webhook_deliveries_created'),
      run: async (db) => {
        await sql.raw('ALTER TABLE webhook_deliveries ADD KEY webhook_deliveries_created (created_at)').execute(db);
      },
    },
    {
      name: "events: 0008's table",
      undone: (db) => columnsAbsent(db, 'webhook_events', 'shared_user_id'),
      run: async (db) => {
        await sql.raw(`ALTER TABLE webhook_events
      DROP INDEX webhook_events_share,
      DROP COLUMN shared_user_id,
      MODIFY data MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
      ADD KEY webhook_events_created (created_at)`).execute(db);
      },
    },
  ],
});
