/**
 * docs/protocol.md#removals on real MariaDB, through api.fetch: the tombstones `removeShares`
 * writes at erasure (one share, a person with every merchant, `import --erase`'s batches), a
 * poll-only merchant's sync loop ending with exactly the merchant's users whatever happened
 * between its pages (fast-check), re-sharing after a removal, the prune by `REMOVAL_RETENTION`
 * with its 410, and an import that writes no tombstone.
 */
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../../src/api.js';
import { silentLogger } from '../../../src/observe/logger.js';
import { eraseShares, eraseUser, importSeed, MysqlStorage, pruneShareRemovals } from '../../../src/storage/mysql/index.js';
import { compareCodePoints } from '../../../src/storage/order.js';
import { mysqlCommands, openMysqlStorage } from '../../../src/cli/commands/mysql.js';
import { runCli } from '../../../src/cli/run.js';
import { captureIo } from '../../support/recording.js';
import { createMerchantClient, MerchantResponseError, type ChangeEntry } from '../../../src/client/index.js';
import { basic, call, ORIGIN } from '../../support/api.js';
import { FeedClient } from '../../support/change-feed.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../../support/mysql.js';
import { user } from '../../support/seeds.js';

const available = await mysqlAvailable();
if (!available && process.env.CI !== 'true') console.warn('Skipping the change feed on MySQL: no MariaDB at MYSQL_URL (start one on 127.0.0.1:3306).');

