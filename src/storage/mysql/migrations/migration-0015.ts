/**
 * Migration `0015_idempotency_keys`: one row per `Idempotency-Key` a merchant sent on a POST
 * (docs/protocol.md#safe-retries, src/storage/mysql/statements/idempotency-keys.ts), shared by
 * every instance on the database.
 *
 * - `(merchant_id, idempotency_key)`: a key is the merchant's own; a claim is one insert of it.
 * - `fingerprint`: SHA-256 (hex) of the request's method, path and body; another request with the
 *   key is refused (422).
 * - `claim_token`, `lease_until`: while the request runs; a claim whose lease ran out (its instance
 *   died) is taken over by the next request with the key.
 * - `sealed_answer`: the answer kept, sealed under the master key as API keys are (an endpoint's
 *   creation answers its secret), NULL while running.
 * - `idempotency_keys_expiry (expires_at)`: the prune of expired keys, in bounded batches.
 *
 * One step: a migrate stopped part-way finds the table created or not (resumable.ts).
 */
import { sql, type Kysely } from 'kysely';
import { defineMigration, schemaStep } from './resumable.js';
import { tableExists } from './schema-facts.js';

/** What `idType` in migrations.ts chose for `merchants.id`, so the key's merchant compares alike. */
async function merchantIdType(db: Kysely<any>): Promise<string> {
  const { rows } = await sql<{ collation: string }>`SELECT COLLATION_NAME AS collation FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'merchants' AND COLUMN_NAME = 'id'`.execute(db);
  return `VARCHAR(128) CHARACTER SET utf8mb4 COLLATE ${rows[0]?.collation ?? 'utf8mb4_bin'} NOT NULL`;
}

export const idempotencyKeys = defineMigration('0015_idempotency_keys', {
  up: [
    schemaStep(
      'create idempotency_keys',
      (db) => tableExists(db, 'idempotency_keys'),
      async (db) => {
        const ID = await merchantIdType(db);
        // No foreign key: a removed merchant's keys expire with the rest, and a claim stays one insert.
        await sql.raw(`CREATE TABLE idempotency_keys (
      merchant_id ${ID},
      idempotency_key VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      fingerprint CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      claim_token CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL,
      lease_until DATETIME(6) NULL,
      expires_at DATETIME(6) NOT NULL,
      status SMALLINT UNSIGNED NULL,
      sealed_answer MEDIUMTEXT CHARACTER SET ascii COLLATE ascii_bin NULL,
      PRIMARY KEY (merchant_id, idempotency_key),
      KEY idempotency_keys_expiry (expires_at)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`).execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'drop idempotency_keys',
      run: async (db: Kysely<any>) => {
        await sql.raw('DROP TABLE IF EXISTS idempotency_keys').execute(db);
      },
    },
  ],
});
