/**
 * The changes of merchants' test datasets on MySQL (`test_user_changes`, migration 0017;
 * docs/test-mode.md#what-is-stored): the latest per user, shared by every instance, so a change
 * made through one instance is seen through all. At most `MAX_TEST_CHANGES` users per merchant:
 * every test request reads them all.
 */
import type { CausalReads } from '../causal-reads.js';
import { sql, type Kysely, type Transaction } from 'kysely';
import { MerchantApiError } from '../../../errors.js';
import { MAX_TEST_CHANGES, tooManyTestChanges, type TestChange, type TestChangeStore, type TestWebhookEvent } from '../../test-changes.js';
import { newEventId } from '../../webhook-outbox.js';
import type { UserRecord } from '../../contract.js';
import type { MerchantApiDatabase } from '../schema.js';
import { canonicalColumn, toSqlDatetime } from '../sql-values.js';
import { storageError } from '../storage-error.js';
import { retryOnConflict } from '../write-conflicts.js';

export class MysqlTestChanges implements TestChangeStore {
  /** `causal`: on a Galera node, the read waits for every commit in the cluster (a simulator call just answered through another node is seen). */
  constructor(
    private readonly db: Kysely<MerchantApiDatabase>,
    private readonly causal?: CausalReads,
  ) {}

  async changes(merchantId: string): Promise<TestChange[]> {
    try {
      const query = this.db
        .selectFrom('test_user_changes')
        .select(['shared_user_id', 'record', canonicalColumn<string>('changed_at').as('changed_at')])
        .where('merchant_id', '=', merchantId)
        .limit(MAX_TEST_CHANGES + 1);
      const rows = this.causal === undefined ? await query.execute() : await this.causal.execute(query);
      return rows.map((row) => ({ shared_user_id: row.shared_user_id, record: row.record === null ? null : (JSON.parse(row.record) as UserRecord), at: row.changed_at }));
    } catch (error) {
      throw storageError(error, 'test change read');
    }
  }

  /**
   * In one transaction, after counting the merchant's rows under a lock: two simulators at once
   * cannot pass the bound together. The events go into the outbox in the same transaction (as an
   * import's do), for the merchant's test endpoints only: a change is stored with its events or not
   * at all, and the dispatcher sends them as it sends every event.
   */
  async record(merchantId: string, changes: readonly TestChange[], events: readonly TestWebhookEvent[] = []): Promise<void> {
    if (changes.length === 0) return;
    try {
      await retryOnConflict(() =>
        this.db.transaction().execute(async (trx) => {
          const held = await trx.selectFrom('test_user_changes').select('shared_user_id').where('merchant_id', '=', merchantId).forUpdate().execute();
          const ids = new Set(held.map((row) => row.shared_user_id));
          for (const change of changes) ids.add(change.shared_user_id);
          if (ids.size > MAX_TEST_CHANGES) throw tooManyTestChanges();
          for (const change of changes) {
            const record = change.record === null ? null : JSON.stringify(change.record);
            const at = toSqlDatetime(change.at);
            await sql`INSERT INTO test_user_changes (merchant_id, shared_user_id, record, changed_at) VALUES (${merchantId}, ${change.shared_user_id}, ${record}, ${at})
              ON DUPLICATE KEY UPDATE record = VALUES(record), changed_at = VALUES(changed_at)`.execute(trx);
          }
          if (events.length > 0) await writeTestEvents(trx, merchantId, events);
        }),
      );
    } catch (error) {
      if (error instanceof MerchantApiError) throw error;
      throw storageError(error, 'test change write');
    }
  }

  async reset(merchantId: string): Promise<void> {
    try {
      await retryOnConflict(() => this.db.deleteFrom('test_user_changes').where('merchant_id', '=', merchantId).execute());
    } catch (error) {
      throw storageError(error, 'test change reset');
    }
  }
}

/**
 * The simulator's events of `merchantId`, in order, each with a delivery per enabled test endpoint
 * of an active merchant that receives its type (docs/test-mode.md#webhooks); nothing when there is
 * none. `created_at` is the change's time, the body's `timestamp` as for every event; the event
 * ids are time-ordered, so the dispatcher sends them in order. `shared_user_id` stays NULL: a test
 * user is no share, and an erasure of a live share must never meet a test event.
 */
async function writeTestEvents(trx: Transaction<MerchantApiDatabase>, merchantId: string, events: readonly TestWebhookEvent[]): Promise<void> {
  const { rows: endpoints } = await sql<{ id: string; events: string; now: string }>`SELECT e.id, e.events, DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f') AS now
    FROM webhook_endpoints e INNER JOIN merchants m ON m.id = e.merchant_id
    WHERE e.merchant_id = ${merchantId} AND e.mode = 'test' AND e.status = 'enabled' AND m.status = 'active'`.execute(trx);
  if (endpoints.length === 0) return;
  const now = endpoints[0]!.now;
  for (const event of events) {
    const receivers = endpoints.filter((endpoint) => endpoint.events.split(',').includes(event.type));
    if (receivers.length === 0) continue;
    const at = toSqlDatetime(event.timestamp);
    const id = newEventId(Date.parse(event.timestamp));
    await trx.insertInto('webhook_events').values({ id, merchant_id: merchantId, shared_user_id: null, type: event.type, data: event.data, created_at: at }).execute();
    await trx
      .insertInto('webhook_deliveries')
      .values(receivers.map((endpoint) => ({ event_id: id, endpoint_id: endpoint.id, merchant_id: merchantId, next_attempt_at: now, created_at: now })))
      .execute();
  }
}
