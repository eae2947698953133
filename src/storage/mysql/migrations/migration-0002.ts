/**
 * Migration `0002_user_share_filters`: the list filters move where the keyset order lives.
 * `user_shares` gains copies of its user's `date_joined` and of `deactivated_at IS NULL`
 * (`is_active`), kept in step by every write of this package (`user-upsert.ts`, `new-users.ts`, `import.ts`),
 * and two composite indexes, so that every page of every filtered listing is an index range
 * read of bounded size (docs/protocol.md#filters):
 * - `user_shares_active (merchant_id, is_active, shared_user_id, date_joined)`: `active=`
 *   pages in shared_user_id order, and the bounded scan of a date filter in that order, read
 *   from the index alone;
 * - `user_shares_joined (merchant_id, is_active, date_joined, shared_user_id)`: date ranges,
 *   counted or read in `order=date_joined` (one range per `is_active` value, merged).
 * Existing rows are filled from `users` before the indexes are built; the columns then lose
 * their placeholder defaults, so a writer that does not set them fails instead of storing wrong
 * filters.
 */
import { sql } from 'kysely';
import { dataStep, defineMigration, schemaStep } from './resumable.js';
import { columnsAbsent, columnsExist, indexExists } from './schema-facts.js';

export const userShareFilters = defineMigration('0002_user_share_filters', {
  up: [
    // NOT NULL with a placeholder default: an instant ALTER on MariaDB 10.3+ and MySQL 8.
    schemaStep(
      'add is_active and date_joined',
      (db) => columnsExist(db, 'user_shares', 'is_active', 'date_joined'),
      async (db) => {
        await sql.raw(`ALTER TABLE user_shares
      ADD COLUMN is_active TINYINT(1) NOT NULL DEFAULT 1,
      ADD COLUMN date_joined DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00.000000'`).execute(db);
      },
    ),
    dataStep('fill from users', async (trx) => {
      await sql.raw(`UPDATE user_shares s INNER JOIN users u ON u.id = s.user_id
      SET s.is_active = (u.deactivated_at IS NULL), s.date_joined = u.date_joined`).execute(trx);
    }),
    schemaStep(
      'drop the defaults, add the filter indexes',
      (db) => indexExists(db, 'user_shares', 'user_shares_joined'),
      async (db) => {
        await sql.raw(`ALTER TABLE user_shares
      ALTER COLUMN is_active DROP DEFAULT,
      ALTER COLUMN date_joined DROP DEFAULT,
      ADD KEY user_shares_active (merchant_id, is_active, shared_user_id, date_joined),
      ADD KEY user_shares_joined (merchant_id, is_active, date_joined, shared_user_id)`).execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'drop the columns and indexes',
      undone: (db) => columnsAbsent(db, 'user_shares', 'is_active'),
      run: async (db) => {
        await sql.raw(`ALTER TABLE user_shares
      DROP KEY user_shares_active,
      DROP KEY user_shares_joined,
      DROP COLUMN is_active,
      DROP COLUMN date_joined`).execute(db);
      },
    },
  ],
});
