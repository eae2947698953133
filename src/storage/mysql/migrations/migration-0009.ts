/**
 * Migration `0009_auth_check_reservations`: key checks reserved before their keys are compared
 * (docs/security.md#ten-checks-even-all-at-once), on the throttle's rows of `auth_failures`:
 * - `reserved`: checks under way, of every instance, on this address or pair;
 * - `reserved_until`: Unix second (the handlers' clock) after which they no longer count, so an
 *   instance that died holding some blocks nothing for long;
 * - `reservation`: a random number the last granted reservation wrote, by which the instance that
 *   asked reads whether it was granted (one statement decides and writes, row by row).
 * Columns with defaults: adding them rewrites no row on MariaDB 10.3+ and MySQL 8 (instant).
 */
import { sql } from 'kysely';
import { defineMigration, schemaStep } from './resumable.js';
import { columnsAbsent, columnsExist } from './schema-facts.js';

export const authCheckReservations = defineMigration('0009_auth_check_reservations', {
  up: [
    schemaStep(
      'add reserved, reserved_until and reservation',
      (db) => columnsExist(db, 'auth_failures', 'reserved', 'reserved_until', 'reservation'),
      async (db) => {
        await sql.raw(`ALTER TABLE auth_failures
      ADD COLUMN reserved INT NOT NULL DEFAULT 0,
      ADD COLUMN reserved_until BIGINT NOT NULL DEFAULT 0,
      ADD COLUMN reservation BIGINT NOT NULL DEFAULT 0`).execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'drop reserved, reserved_until and reservation',
      undone: (db) => columnsAbsent(db, 'auth_failures', 'reservation'),
      run: async (db) => {
        await sql.raw('ALTER TABLE auth_failures DROP COLUMN reservation, DROP COLUMN reserved_until, DROP COLUMN reserved').execute(db);
      },
    },
  ],
});
