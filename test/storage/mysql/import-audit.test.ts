/**
 * "What changed for merchant M?" from the audit trail (docs/cli.md#the-audit-trail): an import
 * writes, beside its one `import_completed` or `import_stopped`, one `merchant_users_imported`
 * per merchant whose users it inserted or changed, with the counts, in the same transaction; a
 * merchant the import left as it was gets none. On the real MariaDB, seed and NDJSON imports.
 */
import { writeFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importSeed, importUserFile, listAuditEvents } from '../../../src/storage/mysql/index.js';
import { inCi } from '../../support/ci.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../../support/mysql.js';
import { user } from '../../support/seeds.js';

const available = await mysqlAvailable();
if (!available && inCi()) throw new Error('MariaDB is required in CI (127.0.0.1:3306).');

describe.skipIf(!available)('the audit trail of an import, per merchant', () => {
  let database: TestDatabase;
  let dir: string;
  const merchants = ['shop-a', 'shop-b', 'shop-c'].map((id) => ({ id, status: 'active' as const, keys: [`${id}-key-0123456789`] }));
  const perMerchant = async () => (await listAuditEvents(database.db, { action: 'merchant_users_imported', limit: 100 })).events;

  beforeAll(async () => {
    database = await createTestDatabase();
    dir = await mkdtemp(join(tmpdir(), 'merchant-api-import-audit-'));
  });
  afterAll(async () => {
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('a seed: one event per merchant whose users it inserted, none for a merchant without users', async () => {
    const users = [user('shop-a', 'a-1'), user('shop-a', 'a-2'), user('shop-a', 'a-3'), user('shop-b', 'b-1')];
    await importSeed(database.db, database.masterKey, { merchants, users }, { actor: 'loader', batchSize: 2 });
    const events = await perMerchant();
    expect(events.map(({ merchant_id, actor, summary }) => ({ merchant_id, actor, summary }))).toEqual([
      { merchant_id: 'shop-b', actor: 'loader', summary: { format: 'seed', users_inserted: 1, users_updated: 0, users_unchanged: 0 } },
      { merchant_id: 'shop-a', actor: 'loader', summary: { format: 'seed', users_inserted: 3, users_updated: 0, users_unchanged: 0 } },
    ]);
    // `audit list --merchant M` answers what the import did to M.
    expect((await listAuditEvents(database.db, { merchantId: 'shop-c', limit: 100 })).events).toEqual([]);
  });

  it('an NDJSON file: the counts of every batch, changed and unchanged apart; nothing for a merchant it left as it was', async () => {
    const lines = [
      user('shop-a', 'a-1', { first_name: 'Grace' }), // changed
      user('shop-a', 'a-2'), // unchanged
      user('shop-b', 'b-1'), // unchanged: shop-b gets no event
      user('shop-c', 'c-1'), // new
    ];
    const path = join(dir, 'users.ndjson');
    await writeFile(path, lines.map((line) => JSON.stringify(line)).join('\n') + '\n');
    const before = (await perMerchant()).length;
    await importUserFile(database.db, path, { actor: 'nightly', batchSize: 1 });
    const events = (await perMerchant()).slice(0, (await perMerchant()).length - before);
    expect(events.map(({ merchant_id, actor, summary }) => ({ merchant_id, actor, summary }))).toEqual([
      { merchant_id: 'shop-c', actor: 'nightly', summary: { format: 'users', users_inserted: 1, users_updated: 0, users_unchanged: 0 } },
      { merchant_id: 'shop-a', actor: 'nightly', summary: { format: 'users', users_inserted: 0, users_updated: 1, users_unchanged: 1 } },
    ]);
    const completed = (await listAuditEvents(database.db, { action: 'import_completed', limit: 1 })).events[0]!;
    // Written with the import's own record, after it: the newest per-merchant events follow it by id.
    expect(Number(events[0]!.id)).toBeGreaterThan(Number(completed.id));
  });
});
