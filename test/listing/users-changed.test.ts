/**
 * docs/protocol.md#changed-since through api.fetch: `order=updated_at` and `updated_since`, their
 * cursors (bound to `updated_since` and the order), `updated_at` in those answers only, the short
 * pages of the bounded scan with the other filters, and the documented sync loop.
 */
import { describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { MemoryUserIndex } from '../../src/storage/memory/users.js';
import { USER_RECORD_KEYS, type ChangedUserRecord } from '../../src/storage/contract.js';
import type { SeedUser } from '../../src/storage/seed/seed.js';
import { compareCodePoints } from '../../src/storage/order.js';
import { SMALL_PLAN } from '../suites/storage-contract.js';
import { basic, call, ORIGIN } from '../support/api.js';
import { user } from '../support/seeds.js';

const AUTH = basic('shop', 'shop-key');
const at = (n: number) => `2024-05-${String(1 + (n % 5)).padStart(2, '0')}T10:00:00.00000${n % 3}+00:00`;
const list = (query: string) => `${ORIGIN}/merchant/users?${query}`;

function setup(users: SeedUser[]) {
  const storage = new MemoryStorage({ merchants: [{ id: 'shop', status: 'active', keys: ['shop-key'] }], users: MemoryUserIndex.fromSeedUsers(users, SMALL_PLAN) });
  const api = createMerchantApi({ storage, logger: silentLogger, cursorSecret: 'x'.repeat(32) });
  return { storage, api };
}

// Stamps with ties, some users deactivated: every page boundary and the bounded scan are crossed.
const users = Array.from({ length: 17 }, (_, i) => user('shop', `u-${String(16 - i).padStart(2, '0')}`, { updated_at: at(i), deactivated_at: i % 4 ? null : '2024-01-01T00:00:00.000000+00:00' }));
const byChange = (a: SeedUser, b: SeedUser) => (a.updated_at! < b.updated_at! ? -1 : a.updated_at! > b.updated_at! ? 1 : compareCodePoints(a.shared_user_id, b.shared_user_id));

async function follow(api: ReturnType<typeof setup>['api'], first: string): Promise<ChangedUserRecord[]> {
  const found: ChangedUserRecord[] = [];
  let url: string | undefined = first;
  for (let pages = 0; url !== undefined; pages++) {
    if (pages > 100) throw new Error('the listing does not end');
    const { status, body, response } = await call(api, url, { headers: AUTH });
    expect(status, JSON.stringify(body)).toBe(200);
    found.push(...body.data);
    const link = response.headers.get('link');
    url = link === null ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)![1];
  }
  return found;
}

