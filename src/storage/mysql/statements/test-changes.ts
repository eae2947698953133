/**
 * The changes of merchants' test datasets on MySQL (`test_user_changes`, migration 0017;
 * docs/test-mode.md#what-is-stored): the latest per user, shared by every instance, so a change
 * made through one instance is seen through all. At most `MAX_TEST_CHANGES` users per merchant:
 * every test request reads them all.
 */
import { sql, type Kysely } from 'kysely';
import { MerchantApiError } from '../../../errors.js';
import { MAX_TEST_CHANGES, tooManyTestChanges, type TestChange, type TestChangeStore } from '../../test-changes.js';
import type { UserRecord } from '../../contract.js';
import type { MerchantApiDatabase } from '../schema.js';
import { canonicalColumn, toSqlDatetime } from '../sql-values.js';
import { storageError } from '../storage-error.js';
import { retryOnConflict } from '../write-conflicts.js';

export class MysqlTestChanges implements TestChangeStore {
  constructor(private readonly db: Kysely<MerchantApiDatabase>) {}

  async changes(merchantId: string): Promise<TestChange[]> {
    try {
      const rows = await this.db
        .selectFrom('test_user_changes')
        .select(['shared_user_id', 'record', canonicalColumn<string>('changed_at').as('changed_at')])
        .where('merchant_id', '=', merchantId)
        .limit(MAX_TEST_CHANGES + 1)
        .execute();
      return rows.map((row) => ({ shared_user_id: row.shared_user_id, record: row.record === null ? null : (JSON.parse(row.record) as UserRecord), at: row.changed_at }));
    } catch (error) {
      throw storageError(error, 'test change read');
    }
  }

  /** In one transaction, after counting the merchant's rows under a lock: two simulators at once cannot pass the bound together. */
  async record(merchantId: string, changes: readonly TestChange[]): Promise<void> {
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
