/**
 * Migration `0012_webhook_test_budget`: `webhook_endpoints.test_budget_until`, when the endpoint's
 * budget of `webhook.test` events is whole again (docs/webhooks.md#endpoints: a burst of 10, one
 * more every 6 s; `takeWebhookTest` of src/storage/webhook-endpoints.ts). Kept in the endpoint's
 * row, so every instance counts against the same budget. NULL: whole.
 * One step: a nullable column without a default is added in place (instant on MariaDB 10.3+ and
 * MySQL 8); a migrate stopped part-way finds it added or not (resumable.ts).
 */
import { sql } from 'kysely';
import { defineMigration, schemaStep } from './resumable.js';
import { columnsAbsent, columnsExist } from './schema-facts.js';

export const webhookTestBudget = defineMigration('0012_webhook_test_budget', {
  up: [
    schemaStep(
      'add test_budget_until',
      (db) => columnsExist(db, 'webhook_endpoints', 'test_budget_until'),
      async (db) => {
        await sql.raw('ALTER TABLE webhook_endpoints ADD COLUMN test_budget_until DATETIME(6) NULL').execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'drop test_budget_until',
      undone: (db) => columnsAbsent(db, 'webhook_endpoints', 'test_budget_until'),
      run: async (db) => {
        await sql.raw('ALTER TABLE webhook_endpoints DROP COLUMN test_budget_until').execute(db);
      },
    },
  ],
});
