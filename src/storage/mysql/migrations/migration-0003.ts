/**
 * Migration `0003_auth_failures`: the counters of the failed-authentication throttle, shared by
 * every instance on the database (docs/security.md#sharing-the-counters-on-mysql). One row per
 * client address (`scope = 'address'`, `merchant_id = ''`) and per (existing merchant, address)
 * (`scope = 'pair'`); every failure changes its rows with one atomic upsert
 * (`throttle-queries.ts`). Times the rules compare (`window_start`, `blocked_until`) are Unix
 * seconds of the handlers' clock; `updated_at` and `expires_at` are the server's, so that which
 * row changed since when never depends on the clocks of the instances:
 * - `auth_failures_changes (updated_at)`: each instance reads the rows changed in the last
 *   second or so, a range of that index;
 * - `auth_failures_blocked (blocked_until)`: an instance that starts reads the blocks in force;
 * - `auth_failures_expiry (expires_at)`: rows that mean nothing any more are deleted in batches.
 * No foreign key to `merchants`: a failure must stay one index write, and a pair row is only
 * ever written for a merchant that exists. Addresses are ASCII, at most 64 characters (an IPv6
 * address with a zone fits); the throttle keeps others local.
 */
import { sql, type Kysely } from 'kysely';
import { defineMigration, schemaStep } from './resumable.js';
import { tableExists } from './schema-facts.js';

/** What `idType` in migrations.ts chose for `merchants.id`, so a pair row holds any merchant id. */
async function merchantIdType(db: Kysely<any>): Promise<string> {
  const { rows } = await sql<{ collation: string }>`SELECT COLLATION_NAME AS collation FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'merchants' AND COLUMN_NAME = 'id'`.execute(db);
  return `VARCHAR(128) CHARACTER SET utf8mb4 COLLATE ${rows[0]?.collation ?? 'utf8mb4_bin'} NOT NULL`;
}

export const authFailures = defineMigration('0003_auth_failures', {
  up: [
    schemaStep(
      'create auth_failures',
      (db) => tableExists(db, 'auth_failures'),
      async (db) => {
        await sql.raw(`CREATE TABLE auth_failures (
      scope ENUM('address','pair') NOT NULL,
      address VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      merchant_id ${await merchantIdType(db)},
      failures INT NOT NULL,
      window_start BIGINT NOT NULL,
      blocks SMALLINT NOT NULL,
      blocked_until BIGINT NOT NULL,
      updated_at DATETIME(6) NOT NULL,
      expires_at DATETIME(6) NOT NULL,
      PRIMARY KEY (scope, address, merchant_id),
      KEY auth_failures_changes (updated_at),
      KEY auth_failures_blocked (blocked_until),
      KEY auth_failures_expiry (expires_at)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`).execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'drop auth_failures',
      run: async (db) => {
        await sql.raw('DROP TABLE IF EXISTS auth_failures').execute(db);
      },
    },
  ],
});
