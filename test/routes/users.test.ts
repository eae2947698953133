/** docs/protocol.md#users: the user endpoints through api.fetch. */
import { describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { USER_RECORD_KEYS } from '../../src/storage/contract.js';
import { basic, call, ORIGIN, testApi } from '../support/api.js';
import { contractSeed, M1_ORDER, user } from '../support/seeds.js';

const M1 = basic('m1', 'key-one');
const list = (query = '') => `${ORIGIN}/merchant/users${query}`;

describe('Basic authentication', () => {
  const challenge = 'Basic realm="merchant", charset="UTF-8"';
  const cases: [string, Record<string, string>][] = [
    ['no credentials', {}],
    ['a wrong key', basic('m1', 'key-two')],
    ['an unknown merchant', basic('nobody', 'key-one')],
    ['a merchant id in the wrong case', basic('M2', 'key-two')],
    ['an empty key', basic('m1', '')],
    ['no colon', { authorization: `Basic ${btoa('m1key-one')}` }],
    ['bad base64', { authorization: 'Basic !!!notbase64' }],
    ['another scheme', { authorization: 'Bearer abc' }],
    ['right credentials under another scheme', { authorization: basic('m1', 'key-one').authorization!.replace('Basic', 'Bearer') }],
    ['right credentials without a scheme', { authorization: basic('m1', 'key-one').authorization!.replace('Basic ', '') }],
    ['base64 with a misplaced padding', { authorization: `Basic ${btoa('m1:key-one').replace(/=*$/, '')}=x` }],
    ['base64 padded where it may not be', { authorization: 'Basic bTE6a2V5LW9uZQ=' }],
    ['base64 with a space inside (atob would skip it)', { authorization: `Basic ${btoa('m1:key-one').replace('a2V5', 'a2V5 ')}` }],
    ['invalid UTF-8 inside the base64', { authorization: `Basic ${btoa('m1:\xff\xfe')}` }],
  ];
  for (const [name, headers] of cases) {
    it(`401 with the same body and WWW-Authenticate for ${name}`, async () => {
      const { api } = testApi();
      const { status, response, text } = await call(api, list(), { headers });
      expect(status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe(challenge);
      expect(text).toBe('{"status":"error","data":[],"errors":[{"code":"unauthorized","message":"Valid merchant credentials are required (HTTP Basic: merchant id and API key)."}]}');
    });
  }

  it('refuses an Authorization header longer than 4096 characters, even with the right key', async () => {
    // 'long:' and a 3061-character key are 3066 bytes: 4088 base64 characters.
    const key = 'k'.repeat(3061);
    const seed = contractSeed();
    seed.merchants.push({ id: 'long', status: 'active', keys: [key] });
    const api = createMerchantApi({ storage: new MemoryStorage(seed), logger: silentLogger });
    const encoded = btoa(`long:${key}`);
    expect(encoded).toHaveLength(4088);
    // The spaces after the scheme count in the header's length, not in the credentials.
    const header = (spaces: number) => ({ authorization: `Basic${' '.repeat(spaces)}${encoded}` });
    expect(header(3).authorization).toHaveLength(4096);
    expect((await call(api, list(), { headers: header(3) })).status).toBe(200);
    const { status, response } = await call(api, list(), { headers: header(4) });
    expect(status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(challenge);
  });

  it('refuses a NUL in the id or the key, an empty id and no colon before any storage sees it (a storage may end strings at NUL)', async () => {
    const inner = new MemoryStorage(contractSeed());
    const looked: string[] = [];
    // A storage that, as C strings do, ends an id at its first NUL.
    const truncating = new Proxy(inner, {
      get(target, name) {
        const value = Reflect.get(target, name, target);
        if (name !== 'getMerchant') return typeof value === 'function' ? value.bind(target) : value;
        return (id: string) => (looked.push(id), target.getMerchant(id.split('\u0000')[0]!));
      },
    });
    const api = createMerchantApi({ storage: truncating, logger: silentLogger });
    expect((await call(api, list(), { headers: M1 })).status).toBe(200);
    looked.length = 0;
    for (const credentials of ['m1\u0000anything:key-one', 'm1:key-one\u0000', ':key-one', 'm1key-one']) {
      const headers = { authorization: `Basic ${Buffer.from(credentials).toString('base64')}` };
      expect((await call(api, list(), { headers })).status).toBe(401);
    }
    expect(looked).toEqual([]);
  });

  it('accepts any active key and a lower-case scheme', async () => {
    const { api } = testApi();
    expect((await call(api, list(), { headers: basic('m1', 'key-one-rotated') })).status).toBe(200);
    expect((await call(api, list(), { headers: { authorization: basic('m1', 'key-one').authorization!.replace('Basic', 'basic') } })).status).toBe(200);
  });

  it('accepts a key that contains a colon and non-ASCII characters', async () => {
    const storage = new MemoryStorage();
    storage.putMerchant({ id: 'ü', status: 'active', keys: ['a:b☃'] });
    const api = createMerchantApi({ storage, logger: silentLogger });
    expect((await call(api, list(), { headers: basic('ü', 'a:b☃') })).status).toBe(200);
  });

  it('403 for a disabled merchant with a valid key, 401 with a wrong one', async () => {
    const { api } = testApi();
    const disabled = await call(api, list(), { headers: basic('off', 'key-off') });
    expect(disabled.status).toBe(403);
    expect(disabled.body).toEqual({ status: 'error', data: [], errors: [{ code: 'merchant_disabled', message: 'This account is disabled.' }] });
    expect((await call(api, `${list()}/x`, { headers: basic('off', 'key-off') })).status).toBe(403);
    expect((await call(api, list(), { headers: basic('off', 'wrong') })).status).toBe(401);
  });
});

describe('GET /merchant/users/{shared_user_id}', () => {
  it('answers the record with all 14 keys, in order, wrapped in an array', async () => {
    const { api } = testApi();
    const { status, text, body } = await call(api, `${list()}/b-003`, { headers: M1 });
    expect(status).toBe(200);
    expect(body.status).toBe('ok');
    expect(body.errors).toEqual([]);
    expect(body.data).toHaveLength(1);
    expect(Object.keys(body.data[0])).toEqual([...USER_RECORD_KEYS]);
    const { merchant_id: _, ...expected } = user('m1', 'b-003', { date_joined: '2020-01-03T00:00:00.999999+00:00', first_name: '🦄 Ünïcødé', city: '東京', state: 'Tōkyō' });
    expect(body.data[0]).toEqual(expected);
    expect(text).toContain('"date_joined":"2020-01-03T00:00:00.999999+00:00"');
  });

  it('decodes one percent-encoded path segment', async () => {
    const { api } = testApi();
    expect((await call(api, `${list()}/${encodeURIComponent('😀-emoji')}`, { headers: M1 })).body.data[0].shared_user_id).toBe('😀-emoji');
  });

  it('404 for a user shared only with another merchant, exactly as for one that does not exist', async () => {
    const { api } = testApi();
    const other = await call(api, `${list()}/other-id-for-shared`, { headers: M1 });
    const none = await call(api, `${list()}/does-not-exist`, { headers: M1 });
    expect(other.status).toBe(404);
    expect(other.text).toBe(none.text);
    expect(other.body.errors[0].code).toBe('not_found');
  });

  it('400 for query parameters, which this endpoint does not take', async () => {
    const { api } = testApi();
    const { status, body } = await call(api, `${list()}/a-001?limit=1`, { headers: M1 });
    expect(status).toBe(400);
    expect(body.errors).toEqual([{ code: 'unknown_parameter', message: 'Unknown parameter: limit. This endpoint takes none.', param: 'limit' }]);
  });

  it('404 for a deeper path', async () => {
    const { api } = testApi();
    expect((await call(api, `${list()}/a-001/more`, { headers: M1 })).status).toBe(404);
  });
});

describe('GET /merchant/users: the whole list', () => {
  it('lists every user of the merchant in code-point order of shared_user_id, a trailing slash alike', async () => {
    const { api } = testApi();
    for (const url of [list(), list('/')]) {
      const { status, body, response } = await call(api, url, { headers: M1 });
      expect(status).toBe(200);
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(body.data.map((u: { shared_user_id: string }) => u.shared_user_id)).toEqual(M1_ORDER);
      expect(body).not.toHaveProperty('next_cursor');
    }
  });

  it('streams 100,000 users as one valid JSON document with every record once', async () => {
    const storage = new MemoryStorage();
    storage.putMerchant({ id: 'big', status: 'active', keys: ['k'] });
    for (let i = 0; i < 100_000; i++) storage.putUser('big', { ...user('big', `u${String(i).padStart(6, '0')}`), merchant_id: undefined } as never);
    storage.putUser('other', { ...user('other', 'not-mine') } as never);
    const api = createMerchantApi({ storage, logger: silentLogger });
    const response = await api.fetch(new Request(list(), { headers: basic('big', 'k') }));
    expect(response.body).toBeInstanceOf(ReadableStream);
    let chunks = 0;
    let text = '';
    const decoder = new TextDecoder();
    const reader = response.body!.getReader();
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      chunks++;
      text += decoder.decode(read.value, { stream: true });
    }
    expect(chunks).toBeGreaterThan(50);
    const body = JSON.parse(text);
    expect(body.status).toBe('ok');
    expect(body.errors).toEqual([]);
    expect(body.data).toHaveLength(100_000);
    expect(new Set(body.data.map((u: { shared_user_id: string }) => u.shared_user_id)).size).toBe(100_000);
    expect(body.data[99_999].shared_user_id).toBe('u099999');
  });

  it('answers an empty list for a merchant with no users', async () => {
    const { api } = testApi();
    expect((await call(api, list(), { headers: basic('M1', 'case-differs') })).body).toEqual({ status: 'ok', data: [], errors: [] });
  });

  it('filters by active and by date_joined, exclusive, with offsets', async () => {
    const { api } = testApi();
    const ids = async (query: string) => (await call(api, list(query), { headers: M1 })).body.data.map((u: { shared_user_id: string }) => u.shared_user_id);
    expect(await ids('?active=false')).toEqual(['B-002', '😀-emoji']);
    expect(await ids('?active=true&joined_before=2020-01-04T00:00:00.500000Z')).toEqual(['a-001', 'b-003', 'shared']);
    expect(await ids('?joined_after=2020-01-01T01:00:00.000001%2B01:00&joined_before=2020-01-03')).toEqual(['B-002']);
  });

  it('answers HEAD with headers only', async () => {
    const { api } = testApi();
    const response = await api.fetch(new Request(list(), { method: 'HEAD', headers: M1 }));
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('');
  });
});

describe('list parameters: one error per problem', () => {
  const cases: [string, { code: string; param: string }[]][] = [
    ['?limit=0', [{ code: 'invalid_parameter', param: 'limit' }]],
    ['?limit=1001', [{ code: 'invalid_parameter', param: 'limit' }]],
    ['?limit=abc', [{ code: 'invalid_parameter', param: 'limit' }]],
    ['?limit=1.5', [{ code: 'invalid_parameter', param: 'limit' }]],
    ['?limit=-1', [{ code: 'invalid_parameter', param: 'limit' }]],
    ['?limit=01', [{ code: 'invalid_parameter', param: 'limit' }]],
    ['?limit=', [{ code: 'invalid_parameter', param: 'limit' }]],
    ['?active=yes', [{ code: 'invalid_parameter', param: 'active' }]],
    ['?joined_after=yesterday', [{ code: 'invalid_parameter', param: 'joined_after' }]],
    ['?joined_before=2020-13-01', [{ code: 'invalid_parameter', param: 'joined_before' }]],
    ['?joined_before=2021-02-29', [{ code: 'invalid_parameter', param: 'joined_before' }]],
    ['?cursor=', [{ code: 'invalid_cursor', param: 'cursor' }]],
    ['?cursor=garbage', [{ code: 'invalid_cursor', param: 'cursor' }]],
    ['?page=2', [{ code: 'unknown_parameter', param: 'page' }]],
    ['?limit=5&limit=6', [{ code: 'invalid_parameter', param: 'limit' }]],
    ['?sort=x&active=maybe&limit=0&offset=3', [
      { code: 'unknown_parameter', param: 'sort' },
      { code: 'unknown_parameter', param: 'offset' },
      { code: 'invalid_parameter', param: 'limit' },
      { code: 'invalid_parameter', param: 'active' },
    ]],
  ];
  for (const [query, expected] of cases) {
    it(`400 for ${query}`, async () => {
      const { api } = testApi();
      const { status, body } = await call(api, list(query), { headers: M1 });
      expect(status).toBe(400);
      expect(body.status).toBe('error');
      expect(body.errors.map(({ code, param }: { code: string; param: string }) => ({ code, param }))).toEqual(expected);
      for (const error of body.errors) expect(error.message).toEqual(expect.any(String));
    });
  }

  it('hints that a + in an offset must be sent as %2B', async () => {
    const { api } = testApi();
    const { body } = await call(api, list('?joined_after=2020-01-01T00:00:00+01:00'), { headers: M1 });
    expect(body.errors[0].message).toMatch(/%2B/);
  });
});

describe('pages and cursors', () => {
  async function followAll(api: ReturnType<typeof testApi>['api'], first: string, headers = M1) {
    const ids: string[] = [];
    let url: string | undefined = first;
    let pages = 0;
    while (url) {
      const { status, body, response } = await call(api, url, { headers });
      expect(status).toBe(200);
      pages++;
      ids.push(...body.data.map((u: { shared_user_id: string }) => u.shared_user_id));
      const link = response.headers.get('link');
      if (body.next_cursor === null) {
        expect(link).toBeNull();
        url = undefined;
      } else {
        expect(link).toMatch(/^<.+>; rel="next"$/);
        url = link!.slice(1, link!.indexOf('>'));
        expect(new URL(url).searchParams.get('cursor')).toBe(body.next_cursor);
      }
    }
    return { ids, pages };
  }

  it('covers every user exactly once when following next links, whatever the page size', async () => {
    const { api } = testApi();
    for (const limit of [1, 2, 3, 6, 7, 1000]) {
      const { ids, pages } = await followAll(api, list(`?limit=${limit}`));
      expect(ids).toEqual(M1_ORDER);
      expect(pages).toBe(Math.max(1, Math.ceil(M1_ORDER.length / limit)));
    }
  });

  it('keeps the filters across pages', async () => {
    const { api } = testApi();
    const { ids } = await followAll(api, list('?limit=1&active=true&joined_after=2020-01-01T00:00:00Z'));
    expect(ids).toEqual(['a-001', 'b-003', '中文-id', '\ufb01-ligature']);
  });

  it('puts the basePath and public URL in the Link header', async () => {
    const { api } = testApi({ basePath: '/mapi', publicUrl: 'https://api.example.com' });
    const { response } = await call(api, `${ORIGIN}/mapi/merchant/users?limit=2`, { headers: M1 });
    expect(response.headers.get('link')).toMatch(/^<https:\/\/api\.example\.com\/mapi\/merchant\/users\?limit=2&cursor=[\w.-]+>; rel="next"$/);
  });

  it('continues with the cursor\'s page size when limit is left out, and accepts a new limit', async () => {
    const { api } = testApi();
    const first = await call(api, list('?limit=2'), { headers: M1 });
    const cursor = first.body.next_cursor as string;
    expect((await call(api, list(`?cursor=${cursor}`), { headers: M1 })).body.data).toHaveLength(2);
    expect((await call(api, list(`?cursor=${cursor}&limit=5`), { headers: M1 })).body.data).toHaveLength(5);
  });

  it('400 invalid_cursor for a tampered cursor, one from another merchant, and one with changed filters', async () => {
    const { api } = testApi();
    const cursor = (await call(api, list('?limit=2&active=true'), { headers: M1 })).body.next_cursor as string;
    // The replacement differs from the character it replaces, so the cursor always changes.
    const tampered = cursor.slice(0, -3) + (cursor.at(-3) === 'A' ? 'B' : 'A') + cursor.slice(-2);
    const flipped = cursor.replace(/\.([^.]+)\./, (_, iv: string) => `.${iv.startsWith('A') ? 'B' : 'A'}${iv.slice(1)}.`);
    expect(tampered).not.toBe(cursor);
    expect(flipped).not.toBe(cursor);
    for (const [query, headers] of [
      [`?limit=2&active=true&cursor=${tampered}`, M1],
      [`?limit=2&active=true&cursor=${flipped}`, M1],
      [`?limit=2&active=true&cursor=${cursor}`, basic('m2', 'key-two')],
      [`?limit=2&active=false&cursor=${cursor}`, M1],
      [`?limit=2&cursor=${cursor}`, M1],
      [`?limit=2&active=true&joined_after=2000-01-01&cursor=${cursor}`, M1],
      [`?limit=2&active=true&joined_before=2100-01-01&cursor=${cursor}`, M1],
    ] as const) {
      const { status, body } = await call(api, list(query), { headers });
      expect(status).toBe(400);
      expect(body.errors).toEqual([{ code: 'invalid_cursor', message: expect.any(String), param: 'cursor' }]);
    }
    expect((await call(api, list(`?limit=2&active=true&cursor=${cursor}`), { headers: M1 })).status).toBe(200);
  });

  it('binds a cursor to every filter: each one added, dropped or changed is 400 invalid_cursor', async () => {
    const { api } = testApi();
    const filters = ['active=true', 'joined_after=2019-01-01', 'joined_before=2020-01-05'];
    const first = `?limit=1&${filters.join('&')}`;
    const cursor = (await call(api, list(first), { headers: M1 })).body.next_cursor as string;
    expect(typeof cursor).toBe('string');
    expect((await call(api, list(`${first}&cursor=${cursor}`), { headers: M1 })).status).toBe(200);
    for (const [i, filter] of filters.entries()) {
      const [name] = filter.split('=');
      const others = filters.filter((_, j) => j !== i);
      const changed = name === 'active' ? 'active=false' : `${name}=2019-06-01`;
      for (const query of [others.join('&'), [...others, changed].join('&')]) {
        const { status, body } = await call(api, list(`?limit=1&${query}&cursor=${cursor}`), { headers: M1 });
        expect({ query, status, code: body.errors?.[0]?.code }).toEqual({ query, status: 400, code: 'invalid_cursor' });
      }
    }
    // And the other way: a cursor from a listing without a filter does not serve one with it.
    const bare = (await call(api, list('?limit=1'), { headers: M1 })).body.next_cursor as string;
    for (const filter of filters) expect((await call(api, list(`?limit=1&${filter}&cursor=${bare}`), { headers: M1 })).status).toBe(400);
  });

  it('names the reason of a refused cursor: other filters, another order, or not one of ours', async () => {
    const { api } = testApi();
    const cursor = (await call(api, list('?limit=2&active=true'), { headers: M1 })).body.next_cursor as string;
    const message = async (query: string) => (await call(api, list(query), { headers: M1 })).body.errors[0].message;
    expect(await message(`?limit=2&cursor=${cursor}`)).toBe('cursor was issued for other filters (active, joined_after, joined_before, updated_since); send the same filters as the first page.');
    expect(await message(`?limit=2&active=true&order=date_joined&cursor=${cursor}`)).toBe('cursor was issued for another order; send the same order as the first page.');
    expect(await message(`?limit=2&active=true&cursor=${cursor.slice(0, -1)}`)).toBe('cursor is not a next_cursor this server issued for this listing.');
  });

  it('takes the cursor secret as text or as its UTF-8 bytes alike, and refuses one shorter than 32 bytes', async () => {
    const secret = 'a shared secret of at least thirty-two bytes';
    const text = testApi({ cursorSecret: secret }).api;
    const bytes = testApi({ cursorSecret: new TextEncoder().encode(secret) }).api;
    const cursor = (await call(text, list('?limit=2'), { headers: M1 })).body.next_cursor as string;
    expect((await call(bytes, list(`?limit=2&cursor=${cursor}`), { headers: M1 })).status).toBe(200);
    expect(() => testApi({ cursorSecret: 'x'.repeat(31) })).toThrow('cursorSecret must be at least 32 bytes long.');
    expect(() => testApi({ cursorSecret: new Uint8Array(31) })).toThrow('cursorSecret must be at least 32 bytes long.');
    expect(() => testApi({ cursorSecret: 'é'.repeat(16) })).not.toThrow();
  });

  it('rejects a cursor sealed under another secret, and accepts one from an instance sharing the secret', async () => {
    const secret = 'a shared secret of at least thirty-two bytes';
    const a = testApi({ cursorSecret: secret }).api;
    const b = testApi({ cursorSecret: secret }).api;
    const c = testApi().api;
    const cursor = (await call(a, list('?limit=2'), { headers: M1 })).body.next_cursor as string;
    expect((await call(b, list(`?limit=2&cursor=${cursor}`), { headers: M1 })).body.data[0].shared_user_id).toBe('b-003');
    expect((await call(c, list(`?limit=2&cursor=${cursor}`), { headers: M1 })).status).toBe(400);
  });

  it('hides the keyset position: the cursor does not contain the last id in any readable form', async () => {
    const { api } = testApi();
    const cursor = (await call(api, list('?limit=3'), { headers: M1 })).body.next_cursor as string;
    const decodedParts = cursor.split('.').map((part) => Buffer.from(part, 'base64url').toString('latin1'));
    for (const part of decodedParts) expect(part).not.toContain('b-003');
  });
});
