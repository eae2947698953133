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
import { sql, type Kysely } from 'kysely';
import type { Migration } from './kysely-migrator.js';
import { newKeyId } from '../../sql/key-ids.js';

/** Rows given a key id per statement. */
const FILL_BATCH = 500;

export const keyIds: Migration = {
  async up(db: Kysely<any>) {
    await sql.raw(`ALTER TABLE merchant_keys
      ADD COLUMN key_id VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
      ADD COLUMN fingerprint CHAR(16) CHARACTER SET ascii COLLATE ascii_bin NULL,
      ADD COLUMN expires_at DATETIME(6) NULL`).execute(db);
    for (;;) {
      const { rows } = await sql<{ id: string | number }>`SELECT id FROM merchant_keys WHERE key_id IS NULL ORDER BY id LIMIT ${FILL_BATCH}`.execute(db);
      if (rows.length === 0) break;
      const cases = sql.join(rows.map((row) => sql`WHEN ${String(row.id)} THEN ${newKeyId()}`), sql` `);
      await sql`UPDATE merchant_keys SET key_id = CASE id ${cases} END WHERE id IN (${sql.join(rows.map((row) => String(row.id)))})`.execute(db);
    }
    // Now every row has one: required from here on, and unique.
    await sql.raw(`ALTER TABLE merchant_keys
      MODIFY COLUMN key_id VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      ADD UNIQUE KEY merchant_keys_key_id (key_id)`).execute(db);
  },
  async down(db: Kysely<any>) {
    await sql.raw(`ALTER TABLE merchant_keys DROP INDEX merchant_keys_key_id, DROP COLUMN key_id, DROP COLUMN fingerprint, DROP COLUMN expires_at`).execute(db);
  },
};
