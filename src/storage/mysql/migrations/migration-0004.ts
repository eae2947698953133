/**
 * Migration `0004_key_ids`: every API key gets what an operator can name it by, and an end.
 * - `key_id`: a short public id (`key_` and 12 base32 characters), unique over all keys, for
 *   `merchant keys` and `merchant revoke-key`. Existing keys get a random one here.
 * - `fingerprint`: the first 8 bytes of the key's SHA-256, hex, which the merchant can compute
 *   from the key it holds to tell which one it is. Written when a key is created; existing keys
 *   are sealed and this migration has no MASTER_KEY, so theirs stays NULL until the first
 *   `merchant keys` (which has it) fills it in.
 * - `expires_at`: when a rolled key stops working (`merchant rotate-key --expire-old-in`);
 *   NULL: never. The key lookup honours it.
 * Every existing row is kept; nothing else changes.
 */
import { sql } from 'kysely';
import { newKeyId } from '../../sql/key-ids.js';
import { batchedStep, defineMigration, schemaStep } from './resumable.js';
import { columnsAbsent, columnsExist, indexExists } from './schema-facts.js';

/** Rows given a key id per statement. */
const FILL_BATCH = 500;

export const keyIds = defineMigration('0004_key_ids', {
  up: [
    schemaStep(
      'add key_id, fingerprint and expires_at',
      (db) => columnsExist(db, 'merchant_keys', 'key_id', 'fingerprint', 'expires_at'),
      async (db) => {
        await sql.raw(`ALTER TABLE merchant_keys
      ADD COLUMN key_id VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
      ADD COLUMN fingerprint CHAR(16) CHARACTER SET ascii COLLATE ascii_bin NULL,
      ADD COLUMN expires_at DATETIME(6) NULL`).execute(db);
      },
    ),
    // Batches of the keys still without one: a rerun goes on with the keys the last run did not reach.
    batchedStep('give every key an id', async (db) => {
      for (;;) {
        const { rows } = await sql<{ id: string | number }>`SELECT id FROM merchant_keys WHERE key_id IS NULL ORDER BY id LIMIT ${FILL_BATCH}`.execute(db);
        if (rows.length === 0) break;
        const cases = sql.join(rows.map((row) => sql`WHEN ${String(row.id)} THEN ${newKeyId()}`), sql` `);
        await sql`UPDATE merchant_keys SET key_id = CASE id ${cases} END WHERE id IN (${sql.join(rows.map((row) => String(row.id)))}) AND key_id IS NULL`.execute(db);
      }
    }),
    // Now every row has one: required from here on, and unique.
    schemaStep(
      'require key_id, unique',
      (db) => indexExists(db, 'merchant_keys', 'merchant_keys_key_id'),
      async (db) => {
        await sql.raw(`ALTER TABLE merchant_keys
      MODIFY COLUMN key_id VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      ADD UNIQUE KEY merchant_keys_key_id (key_id)`).execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'drop key_id, fingerprint and expires_at',
      undone: (db) => columnsAbsent(db, 'merchant_keys', 'key_id'),
      run: async (db) => {
        await sql.raw(`ALTER TABLE merchant_keys DROP INDEX merchant_keys_key_id, DROP COLUMN key_id, DROP COLUMN fingerprint, DROP COLUMN expires_at`).execute(db);
      },
    },
  ],
});