describe.skipIf(!available && process.env.CI !== 'true')('the change feed on MySQL', () => {
  let database: TestDatabase;
  let storage: MysqlStorage;
  let api: ReturnType<typeof createMerchantApi>;
  let merchants = 0;

  beforeAll(async () => {
    database = await createTestDatabase();
    storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey, keyCacheTtlMs: 0 });
    api = createMerchantApi({ storage, logger: silentLogger, cursorSecret: 'x'.repeat(32) });
  });
  afterAll(async () => {
    await storage?.close();
    await database?.drop();
  });

  /** A fresh pair of merchants: the one that polls, and another sharing some of its users. */
  async function newMerchants() {
    const n = ++merchants;
    const shop = `shop-${n}`;
    const other = `other-${n}`;
    await importSeed(database.db, database.masterKey, { merchants: [{ id: shop, status: 'active', keys: [`${shop}-key`] }, { id: other, status: 'active', keys: [`${other}-key`] }], users: [] });
    return { shop, other, auth: basic(shop, `${shop}-key`) };
  }

  const put = (merchantId: string, id: string, overrides: Parameters<typeof user>[2] = {}) => importSeed(database.db, undefined, { merchants: [], users: [user(merchantId, id, overrides)] });

  async function everything(auth: Record<string, string>) {
    const { status, body } = await call(api, `${ORIGIN}/merchant/users?order=updated_at`, { headers: auth });
    expect(status).toBe(200);
    return (body.data as { shared_user_id: string }[]).sort((a, b) => compareCodePoints(a.shared_user_id, b.shared_user_id));
  }
  const copyOf = (client: FeedClient) => [...client.copy.values()].sort((a, b) => compareCodePoints(a.shared_user_id, b.shared_user_id));

  it('a poll-only merchant ends with exactly its users through adds, updates, deactivations, unshares and erasures between its pages (fast-check)', async () => {
    type Op =
      | { kind: 'put'; id: number; name: number; active: boolean }
      | { kind: 'unshare' | 'erase' | 'link' | 'eraseLinked'; id: number }
      | { kind: 'eraseBatch'; ids: number[] }
      | { kind: 'page' };
    const id = fc.nat(7);
    const op: fc.Arbitrary<Op> = fc.oneof(
      { weight: 4, arbitrary: fc.record({ kind: fc.constant('put' as const), id, name: fc.nat(2), active: fc.boolean() }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constantFrom('unshare' as const, 'erase' as const, 'link' as const, 'eraseLinked' as const), id }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('eraseBatch' as const), ids: fc.uniqueArray(id, { maxLength: 3 }) }) },
      { weight: 4, arbitrary: fc.constant({ kind: 'page' as const }) },
    );
    let removalsSeen = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 10, maxLength: 30 }), fc.integer({ min: 1, max: 3 }), async (ops, limit) => {
        const { shop, other, auth } = await newMerchants();
        const client = new FeedClient(api, auth, limit);
        for (const step of ops) {
          const sid = `id-${'id' in step ? step.id : 0}`;
          if (step.kind === 'page') await client.step();
          else if (step.kind === 'put') await put(shop, sid, { first_name: `n${step.name}`, deactivated_at: step.active ? null : '2024-01-01T00:00:00.000000+00:00' });
          else if (step.kind === 'unshare') await eraseShares(database.db, [{ merchantId: shop, sharedUserId: sid }]);
          else if (step.kind === 'erase') await eraseUser(database.db, sid);
          else if (step.kind === 'eraseBatch') await eraseShares(database.db, step.ids.map((i) => ({ merchantId: shop, sharedUserId: `id-${i}` })));
          else if (step.kind === 'link') {
            // The same person shared with the other merchant too, under another id.
            const row = await database.db.selectFrom('user_shares').selectAll().where('merchant_id', '=', shop).where('shared_user_id', '=', sid).executeTakeFirst();
            const taken = await database.db.selectFrom('user_shares').select('shared_user_id').where('merchant_id', '=', other).where('shared_user_id', '=', `o-${sid}`).executeTakeFirst();
            if (row && !taken) await database.db.insertInto('user_shares').values({ ...row, user_id: String(row.user_id), merchant_id: other, shared_user_id: `o-${sid}` }).execute();
          } else await eraseUser(database.db, `o-${sid}`); // erases the person with every merchant: shop's share too, if linked
        }
        await client.settle();
        expect(copyOf(client)).toEqual(await everything(auth));
        const [{ n }] = (await sql<{ n: number }>`SELECT COUNT(*) AS n FROM share_removals WHERE merchant_id = ${shop}`.execute(database.db)).rows as [{ n: number }];
        removalsSeen += Number(n);
      }),
      { numRuns: 25 },
    );
    // The runs did remove shares (else the property says nothing about removals).
    expect(removalsSeen).toBeGreaterThan(10);
  });

  it('a user shared again after its removal is listed as its record, not its tombstone', async () => {
    const { shop, auth } = await newMerchants();
    await put(shop, 'back');
    await put(shop, 'stays');
    const client = new FeedClient(api, auth, 10);
    await client.settle();
    const from = client.last!;
    await eraseShares(database.db, [{ merchantId: shop, sharedUserId: 'back' }]);
    const feed = async () => (await call(api, `${ORIGIN}/merchant/users?include_removed=true&updated_since=${encodeURIComponent(from)}`, { headers: auth })).body.data as Record<string, unknown>[];
    const removed = await feed();
    expect(removed.map((e) => e.shared_user_id)).toEqual(['stays', 'back']);
    expect(removed.at(-1)).toEqual({ shared_user_id: 'back', removed_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/) });
    await put(shop, 'back', { first_name: 'Returned' });
    const again = await feed();
    expect(again.filter((e) => e.shared_user_id === 'back')).toEqual([expect.objectContaining({ shared_user_id: 'back', first_name: 'Returned', updated_at: expect.any(String) })]);
    expect(String(again.at(-1)!.updated_at) > String(removed.at(-1)!.removed_at)).toBe(true);
    await client.settle();
    expect(copyOf(client)).toEqual(await everything(auth));
  });

  it('a removal stamped ahead of the clock (a clock set back since): the next import and the next removal stamp after it', async () => {
    const { shop } = await newMerchants();
    await put(shop, 'gone');
    await put(shop, 'stays');
    await put(shop, 'later-gone');
    await eraseShares(database.db, [{ merchantId: shop, sharedUserId: 'gone' }]);
    // The removal was stamped while the server's clock was an hour ahead; every share is older.
    await sql`UPDATE share_removals SET removed_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR WHERE merchant_id = ${shop}`.execute(database.db);
    const removedAt = async (id: string) => (await sql<{ at: string }>`SELECT DATE_FORMAT(removed_at, '%Y-%m-%d %H:%i:%s.%f') AS at FROM share_removals WHERE merchant_id = ${shop} AND shared_user_id = ${id}`.execute(database.db)).rows[0]!.at;
    const updatedAt = async (id: string) => (await sql<{ at: string }>`SELECT DATE_FORMAT(updated_at, '%Y-%m-%d %H:%i:%s.%f') AS at FROM user_shares WHERE merchant_id = ${shop} AND shared_user_id = ${id}`.execute(database.db)).rows[0]!.at;
    const ahead = await removedAt('gone');
    // A sync loop that read past the tombstone would miss a change stamped before it.
    await put(shop, 'stays', { city: 'Köln' });
    expect(await updatedAt('stays') > ahead).toBe(true);
    await eraseShares(database.db, [{ merchantId: shop, sharedUserId: 'later-gone' }]);
    expect(await removedAt('later-gone') > await updatedAt('stays')).toBe(true);
  });

  it('an import writes no tombstone; the feed without include_removed is unchanged', async () => {
    const { shop, auth } = await newMerchants();
    await importSeed(database.db, undefined, { merchants: [], users: Array.from({ length: 50 }, (_, i) => user(shop, `u-${i}`)) });
    await importSeed(database.db, undefined, { merchants: [], users: Array.from({ length: 50 }, (_, i) => user(shop, `u-${i}`, { first_name: 'Changed' })) });
    const count = await sql<{ n: number }>`SELECT COUNT(*) AS n FROM share_removals WHERE merchant_id = ${shop}`.execute(database.db);
    expect(Number(count.rows[0]!.n)).toBe(0);
    await eraseShares(database.db, [{ merchantId: shop, sharedUserId: 'u-3' }]);
    const plain = await call(api, `${ORIGIN}/merchant/users?order=updated_at`, { headers: auth });
    expect(plain.body.data.map((u: { shared_user_id: string }) => u.shared_user_id)).not.toContain('u-3');
    expect(plain.text).not.toContain('removed_at');
  });

  it('prunes removals older than the retention; a feed from before a pruned one is 410, from after it 200', async () => {
    const { shop, auth } = await newMerchants();
    for (const id of ['a', 'b', 'c', 'd']) await put(shop, id);
    await eraseShares(database.db, [{ merchantId: shop, sharedUserId: 'a' }]);
    await eraseShares(database.db, [{ merchantId: shop, sharedUserId: 'b' }]);
    await eraseShares(database.db, [{ merchantId: shop, sharedUserId: 'c' }]);
    // 'a' and 'b' removed 40 and 35 days ago, 'c' now.
    await sql`UPDATE share_removals SET removed_at = UTC_TIMESTAMP(6) - INTERVAL 40 DAY WHERE merchant_id = ${shop} AND shared_user_id = 'a'`.execute(database.db);
    await sql`UPDATE share_removals SET removed_at = UTC_TIMESTAMP(6) - INTERVAL 35 DAY WHERE merchant_id = ${shop} AND shared_user_id = 'b'`.execute(database.db);
    const feed = (since?: string) => call(api, `${ORIGIN}/merchant/users?limit=10&include_removed=true${since ? `&updated_since=${encodeURIComponent(since)}` : ''}`, { headers: auth });
    const longAgo = '2000-01-01T00:00:00Z';
    expect((await feed(longAgo)).body.data.filter((e: object) => 'removed_at' in e).map((e: { shared_user_id: string }) => e.shared_user_id)).toEqual(['a', 'b', 'c']);
    expect(await pruneShareRemovals(database.db, 30 * 86_400)).toBeGreaterThanOrEqual(2);
    const gone = await feed(longAgo);
    expect(gone.status).toBe(410);
    expect(gone.body.errors).toEqual([{ code: 'gone', param: 'updated_since', message: expect.stringContaining('REMOVAL_RETENTION') }]);
    const horizon = (await sql<{ at: string }>`SELECT DATE_FORMAT(removed_at, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS at FROM share_removals WHERE merchant_id = ${shop} AND shared_user_id = ''`.execute(database.db)).rows[0]!.at;
    expect((await feed(horizon)).status).toBe(410);
    const after = await feed(horizon.replace(/\d{6}\+/, (d) => `${String(Number(d.slice(0, 6)) + 1).padStart(6, '0')}+`));
    expect(after.status).toBe(200);
    expect(after.body.data.filter((e: object) => 'removed_at' in e).map((e: { shared_user_id: string }) => e.shared_user_id)).toEqual(['c']);
    // A fresh copy (no updated_since) is never refused; another merchant's feed is untouched.
    expect((await feed()).status).toBe(200);
    const second = await newMerchants();
    expect((await call(api, `${ORIGIN}/merchant/users?include_removed=true&updated_since=${longAgo}`, { headers: second.auth })).status).toBe(200);
    // Pruning again finds nothing more, and keeps the horizon.
    expect(await pruneShareRemovals(database.db, 30 * 86_400)).toBe(0);
    expect((await feed(longAgo)).status).toBe(410);
  });

  it('the client SDK pages the change feed with its tombstones, and tells a 410', async () => {
    const { shop } = await newMerchants();
    const client = createMerchantClient({ baseUrl: ORIGIN, merchantId: shop, apiKey: `${shop}-key`, fetch: (input, init) => api.fetch(new Request(input, init)) });
    for (const id of ['k1', 'k2', 'k3']) await put(shop, id);
    const copy = new Map<string, ChangeEntry>();
    let last: string | undefined;
    const sync = async () => {
      for await (const entry of client.changes({ updatedSince: last, pageSize: 1 })) {
        if ('removed_at' in entry) {
          copy.delete(entry.shared_user_id);
          last = entry.removed_at;
        } else {
          copy.set(entry.shared_user_id, entry);
          last = entry.updated_at;
        }
      }
    };
    await sync();
    expect([...copy.keys()].sort()).toEqual(['k1', 'k2', 'k3']);
    await eraseShares(database.db, [{ merchantId: shop, sharedUserId: 'k2' }]);
    await put(shop, 'k4');
    await sync();
    expect([...copy.keys()].sort()).toEqual(['k1', 'k3', 'k4']);
    await sql`UPDATE share_removals SET removed_at = UTC_TIMESTAMP(6) - INTERVAL 40 DAY WHERE merchant_id = ${shop}`.execute(database.db);
    await pruneShareRemovals(database.db, 30 * 86_400);
    const error = await (async () => {
      for await (const _ of client.changes({ updatedSince: '2000-01-01T00:00:00Z' })) void _;
    })().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MerchantResponseError);
    expect(error).toMatchObject({ status: 410, code: 'gone' });
  });

  it('the CLI: user erase leaves a tombstone; migrate prunes by REMOVAL_RETENTION and refuses a bad one', async () => {
    const env = { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText, MERCHANT_API_ACTOR: 'test' };
    const run = async (args: string[], extra: Record<string, string> = {}) => {
      const io = captureIo({ ...env, ...extra }, { progress: () => {} });
      const code = await runCli(args, io, { name: 'test', serve: () => Promise.reject(new Error('not in this test')), commands: mysqlCommands, openMysqlStorage });
      return { code, out: io.lines.join('\n'), err: io.errors.join('\n') };
    };
    const { shop, auth } = await newMerchants();
    await put(shop, 'cli-1');
    const erased = await run(['user', 'erase', 'cli-1', '--merchant', shop]);
    expect(erased.code, erased.err).toBe(0);
    const feed = await call(api, `${ORIGIN}/merchant/users?include_removed=true`, { headers: auth });
    expect(feed.body.data).toEqual([{ shared_user_id: 'cli-1', removed_at: expect.any(String) }]);
    await sql`UPDATE share_removals SET removed_at = UTC_TIMESTAMP(6) - INTERVAL 3 DAY WHERE merchant_id = ${shop}`.execute(database.db);
    const kept = await run(['migrate'], { REMOVAL_RETENTION: '4d' });
    expect(kept.code, kept.err).toBe(0);
    expect(kept.out).not.toMatch(/share removal/);
    const pruned = await run(['migrate'], { REMOVAL_RETENTION: '2' });
    expect(pruned.code, pruned.err).toBe(0);
    expect(pruned.out).toMatch(/Pruned \d+ share removal\(s\) older than REMOVAL_RETENTION\./);
    expect((await call(api, `${ORIGIN}/merchant/users?include_removed=true&updated_since=2020-01-01`, { headers: auth })).status).toBe(410);
    const bad = await run(['migrate'], { REMOVAL_RETENTION: '12h' });
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/REMOVAL_RETENTION must be at least one day/);
  });
});
