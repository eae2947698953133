/**
 * docs/protocol.md#pagination-and-cursors and #filters through api.fetch: `order=date_joined` with
 * its own cursors, and the short pages of a bounded scan (a date filter in id order over a large
 * range), which carry a next_cursor until the listing ends, in pages and in the streamed list.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { MemoryUserIndex } from '../../src/storage/memory/users.js';
import type { UserFilter, UserOrder, UserRecord } from '../../src/storage/contract.js';
import type { SeedUser } from '../../src/storage/seed/seed.js';
import { fullScan, SMALL_PLAN } from '../suites/storage-contract.js';
import { basic, call, ORIGIN } from '../support/api.js';
import { user } from '../support/seeds.js';

const AUTH = basic('shop', 'shop-key');
const day = (n: number) => `2021-01-${String(1 + (n % 28)).padStart(2, '0')}T00:00:00.000000+00:00`;

function apiWith(users: SeedUser[], streamBatchSize?: number) {
  const storage = new MemoryStorage({ merchants: [{ id: 'shop', status: 'active', keys: ['shop-key'] }], users: MemoryUserIndex.fromSeedUsers(users, SMALL_PLAN) });
  return createMerchantApi({ storage, logger: silentLogger, cursorSecret: 'x'.repeat(32), ...(streamBatchSize ? { streamBatchSize } : {}) });
}

function query(filter: UserFilter, order?: UserOrder): string {
  const pairs: string[] = [];
  if (filter.active !== undefined) pairs.push(`active=${filter.active}`);
  if (filter.joinedAfter !== undefined) pairs.push(`joined_after=${encodeURIComponent(filter.joinedAfter)}`);
  if (filter.joinedBefore !== undefined) pairs.push(`joined_before=${encodeURIComponent(filter.joinedBefore)}`);
  if (order !== undefined) pairs.push(`order=${order}`);
  return pairs.join('&');
}

/** Follows the Link header from the first page to the last; checks each page's size and cursor. */
async function follow(api: ReturnType<typeof apiWith>, first: string, limit: number): Promise<{ users: UserRecord[]; pages: number; short: number }> {
  const users: UserRecord[] = [];
  let url: string | undefined = first;
  let pages = 0;
  let short = 0;
  while (url !== undefined) {
    if (++pages > 500) throw new Error('the listing does not end');
    const { status, body, response } = await call(api, url, { headers: AUTH });
    expect(status, JSON.stringify(body)).toBe(200);
    expect(body.data.length).toBeLessThanOrEqual(limit);
    users.push(...body.data);
    const link = response.headers.get('link');
    expect(link === null).toBe(body.next_cursor === null);
    if (body.next_cursor !== null && body.data.length < limit) short++;
    url = link === null ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)![1];
  }
  return { users, pages, short };
}

describe('order=date_joined', () => {
  const users = Array.from({ length: 23 }, (_, i) => user('shop', `u-${String(22 - i).padStart(2, '0')}`, { date_joined: day(i % 7), deactivated_at: i % 4 ? null : day(9) }));

  it('pages oldest first, ties by shared_user_id, with cursors that keep the order and filters', async () => {
    const api = apiWith(users);
    for (const filter of [{}, { active: true }, { joinedAfter: day(2) }, { active: false, joinedBefore: day(5) }] as UserFilter[]) {
      for (const limit of [1, 4, 10]) {
        const { users: got } = await follow(api, `${ORIGIN}/merchant/users?limit=${limit}&${query(filter, 'date_joined')}`, limit);
        expect(got, JSON.stringify({ filter, limit })).toEqual(fullScan(users, 'shop', filter, 'date_joined'));
      }
    }
  });

  it('streams the whole list in that order too', async () => {
    const api = apiWith(users, 3);
    const { body } = await call(api, `${ORIGIN}/merchant/users?order=date_joined&active=true`, { headers: AUTH });
    expect(body.data).toEqual(fullScan(users, 'shop', { active: true }, 'date_joined'));
  });

  it('400 for another order, and for a cursor used with the other order', async () => {
    const api = apiWith(users);
    const bad = await call(api, `${ORIGIN}/merchant/users?order=email_address`, { headers: AUTH });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toEqual([{ code: 'invalid_parameter', message: 'order must be shared_user_id, date_joined or updated_at.', param: 'order' }]);
    const first = await call(api, `${ORIGIN}/merchant/users?limit=2&order=date_joined`, { headers: AUTH });
    const cursor = encodeURIComponent(first.body.next_cursor);
    const swapped = await call(api, `${ORIGIN}/merchant/users?limit=2&cursor=${cursor}`, { headers: AUTH });
    expect(swapped.status).toBe(400);
    expect(swapped.body.errors[0]).toMatchObject({ code: 'invalid_cursor', param: 'cursor' });
    const idCursor = encodeURIComponent((await call(api, `${ORIGIN}/merchant/users?limit=2`, { headers: AUTH })).body.next_cursor);
    expect((await call(api, `${ORIGIN}/merchant/users?limit=2&order=date_joined&cursor=${idCursor}`, { headers: AUTH })).status).toBe(400);
    expect((await call(api, `${ORIGIN}/merchant/users?limit=2&order=shared_user_id&cursor=${idCursor}`, { headers: AUTH })).status).toBe(200);
  });
});

