/**
 * Questions the audit trail answers (docs/cli.md#the-audit-trail), on the real MariaDB.
 * "What changed for merchant M?": an import
 * writes, beside its one `import_completed` or `import_stopped`, one `merchant_users_imported`
 * per merchant whose users it inserted or changed, with the counts, in the same transaction; a
 * merchant the import left as it was gets none (seed and NDJSON imports).
 * "Was u-3 erased, and when?": an erasure records a keyed hash of the shared user id (the
 * subject, under the master key) and the operator's reason, never the id.
 */
import { writeFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mysqlCommands } from '../../../src/cli/commands/mysql.js';
import { runCli } from '../../../src/cli/run.js';
import { eraseShares, eraseUser, erasureSubject, generateMasterKey, importSeed, importUserFile, listAuditEvents, parseMasterKey } from '../../../src/storage/mysql/index.js';
import { captureIo } from '../../support/recording.js';
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

describe.skipIf(!available)('the audit trail of an erasure: a keyed hash of the id, and a reason', () => {
  let database: TestDatabase;
  const merchants = [{ id: 'shop', status: 'active' as const, keys: ['shop-key-0123456789'] }];

  beforeAll(async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, { merchants, users: ['u-1', 'u-2', 'u-3', 'u-4'].map((id) => user('shop', id)) });
  });
  afterAll(() => database?.drop());

  it('records the subject, never the id; "was u-3 erased, and when?" is answered by whoever holds the id and the master key', async () => {
    await eraseUser(database.db, 'u-3', { merchantId: 'shop', actor: 'dpo', masterKey: database.masterKey, reason: 'ticket 4711' });
    await eraseShares(database.db, [{ merchantId: 'shop', sharedUserId: 'u-1' }, { merchantId: 'shop', sharedUserId: 'u-2' }], { actor: 'dpo', masterKey: database.masterKey, reason: 'batch 12' });
    const all = await listAuditEvents(database.db, { limit: 100 });
    const text = JSON.stringify(all);
    for (const id of ['u-1', 'u-2', 'u-3']) expect(text).not.toContain(`"${id}"`);

    const found = await listAuditEvents(database.db, { subject: erasureSubject(database.masterKey, 'u-3'), limit: 100 });
    expect(found.events).toEqual([expect.objectContaining({ action: 'user_erased', merchant_id: 'shop', actor: 'dpo', summary: expect.objectContaining({ reason: 'ticket 4711', subject: erasureSubject(database.masterKey, 'u-3') }) })]);
    // Each share of an import --erase batch is findable too, beside the batch's counts.
    expect((await listAuditEvents(database.db, { subject: erasureSubject(database.masterKey, 'u-2'), limit: 100 })).events).toEqual([
      expect.objectContaining({ action: 'user_erased', merchant_id: 'shop', summary: expect.objectContaining({ via: 'import_erase', reason: 'batch 12' }) }),
    ]);
    expect((await listAuditEvents(database.db, { action: 'users_erased', limit: 100 })).events[0]!.summary).toMatchObject({ requested: 2, shares: 2, reason: 'batch 12' });
    // A user never erased, and the same id under another master key, find nothing.
    expect((await listAuditEvents(database.db, { subject: erasureSubject(database.masterKey, 'u-4'), limit: 100 })).events).toEqual([]);
    expect((await listAuditEvents(database.db, { subject: erasureSubject(parseMasterKey(generateMasterKey()), 'u-3'), limit: 100 })).events).toEqual([]);
  });

  it('the CLI: user erase --reason, and audit list --user ID, with MASTER_KEY', async () => {
    const env = { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText };
    const run = async (args: string[]) => {
      const io = captureIo(env);
      const code = await runCli(args, io, { name: 'node', serve: () => Promise.reject(new Error('no serve')), commands: mysqlCommands });
      return { code, out: io.lines.join('\n'), err: io.errors.join('\n') };
    };
    expect(await run(['user', 'erase', 'u-4', '--reason', 'x'.repeat(201)])).toMatchObject({ code: 2, err: expect.stringMatching(/--reason must be 1 to 200 characters/) });
    expect((await run(['user', 'erase', 'u-4', '--reason', 'GDPR request 99', '--actor', 'dpo'])).code).toBe(0);
    const listed = await run(['audit', 'list', '--user', 'u-4', '--json']);
    expect(listed.code, listed.err).toBe(0);
    expect(JSON.parse(listed.out).events).toEqual([expect.objectContaining({ action: 'user_erased', actor: 'dpo', summary: expect.objectContaining({ reason: 'GDPR request 99' }) })]);
    expect(JSON.parse((await run(['audit', 'list', '--user', 'never-erased', '--json'])).out).events).toEqual([]);
  });
});
