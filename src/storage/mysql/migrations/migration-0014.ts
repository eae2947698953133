/**
 * Migration `0014_webhook_deliveries_by_endpoint`: the index `webhook_deliveries_endpoint
 * (endpoint_id, created_at)` (InnoDB appends the primary key `id`), for a merchant's page of one
 * endpoint's deliveries, newest first, and a redelivery of those created since a time
 * (docs/webhooks.md#deliveries, src/storage/mysql/webhooks/deliveries.ts): each reads a bounded
 * stretch of it in order, where 0008's `webhook_deliveries_due (endpoint_id, state, next_attempt_at)`
 * would sort every delivery of the endpoint.
 * One step: InnoDB builds a secondary index in place without blocking writes, and a migrate stopped
 * part-way finds it added or not (resumable.ts).
 */
import { sql } from 'kysely';
import { defineMigration, schemaStep } from './resumable.js';
import { indexExists } from './schema-facts.js';

export const webhookDeliveriesByEndpoint = defineMigration('0014_webhook_deliveries_by_endpoint', {
  up: [
    schemaStep(
      'add webhook_deliveries_endpoint',
      (db) => indexExists(db, 'webhook_deliveries', 'webhook_deliveries_endpoint'),
      async (db) => {
        await sql.raw('ALTER TABLE webhook_deliveries ADD KEY webhook_deliveries_endpoint (endpoint_id, created_at)').execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'drop webhook_deliveries_endpoint',
      run: async (db) => {
        if (await indexExists(db, 'webhook_deliveries', 'webhook_deliveries_endpoint')) await sql.raw('ALTER TABLE webhook_deliveries DROP INDEX webhook_deliveries_endpoint').execute(db);
      },
    },
  ],
});
