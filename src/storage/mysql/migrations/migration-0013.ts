/**
 * Migration `0013_webhook_deliveries_by_endpoint`: the index `webhook_deliveries_endpoint
 * (endpoint_id, created_at)` (InnoDB appends the primary key `id`), for a merchant's page of one
 * endpoint's deliveries, newest first, and a redelivery of those created since a time
 * (docs/webhooks.md#deliveries, src/storage/mysql/webhooks/deliveries.ts): each reads a bounded
 * stretch of it in order, where 0008's `webhook_deliveries_due (endpoint_id, state, next_attempt_at)`
 * would sort every delivery of the endpoint.
 * One statement: InnoDB builds a secondary index in place without blocking writes, and a migration
 * stopped part-way has either added it or not.
 */
import { sql, type Kysely } from 'kysely';
import type { Migration } from './kysely-migrator.js';

export const webhookDeliveriesByEndpoint: Migration = {
  async up(db: Kysely<any>) {
    await sql.raw('ALTER TABLE webhook_deliveries ADD KEY webhook_deliveries_endpoint (endpoint_id, created_at)').execute(db);
  },
  async down(db: Kysely<any>) {
    await sql.raw('ALTER TABLE webhook_deliveries DROP INDEX webhook_deliveries_endpoint').execute(db);
  },
};
