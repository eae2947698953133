/**
 * docs/protocol.md#removals through api.fetch on the memory storage: `include_removed=true`, its
 * parameters and cursors, the merge of tombstones into the `updated_at` order and the 410 of a
 * feed asked from before a pruned removal (a storage that reports removals, in front of the
 * memory storage, which removes no share), and a poll-only merchant's sync loop (fast-check).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { MemoryUserIndex } from '../../src/storage/memory/users.js';
import { ForwardingStorage } from '../../src/storage/forwarding-storage.js';
import type { ShareRemoval, Storage, UserPageQuery, UserRecordPage } from '../../src/storage/contract.js';
import type { SeedUser } from '../../src/storage/seed/seed.js';
import { compareCodePoints } from '../../src/storage/order.js';
import { basic, call, ORIGIN } from '../support/api.js';
import { FeedClient } from '../support/change-feed.js';
import { user } from '../support/seeds.js';

const AUTH = basic('shop', 'shop-key');
const list = (query: string) => `${ORIGIN}/merchant/users?${query}`;
const at = (n: number) => `2024-05-01T10:00:00.${String(n).padStart(6, '0')}+00:00`;

function memory(users: SeedUser[]) {
  return new MemoryStorage({ merchants: [{ id: 'shop', status: 'active', keys: ['shop-key'] }], users: MemoryUserIndex.fromSeedUsers(users) });
}

const apiOf = (storage: Storage) => createMerchantApi({ storage, logger: silentLogger, cursorSecret: 'x'.repeat(32) });

/** A storage that keeps tombstones beside the memory storage's users, as the MySQL storage answers them. */
class WithRemovals extends ForwardingStorage {
  removals: ShareRemoval[] = [];
  prunedThrough: string | undefined;
  override async listUsers(query: UserPageQuery): Promise<UserRecordPage> {
    const page = await this.inner.listUsers(query);
    if (!query.includeRemoved) return page;
    const after = (r: ShareRemoval) =>
      query.afterUpdated === undefined || r.removed_at > query.afterUpdated || (r.removed_at === query.afterUpdated && compareCodePoints(r.shared_user_id, query.after!) > 0);
    page.removals = this.removals
      .filter((r) => (query.filter.updatedSince === undefined || r.removed_at >= query.filter.updatedSince) && after(r))
      .sort((a, b) => (a.removed_at < b.removed_at ? -1 : a.removed_at > b.removed_at ? 1 : compareCodePoints(a.shared_user_id, b.shared_user_id)))
      .slice(0, query.limit);
    if (this.prunedThrough !== undefined) page.removalsPrunedThrough = this.prunedThrough;
    return page;
  }
}

async function follow(api: ReturnType<typeof apiOf>, first: string): Promise<unknown[]> {
  const found: unknown[] = [];
  let url: string | undefined = first;
  for (let pages = 0; url !== undefined; pages++) {
    if (pages > 200) throw new Error('the listing does not end');
    const { status, body, response } = await call(api, url, { headers: AUTH });
    expect(status, JSON.stringify(body)).toBe(200);
    found.push(...body.data);
    const link = response.headers.get('link');
    url = link === null ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)![1];
  }
  return found;
}

const users = Array.from({ length: 9 }, (_, i) => user('shop', `u-${i}`, { updated_at: at(10 * (i % 4) + 10) }));

