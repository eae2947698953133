/**
 * Migration `0012_webhook_test_budget`: `webhook_endpoints.test_budget_until`, when the endpoint's
 * budget of `webhook.test` events is whole again (docs/webhooks.md#endpoints: a burst of 10, one
 * more every 6 s; `takeWebhookTest` of src/storage/webhook-endpoints.ts). Kept in the endpoint's
 * row, so every instance counts against the same budget. NULL: whole.
 * One statement: a nullable column without a default is added in place (instant on MariaDB 10.3+
 * and MySQL 8), and a migration stopped part-way has either added it or not.
 */
import { sql, type Kysely } from 'kysely';
import type { Migration } from './kysely-migrator.js';

export const webhookTestBudget: Migration = {
  async up(db: Kysely<any>) {
    await sql.raw('ALTER TABLE webhook_endpoints ADD COLUMN test_budget_until DATETIME(6) NULL').execute(db);
  },
  async down(db: Kysely<any>) {
    await sql.raw('ALTER TABLE webhook_endpoints DROP COLUMN test_budget_until').execute(db);
  },
};
