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
import { sql, type Kysely } from 'kysely';
import type { Migration } from './kysely-migrator.js';

export const authCheckReservations: Migration = {
  async up(db: Kysely<any>) {
    await sql.raw(`ALTER TABLE auth_failures
      ADD COLUMN reserved INT NOT NULL DEFAULT 0,
      ADD COLUMN reserved_until BIGINT NOT NULL DEFAULT 0,
      ADD COLUMN reservation BIGINT NOT NULL DEFAULT 0`).execute(db);
  },
  async down(db: Kysely<any>) {
    await sql.raw('ALTER TABLE auth_failures DROP COLUMN reservation, DROP COLUMN reserved_until, DROP COLUMN reserved').execute(db);
  },
};