describe('include_removed=true, the change feed', () => {
  it('on a storage without removals lists exactly the order=updated_at listing, paged and streamed', async () => {
    const api = apiOf(memory(users));
    const plain = await follow(api, list('limit=100&order=updated_at'));
    expect(plain).toHaveLength(9);
    for (const limit of [1, 2, 4]) expect(await follow(api, list(`limit=${limit}&include_removed=true`))).toEqual(plain);
    expect((await call(api, list('include_removed=true'), { headers: AUTH })).body.data).toEqual(plain);
    const since = `updated_since=${encodeURIComponent(at(30))}`;
    expect(await follow(api, list(`limit=2&include_removed=true&${since}`))).toEqual(await follow(api, list(`limit=100&${since}`)));
  });

  it('include_removed=false is the listing without it', async () => {
    const api = apiOf(memory(users));
    for (const query of ['limit=3', 'limit=3&order=date_joined&active=true', 'limit=3&order=updated_at']) {
      expect(await follow(api, list(`${query}&include_removed=false`))).toEqual(await follow(api, list(query)));
    }
    expect((await call(api, list('include_removed=false'), { headers: AUTH })).text).toBe((await call(api, list(''), { headers: AUTH })).text);
  });

  it('merges tombstones by (removed_at, shared_user_id) among the records, under the same cursors, for every page size', async () => {
    const storage = new WithRemovals(memory(users));
    // Ties with records and with each other; one older than updated_since.
    storage.removals = [
      { shared_user_id: 'gone-b', removed_at: at(20) },
      { shared_user_id: 'gone-a', removed_at: at(20) },
      { shared_user_id: 'u-9', removed_at: at(40) },
      { shared_user_id: 'gone-c', removed_at: at(5) },
      { shared_user_id: 'zz', removed_at: at(99) },
    ];
    const api = apiOf(storage);
    const records = (await follow(api, list('limit=100&order=updated_at'))) as { shared_user_id: string; updated_at: string }[];
    const key = (e: { shared_user_id: string; updated_at?: string; removed_at?: string }) => [e.updated_at ?? e.removed_at!, e.shared_user_id] as const;
    const expected = [...records, ...storage.removals].sort((x, y) => {
      const [a, b] = [key(x), key(y)];
      return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : compareCodePoints(a[1], b[1]);
    });
    for (const limit of [1, 2, 3, 7, 100]) expect(await follow(api, list(`limit=${limit}&include_removed=true`)), `limit ${limit}`).toEqual(expected);
    expect((await call(api, list('include_removed=true'), { headers: AUTH })).body.data).toEqual(expected);
    const since = at(20);
    const from = expected.filter((e) => key(e)[0] >= since);
    expect(await follow(api, list(`limit=2&include_removed=true&updated_since=${encodeURIComponent(since)}`))).toEqual(from);
    // A tombstone is exactly two keys.
    const { text } = await call(api, list(`limit=1&include_removed=true&updated_since=${encodeURIComponent(at(99))}`), { headers: AUTH });
    expect(text).toMatch(/^\{"status":"ok","data":\[\{"shared_user_id":"zz","removed_at":"2024-05-01T10:00:00\.000099\+00:00"\}\],"next_cursor":null,"errors":\[\]\}$/);
  });

  it('410 gone for a feed from before a pruned removal; a feed from after it, or without updated_since, goes on', async () => {
    const storage = new WithRemovals(memory(users));
    storage.removals = [{ shared_user_id: 'gone', removed_at: at(25) }];
    const api = apiOf(storage);
    const first = await call(api, list(`limit=2&include_removed=true&updated_since=${encodeURIComponent(at(1))}`), { headers: AUTH });
    expect(first.status).toBe(200);
    storage.prunedThrough = at(15);
    for (const since of [at(1), at(15)]) {
      const { status, body } = await call(api, list(`limit=2&include_removed=true&updated_since=${encodeURIComponent(since)}`), { headers: AUTH });
      expect(status).toBe(410);
      expect(body).toEqual({ status: 'error', data: [], errors: [{ code: 'gone', param: 'updated_since', message: expect.stringContaining('REMOVAL_RETENTION') }] });
    }
    // A cursor whose position is past the pruned removal needs nothing pruned: it goes on.
    const next = /^<([^>]+)>/.exec(first.response.headers.get('link')!)![1]!;
    storage.prunedThrough = at(9);
    expect((await call(api, next, { headers: AUTH })).status).toBe(200);
    storage.prunedThrough = at(15);
    expect((await call(api, next, { headers: AUTH })).status).toBe(410);
    expect((await call(api, list(`limit=2&include_removed=true&updated_since=${encodeURIComponent(at(16))}`), { headers: AUTH })).status).toBe(200);
    expect((await call(api, list('limit=2&include_removed=true'), { headers: AUTH })).status).toBe(200);
    // Without include_removed nothing changes.
    expect((await call(api, list(`limit=2&updated_since=${encodeURIComponent(at(1))}`), { headers: AUTH })).status).toBe(200);
  });

  it('400 for a bad value, another order, a filter a tombstone cannot meet; cursors bound to include_removed', async () => {
    const api = apiOf(memory(users));
    for (const [query, param, message] of [
      ['include_removed=yes', 'include_removed', 'include_removed must be true or false.'],
      ['include_removed=true&include_removed=true', 'include_removed', 'include_removed is given more than once.'],
      ['include_removed=true&order=date_joined', 'order', 'include_removed lists in updated_at order: send order=updated_at or no order.'],
      ['include_removed=true&active=true', 'active', 'include_removed lists every share and its removal: it does not combine with active.'],
      ['include_removed=true&joined_after=2020-01-01', 'joined_after', 'include_removed lists every share and its removal: it does not combine with joined_after.'],
    ] as const) {
      const { status, body } = await call(api, list(query), { headers: AUTH });
      expect(status, query).toBe(400);
      expect(body.errors, query).toEqual([{ code: 'invalid_parameter', message, param }]);
    }
    expect((await call(api, list('include_removed=true&order=updated_at&limit=2'), { headers: AUTH })).status).toBe(200);
    const cursorOf = async (query: string) => (await call(api, list(query), { headers: AUTH })).body.next_cursor as string;
    const feed = await cursorOf('limit=2&include_removed=true');
    const plain = await cursorOf('limit=2&order=updated_at');
    for (const query of [`order=updated_at&cursor=${feed}`, `include_removed=false&cursor=${feed}`, `include_removed=true&cursor=${plain}`]) {
      const { status, body } = await call(api, list(query), { headers: AUTH });
      expect(status, query).toBe(400);
      expect(body.errors[0].message).toBe('cursor was issued for other filters (active, joined_after, joined_before, updated_since, include_removed); send the same filters as the first page.');
    }
    expect((await call(api, list(`include_removed=true&cursor=${feed}`), { headers: AUTH })).status).toBe(200);
  });

  it('keeps a poll-only copy exact through adds, updates and deactivations interleaved with its pages (fast-check)', async () => {
    type Op = { kind: 'put'; id: number; name: number; active: boolean } | { kind: 'page' };
    const op = fc.oneof(fc.record({ kind: fc.constant('put' as const), id: fc.nat(11), name: fc.nat(3), active: fc.boolean() }), fc.constant({ kind: 'page' as const }));
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 40 }), fc.integer({ min: 1, max: 4 }), async (ops: Op[], limit) => {
        const storage = memory([]);
        const api = apiOf(storage);
        const client = new FeedClient(api, AUTH, limit);
        for (const step of ops) {
          if (step.kind === 'page') await client.step();
          else {
            const { merchant_id: _, ...record } = user('shop', `id-${step.id}`, { first_name: `n${step.name}`, deactivated_at: step.active ? null : '2024-01-01T00:00:00.000000+00:00' });
            storage.putUser('shop', record);
          }
        }
        await client.settle();
        const truth = (await follow(api, list('limit=1000&order=updated_at'))) as { shared_user_id: string }[];
        expect([...client.copy.values()].sort((a, b) => compareCodePoints(a.shared_user_id, b.shared_user_id))).toEqual(truth.sort((a, b) => compareCodePoints(a.shared_user_id, b.shared_user_id)));
      }),
      { numRuns: 60 },
    );
  });
});