describe('a date filter in id order over a large range', () => {
  // 40 users, every one in the range: more than SMALL_PLAN.seekLimit, so pages scan in id order.
  const many = Array.from({ length: 40 }, (_, i) => user('shop', `s-${String(i).padStart(2, '0')}`, { date_joined: day(i % 3 === 0 ? 20 : 1) }));

  it('answers short pages with a next_cursor until the end, and every user once', async () => {
    const api = apiWith(many);
    const filter = { joinedAfter: day(10) };
    const { users: got, short } = await follow(api, `${ORIGIN}/merchant/users?limit=4&${query(filter)}`, 4);
    expect(got).toEqual(fullScan(many, 'shop', filter));
    expect(short).toBeGreaterThan(0);
  });

  it('streams the whole list past the short reads, as one valid document', async () => {
    const api = apiWith(many, 4);
    const { body } = await call(api, `${ORIGIN}/merchant/users?joined_after=${encodeURIComponent(day(10))}`, { headers: AUTH });
    expect(body.data).toEqual(fullScan(many, 'shop', { joinedAfter: day(10) }));
  });

  it('holds for random data, filters and page sizes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.record({ id: fc.string({ unit: fc.constantFrom('a', 'B', '中', '😀', '\ue000'), minLength: 1, maxLength: 4 }), day: fc.nat(6), active: fc.boolean() }), { selector: (u) => u.id, maxLength: 40 }),
        fc.record({ active: fc.constantFrom(undefined, true, false), after: fc.constantFrom(undefined, 0, 2, 5), before: fc.constantFrom(undefined, 1, 4, 7) }),
        fc.constantFrom<UserOrder | undefined>(undefined, 'date_joined'),
        fc.integer({ min: 1, max: 5 }),
        fc.constantFrom(1, 2, 7),
        async (raw, f, order, limit, batch) => {
          const users = raw.map((u) => user('shop', u.id, { date_joined: day(u.day), deactivated_at: u.active ? null : day(8) }));
          const filter: UserFilter = {};
          if (f.active !== undefined) filter.active = f.active;
          if (f.after !== undefined) filter.joinedAfter = day(f.after);
          if (f.before !== undefined) filter.joinedBefore = day(f.before);
          const expected = fullScan(users, 'shop', filter, order);
          const api = apiWith(users, batch);
          expect((await follow(api, `${ORIGIN}/merchant/users?limit=${limit}&${query(filter, order)}`, limit)).users).toEqual(expected);
          expect((await call(api, `${ORIGIN}/merchant/users?${query(filter, order)}`, { headers: AUTH })).body.data).toEqual(expected);
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('the streamed list in pieces', () => {
  // 250 users: with a storage batch of 1000 (the default) or 150, the pieces fall inside and across batches.
  const users = Array.from({ length: 250 }, (_, i) => user('shop', `p-${String(i).padStart(3, '0')}`, { date_joined: day(i % 5) }));

  for (const batch of [undefined, 150, 100, 7]) {
    it(`sends every user once, in order, as one document, in pieces of at most 100 records (storage batch ${batch ?? 'default'})`, async () => {
      const api = apiWith(users, batch);
      const response = await api.fetch(new Request(`${ORIGIN}/merchant/users`, { headers: AUTH }));
      expect(response.status).toBe(200);
      const decoder = new TextDecoder();
      const pieces: string[] = [];
      const reader = response.body!.getReader();
      for (let read = await reader.read(); !read.done; read = await reader.read()) pieces.push(decoder.decode(read.value));
      // A big piece is a large object to V8 (docs/benchmarks.md#streaming-memory): none holds more than 100 records.
      for (const piece of pieces) expect(piece.split('"shared_user_id"').length - 1).toBeLessThanOrEqual(100);
      expect(pieces.length).toBeGreaterThanOrEqual(3);
      const body = JSON.parse(pieces.join('')) as { data: UserRecord[]; errors: unknown[] };
      expect(body.data.map((u) => u.shared_user_id)).toEqual(fullScan(users, 'shop', {}).map((u) => u.shared_user_id));
      expect(body.errors).toEqual([]);
    });
  }

  it('sends an empty list as one document', async () => {
    const api = apiWith([]);
    const { status, body } = await call(api, `${ORIGIN}/merchant/users`, { headers: AUTH });
    expect(status).toBe(200);
    expect(body).toEqual({ status: 'ok', data: [], errors: [] });
  });
});
