/**
 * Migration `0011_auth_failures_census`: the throttle's rows of `auth_failures` are bounded whatever
 * the number of attacking addresses (docs/scaling.md#the-throttles-keys), as its keys on Redis are.
 * - `auth_failures_census`: `CENSUS_STRIPES` rows, each counting the rows admitted to its stripe,
 *   so that new rows from many addresses at once do not all wait on one row's lock;
 * - `auth_failures.census_stripe`: the stripe a row was admitted to (NULL: not counted, as the rows
 *   a reservation writes, which live 16 seconds), so the pruning gives each deleted row back to its
 *   stripe.
 * Rows already there are counted into stripe 0, and so bound at once.
 */
import { sql } from 'kysely';
import { dataStep, defineMigration, schemaStep } from './resumable.js';
import { columnsAbsent, columnsExist, tableExists } from './schema-facts.js';

/** Stripes of the census: how many new rows may be admitted at once without waiting on each other. */
export const CENSUS_STRIPES = 16;

export const authFailuresCensus = defineMigration('0011_auth_failures_census', {
  up: [
    schemaStep(
      'create auth_failures_census',
      (db) => tableExists(db, 'auth_failures_census'),
      async (db) => {
        await sql.raw(`CREATE TABLE auth_failures_census (
      stripe TINYINT UNSIGNED NOT NULL PRIMARY KEY,
      held INT NOT NULL DEFAULT 0
    ) ENGINE=InnoDB`).execute(db);
      },
    ),
    schemaStep(
      'add census_stripe',
      (db) => columnsExist(db, 'auth_failures', 'census_stripe'),
      async (db) => {
        await sql.raw('ALTER TABLE auth_failures ADD COLUMN census_stripe TINYINT UNSIGNED NULL DEFAULT NULL').execute(db);
      },
    ),
    // One transaction: the stripes, and the rows already there counted into stripe 0, exactly once
    // (the stripes kept if a release before the steps were recorded wrote them and then died).
    dataStep('count the rows there are', async (trx) => {
      const stripes = Array.from({ length: CENSUS_STRIPES }, (_, stripe) => `(${stripe}, 0)`).join(', ');
      await sql.raw(`INSERT INTO auth_failures_census (stripe, held) VALUES ${stripes} ON DUPLICATE KEY UPDATE stripe = stripe`).execute(trx);
      await sql.raw('UPDATE auth_failures SET census_stripe = 0').execute(trx);
      await sql.raw('UPDATE auth_failures_census SET held = (SELECT COUNT(*) FROM auth_failures) WHERE stripe = 0').execute(trx);
    }),
  ],
  down: [
    {
      name: 'drop census_stripe',
      undone: (db) => columnsAbsent(db, 'auth_failures', 'census_stripe'),
      run: async (db) => {
        await sql.raw('ALTER TABLE auth_failures DROP COLUMN census_stripe').execute(db);
      },
    },
    {
      name: 'drop auth_failures_census',
      run: async (db) => {
        await sql.raw('DROP TABLE IF EXISTS auth_failures_census').execute(db);
      },
    },
  ],
});