describe('order=updated_at and updated_since', () => {
  it('pages in (updated_at, shared_user_id) order from updated_since, inclusive, combined with the other filters', async () => {
    const { api } = setup(users);
    const since = at(2);
    for (const [query, keep] of [
      ['order=updated_at', () => true],
      [`updated_since=${encodeURIComponent(since)}`, (u: SeedUser) => u.updated_at! >= since],
      [`updated_since=${encodeURIComponent(since)}&order=updated_at&active=false`, (u: SeedUser) => u.updated_at! >= since && u.deactivated_at !== null],
      ['order=updated_at&active=true&joined_after=2000-01-01', (u: SeedUser) => u.deactivated_at === null],
    ] as const) {
      const expected = users.filter(keep).sort(byChange).map(({ merchant_id: _, ...record }) => record);
      for (const limit of [1, 2, 5]) expect(await follow(api, list(`limit=${limit}&${query}`)), `${query} limit ${limit}`).toEqual(expected);
      // The streamed list, in batches past the bounded scan's stops, is the same.
      expect((await call(api, list(query), { headers: AUTH })).body.data).toEqual(expected);
    }
  });

  it('adds updated_at as a 15th key in its answers only: every other answer keeps the 14 keys, byte for byte', async () => {
    const { api } = setup(users);
    const keysOf = (text: string) => [...text.matchAll(/"([a-z_]+)":/g)].map((m) => m[1]).filter((key) => key !== 'status' && key !== 'data' && key !== 'next_cursor' && key !== 'errors');
    const record14 = [...USER_RECORD_KEYS].join(',');
    for (const query of ['limit=3', 'limit=3&order=date_joined', 'limit=3&order=shared_user_id', 'active=true']) {
      const { text } = await call(api, list(query), { headers: AUTH });
      expect(keysOf(text).join(',')).toBe(Array(keysOf(text).length / 14).fill(record14).join(','));
    }
    expect(keysOf((await call(api, `${ORIGIN}/merchant/users/u-03`, { headers: AUTH })).text).join(',')).toBe(record14);
    for (const query of ['limit=3&order=updated_at', `limit=3&updated_since=2024-01-01`]) {
      const { text } = await call(api, list(query), { headers: AUTH });
      expect(keysOf(text).join(',')).toBe(Array(3).fill(`${record14},updated_at`).join(','));
    }
  });

  it('400 for an invalid updated_since, and for updated_since with another order', async () => {
    const { api } = setup(users);
    for (const [query, param] of [
      ['updated_since=yesterday', 'updated_since'],
      ['updated_since=2024-01-01&order=date_joined', 'order'],
      ['updated_since=2024-01-01&order=shared_user_id', 'order'],
      ['updated_since=2024-01-01&updated_since=2024-01-02', 'updated_since'],
      ['order=updated', 'order'],
    ] as const) {
      const { status, body } = await call(api, list(query), { headers: AUTH });
      expect(status, query).toBe(400);
      expect(body.errors, query).toEqual([{ code: 'invalid_parameter', message: expect.any(String), param }]);
    }
  });

  it('binds its cursors to updated_since and to the order: 400 invalid_cursor otherwise', async () => {
    const { api } = setup(users);
    const since = encodeURIComponent(at(1));
    const cursor = encodeURIComponent((await call(api, list(`limit=2&updated_since=${since}`), { headers: AUTH })).body.next_cursor);
    for (const query of [
      `limit=2&cursor=${cursor}`,
      `limit=2&order=updated_at&cursor=${cursor}`,
      `limit=2&updated_since=${encodeURIComponent(at(2))}&cursor=${cursor}`,
      `limit=2&order=date_joined&cursor=${cursor}`,
    ]) {
      const { status, body } = await call(api, list(query), { headers: AUTH });
      expect(status, query).toBe(400);
      expect(body.errors[0]).toMatchObject({ code: 'invalid_cursor', param: 'cursor' });
    }
    expect((await call(api, list(`limit=2&updated_since=${since}&cursor=${cursor}`), { headers: AUTH })).status).toBe(200);
    expect((await call(api, list(`limit=2&updated_since=${since}&order=updated_at&cursor=${cursor}`), { headers: AUTH })).status).toBe(200);
    // A cursor of order=updated_at without updated_since is not one of updated_since's, nor of date_joined's.
    const plain = encodeURIComponent((await call(api, list('limit=2&order=updated_at'), { headers: AUTH })).body.next_cursor);
    expect((await call(api, list(`limit=2&updated_since=${since}&cursor=${plain}`), { headers: AUTH })).status).toBe(400);
    expect((await call(api, list(`limit=2&order=date_joined&cursor=${plain}`), { headers: AUTH })).status).toBe(400);
    expect((await call(api, list(`limit=2&order=updated_at&cursor=${plain}`), { headers: AUTH })).status).toBe(200);
  });

  it('keeps a copy in step with the documented sync loop: remember the last updated_at, ask again from it', async () => {
    const { storage, api } = setup(users);
    const copy = new Map<string, ChangedUserRecord>();
    let last: string | undefined;
    const sync = async () => {
      const query = last === undefined ? 'limit=4&order=updated_at' : `limit=4&updated_since=${encodeURIComponent(last)}`;
      for (const record of await follow(api, list(query))) {
        copy.set(record.shared_user_id, record);
        last = record.updated_at;
      }
    };
    const current = async () => (await follow(api, list('limit=100&order=updated_at'))).sort((a, b) => compareCodePoints(a.shared_user_id, b.shared_user_id));
    await sync();
    for (let round = 0; round < 4; round++) {
      const { merchant_id: _, updated_at: __, ...record } = users[(round * 5) % users.length]!;
      storage.putUser('shop', { ...record, first_name: `changed ${round}` });
      storage.putUser('shop', { ...record, first_name: `changed ${round}` }); // the same again: no change
      storage.putUser('shop', { ...user('shop', `new-${round}`), merchant_id: undefined } as never);
      await sync();
      expect([...copy.values()].sort((a, b) => compareCodePoints(a.shared_user_id, b.shared_user_id))).toEqual(await current());
    }
  });
});
