/**
 * Migration `0008_webhooks`: the webhook outbox (docs/webhooks.md#delivery).
 * - `webhook_endpoints`: a merchant's receivers; the secret sealed like an API key
 *   (`src/storage/sql/key-sealing.ts`, the merchant id in the JWE header), and during a
 *   rotation the previous one with when it stops signing; `failing_since` is the first failed
 *   attempt since the last success (an endpoint failing for days is disabled).
 * - `webhook_events`: one row per event and merchant, written in the transaction of the change;
 *   `data` is the JSON the body carries, so every attempt sends the same bytes.
 * - `webhook_deliveries`: one row per event and endpoint. Due rows are claimed by primary key
 *   (`FOR UPDATE SKIP LOCKED`), `next_attempt_at` moved to the end of the lease: an instance that
 *   dies leaves its claims due again once the lease is over. `webhook_deliveries_due
 *   (endpoint_id, state, next_attempt_at)`: each endpoint's due rows are one range, so endpoints
 *   take turns; `webhook_deliveries_created`: pruning by age.
 */
import { sql, type Kysely } from 'kysely';
import { defineMigration, schemaStep } from './resumable.js';
import { tableExists } from './schema-facts.js';

const TABLE_OPTIONS = 'ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci';
const ASCII_ID = 'VARCHAR(48) CHARACTER SET ascii COLLATE ascii_bin NOT NULL';

/** `merchants.id`'s exact type, so the foreign key and the joins compare like for like. */
async function merchantIdType(db: Kysely<any>): Promise<string> {
  const { rows } = await sql<{ collation: string }>`SELECT COLLATION_NAME AS collation FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'merchants' AND COLUMN_NAME = 'id'`.execute(db);
  return `VARCHAR(128) CHARACTER SET utf8mb4 COLLATE ${rows[0]?.collation ?? 'utf8mb4_bin'} NOT NULL`;
}

export const webhooks = defineMigration('0008_webhooks', {
  up: [
    schemaStep(
      'create webhook_endpoints',
      (db) => tableExists(db, 'webhook_endpoints'),
      async (db) => {
        const MERCHANT_ID = await merchantIdType(db);
        await sql.raw(`CREATE TABLE webhook_endpoints (
      id ${ASCII_ID},
      merchant_id ${MERCHANT_ID},
      url VARCHAR(2048) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
      events VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      status ENUM('enabled','disabled') NOT NULL DEFAULT 'enabled',
      disabled_reason VARCHAR(32) CHARACTER SET ascii NULL,
      sealed_secret VARCHAR(2048) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      previous_sealed_secret VARCHAR(2048) CHARACTER SET ascii COLLATE ascii_bin NULL,
      previous_expires_at DATETIME(6) NULL,
      failing_since DATETIME(6) NULL,
      created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
      updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
      PRIMARY KEY (id),
      KEY webhook_endpoints_merchant (merchant_id, status),
      CONSTRAINT webhook_endpoints_merchant FOREIGN KEY (merchant_id) REFERENCES merchants (id) ON DELETE CASCADE
    ) ${TABLE_OPTIONS}`).execute(db);
      },
    ),
    schemaStep(
      'create webhook_events',
      (db) => tableExists(db, 'webhook_events'),
      async (db) => {
        const MERCHANT_ID = await merchantIdType(db);
        await sql.raw(`CREATE TABLE webhook_events (
      id ${ASCII_ID},
      merchant_id ${MERCHANT_ID},
      type VARCHAR(32) CHARACTER SET ascii NOT NULL,
      data MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
      created_at DATETIME(6) NOT NULL,
      PRIMARY KEY (id),
      KEY webhook_events_created (created_at)
    ) ${TABLE_OPTIONS}`).execute(db);
      },
    ),
    schemaStep(
      'create webhook_deliveries',
      (db) => tableExists(db, 'webhook_deliveries'),
      async (db) => {
        const MERCHANT_ID = await merchantIdType(db);
        await sql.raw(`CREATE TABLE webhook_deliveries (
      id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      event_id ${ASCII_ID},
      endpoint_id ${ASCII_ID},
      merchant_id ${MERCHANT_ID},
      state ENUM('pending','delivered','failed','cancelled') NOT NULL DEFAULT 'pending',
      attempts SMALLINT UNSIGNED NOT NULL DEFAULT 0,
      next_attempt_at DATETIME(6) NOT NULL,
      claim_token CHAR(22) CHARACTER SET ascii COLLATE ascii_bin NULL,
      leased_until DATETIME(6) NULL,
      last_attempt_at DATETIME(6) NULL,
      last_status SMALLINT UNSIGNED NULL,
      last_error VARCHAR(32) CHARACTER SET ascii NULL,
      last_response VARBINARY(256) NULL,
      created_at DATETIME(6) NOT NULL,
      PRIMARY KEY (id),
      KEY webhook_deliveries_due (endpoint_id, state, next_attempt_at),
      KEY webhook_deliveries_event (event_id),
      KEY webhook_deliveries_created (created_at),
      CONSTRAINT webhook_deliveries_endpoint FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id) ON DELETE CASCADE
    ) ${TABLE_OPTIONS}`).execute(db);
      },
    ),
  ],
  down: ['webhook_deliveries', 'webhook_events', 'webhook_endpoints'].map((table) => ({
    name: `drop ${table}`,
    run: async (db: Kysely<any>) => {
      await sql.raw(`DROP TABLE IF EXISTS ${table}`).execute(db);
    },
  })),
});
