/**
 * Migration `0005_user_share_updated_at`: when each share last changed, for listings of what
 * changed since a time (docs/protocol.md#changed-since). `user_shares.updated_at` is
 * `DATETIME(6)` in UTC, stamped by every write of this package (`user-upsert.ts`) when the record
 * or its share changes; existing rows are back-filled from `date_joined`, the last change this
 * database can vouch for. The default (the server's UTC time) is only for rows written by others.
 * `user_shares_updated (merchant_id, updated_at, shared_user_id, is_active, date_joined)`: the
 * keyset of `order=updated_at`, one range per page from `updated_since` or the position; the
 * trailing columns let `active` and the date filters be checked on the index entries alone.
 */
import { sql } from 'kysely';
import { dataStep, defineMigration, schemaStep } from './resumable.js';
import { columnsAbsent, columnsExist, indexExists } from './schema-facts.js';

export const userShareUpdatedAt = defineMigration('0005_user_share_updated_at', {
  up: [
    // NOT NULL with a constant default: an instant ALTER on MariaDB 10.3+ and MySQL 8.
    schemaStep(
      'add updated_at',
      (db) => columnsExist(db, 'user_shares', 'updated_at'),
      async (db) => {
        await sql.raw(`ALTER TABLE user_shares ADD COLUMN updated_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00.000000'`).execute(db);
      },
    ),
    dataStep('fill from date_joined', async (trx) => {
      await sql.raw('UPDATE user_shares SET updated_at = date_joined').execute(trx);
    }),
    schemaStep(
      'default now, add user_shares_updated',
      (db) => indexExists(db, 'user_shares', 'user_shares_updated'),
      async (db) => {
        await sql.raw(`ALTER TABLE user_shares
      ALTER COLUMN updated_at SET DEFAULT (UTC_TIMESTAMP(6)),
      ADD KEY user_shares_updated (merchant_id, updated_at, shared_user_id, is_active, date_joined)`).execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'drop updated_at',
      undone: (db) => columnsAbsent(db, 'user_shares', 'updated_at'),
      run: async (db) => {
        await sql.raw(`ALTER TABLE user_shares
      DROP KEY user_shares_updated,
      DROP COLUMN updated_at`).execute(db);
      },
    },
  ],
});
