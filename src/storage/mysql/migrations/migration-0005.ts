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
import { sql, type Kysely } from 'kysely';
import type { Migration } from './kysely-migrator.js';

export const userShareUpdatedAt: Migration = {
  async up(db: Kysely<any>) {
    // NOT NULL with a constant default: an instant ALTER on MariaDB 10.3+ and MySQL 8.
    await sql.raw(`ALTER TABLE user_shares ADD COLUMN updated_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00.000000'`).execute(db);
    await sql.raw('UPDATE user_shares SET updated_at = date_joined').execute(db);
    await sql.raw(`ALTER TABLE user_shares
      ALTER COLUMN updated_at SET DEFAULT (UTC_TIMESTAMP(6)),
      ADD KEY user_shares_updated (merchant_id, updated_at, shared_user_id, is_active, date_joined)`).execute(db);
  },
  async down(db: Kysely<any>) {
    await sql.raw(`ALTER TABLE user_shares
      DROP KEY user_shares_updated,
      DROP COLUMN updated_at`).execute(db);
  },
};
