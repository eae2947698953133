/**
 * The HTTP conformance suite: every row of docs/protocol.md over real HTTP,
 * written once and run against a real server process on each runtime
 * (test/adapters/http-node.test.ts, http-bun.test.ts, http-deno.test.ts), loaded with
 * `conformanceSeed()`. Signed URLs come from test/support/test-signer.ts,
 * which shares no code with the library.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { basic } from '../support/basic-auth.js';
import { send, sendRaw, type HttpResponse, type RequestOptions } from '../support/http-client.js';
import { asRecord, conformanceSeed, GENERATED_USERS, MERCHANTS, SPECIAL_IDS, type SeedUser } from '../support/seeds.js';
import { freshSalt, hmacSha224, queryString, quote, signatureMessage, signedUrl, type Pair } from '../support/test-signer.js';

/** Malformed requests sent as raw bytes (docs/protocol.md#failures: a 4xx JSON answer, and the server keeps serving). */
export const MALFORMED = {
  'query with bad percent-encoding': (h: string) => get(h, '/validatesignature?cp=%zz&ts=1&salt=s&hmac=h'),
  'query with a truncated escape': (h: string) => get(h, '/merchant/users?active=%E', AUTH),
  'query with percent-encoded invalid UTF-8': (h: string) => get(h, '/validatesignature?cp=%C3%28&ts=1&salt=s&hmac=h'),
  'query with an overlong UTF-8 encoding': (h: string) => get(h, '/merchant/users?active=%C0%AF', AUTH),
  'query with an encoded lone surrogate': (h: string) => get(h, '/validatesignature?cp=%ED%A0%80&ts=1&salt=s&hmac=h'),
  'query with raw invalid UTF-8 bytes': (h: string) => get(h, '/validatesignature?cp=\xc3\x28&ts=1&salt=s&hmac=h'),
  'query with a percent-encoded NUL': (h: string) => get(h, '/validatesignature?cp=a%00b&ts=1&salt=s&hmac=h'),
  'request line with a raw NUL byte': (h: string) => get(h, '/validatesignature?cp=a\x00b'),
  'query longer than 8 KiB': (h: string) => get(h, `/validatesignature?cp=m&ts=1&salt=${'s'.repeat(9000)}&hmac=h`),
  'request line longer than 64 KiB': (h: string) => get(h, `/merchant/users?x=${'a'.repeat(65_536)}`),
  'header longer than 64 KiB': (h: string) => get(h, '/healthz', `X-Big: ${'a'.repeat(65_536)}\r\n`),
  'header with a control character': (h: string) => get(h, '/healthz', 'X-Ctl: a\x01b\r\n'),
  'garbage instead of a request line': () => 'HELLO WORLD\r\n\r\n',
  'Host header with a slash in it': () => 'GET /users HTTP/1.1\r\nHost: x/merchant\r\nConnection: close\r\n\r\n',
  'two Host header lines': (h: string) => get(h, '/healthz', 'Host: other.example\r\n'),
  'path with bad percent-encoding': (h: string) => get(h, '/merchant/users/%E0%A4%A', AUTH),
  'path with a percent-encoded NUL': (h: string) => get(h, '/merchant/users/a%00b', AUTH),
  'path climbing out with ../': (h: string) => get(h, '/merchant/users/../../../etc/passwd', AUTH),
  'Basic credentials that are not base64': (h: string) => get(h, '/merchant/users', 'Authorization: Basic !!!not-base64!!!\r\n'),
  'Basic credentials decoding to invalid UTF-8': (h: string) => get(h, '/merchant/users', `Authorization: Basic ${Buffer.from([0xc3, 0x28, 0x3a, 0x6b]).toString('base64')}\r\n`),
  'Basic credentials without a colon': (h: string) => get(h, '/merchant/users', `Authorization: Basic ${Buffer.from('shop-main').toString('base64')}\r\n`),
  'Basic credentials with a NUL': (h: string) => get(h, '/merchant/users', `Authorization: Basic ${Buffer.from('shop-main\0:x').toString('base64')}\r\n`),
  'an Expect other than 100-continue': (h: string) => get(h, '/healthz', 'Expect: bogus\r\n'),
  'a POST with a body': (h: string) => `POST /validatesignature HTTP/1.1\r\nHost: ${h}\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello`,
} as const;

export type MalformedCase = keyof typeof MALFORMED;

export interface ConformanceOptions {
  /** Base URL of the server under test, loaded with `conformanceSeed()`; read once it has started. */
  baseUrl: () => string;
  /**
   * Malformed requests this runtime's HTTP layer answers itself, before the
   * handler sees them, with the status it sends (a bare status line, no
   * JSON). Listed per runtime so the README's table is tested.
   */
  runtimeAnswers?: Partial<Record<MalformedCase, number>>;
  /**
   * The runtime resolves `.` and `..` path segments before the handler sees
   * the request (Bun): they are then answered as the resolved path.
   */
  resolvesDotSegments?: boolean;
}

const AUTH = `Authorization: Basic ${Buffer.from(`${MERCHANTS.main.id}:${MERCHANTS.main.keys[0]}`).toString('base64')}\r\n`;
const USER_KEYS = [
  'shared_user_id', 'first_name', 'last_name', 'email_address', 'street', 'zip_code', 'city', 'state',
  'country', 'preferred_language', 'date_joined', 'deactivated_at', 'agreed_to_terms_and_conditions', 'agreed_to_marketing',
];
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}\+00:00$/;
const OK = '{"status":"ok","is_valid":true}';
const MISMATCH = '{"status":"error","message":"Signature does not match.","is_valid":false}';
const DISABLED = '{"status":"error","message":"This account is disabled.","is_valid":false}';
/** A ts from before a memory-storage server started (docs/protocol.md#a-bounded-replay-store). */
const BEFORE_START = '{"status":"error","message":"Invalid timestamp: ts is before this server started; sign the request again with the current time.","is_valid":false}';
const NO_MERCHANT = '{"status":"error","is_valid":false}';

function get(host: string, target: string, extraHeaders = ''): string {
  return `GET ${target} HTTP/1.1\r\nHost: ${host}\r\n${extraHeaders}Connection: close\r\n\r\n`;
}

/** Every answer is JSON and never cached (docs/protocol.md#endpoints). */
function expectJsonHeaders(response: { headers: Record<string, string | string[] | undefined> }): void {
  expect(response.headers['content-type']).toBe('application/json');
  expect(response.headers['cache-control']).toBe('no-store');
}

function parsed(response: HttpResponse): any {
  expectJsonHeaders(response);
  return JSON.parse(response.body);
}

/** Users of a merchant in the documented order: by shared_user_id, UTF-8 bytes (code points). */
function usersOf(merchantId: string, keep: (u: SeedUser) => boolean = () => true) {
  return conformanceSeed()
    .users.filter((u) => u.merchant_id === merchantId && keep(u))
    .sort((a, b) => Buffer.compare(Buffer.from(a.shared_user_id), Buffer.from(b.shared_user_id)))
    .map(asRecord);
}

export function describeHttpConformance(options: ConformanceOptions): void {
  const base = () => options.baseUrl();
  const call = (path: string, init?: RequestOptions) => send(`${base()}${path}`, init);
  const endpoint = () => `${base()}/validatesignature`;
  const { main, other, closed, unicode } = MERCHANTS;
  const asMain = basic(main.id, main.keys[0]);

  describe('GET /validatesignature (docs/protocol.md#signing)', () => {
    it('uses a test signer that reproduces the known-answer vectors', () => {
      type Vector = { secret: string | null; method: string; url: string; pairs: Pair[]; hmac?: string; message?: string };
      const { vectors } = JSON.parse(readFileSync(new URL('../fixtures/signing-vectors.json', import.meta.url), 'utf8')) as { vectors: Vector[] };
      for (const v of vectors) {
        const message = signatureMessage(v.method, v.url, v.pairs);
        if (v.message !== undefined) expect(message).toBe(v.message);
        if (v.hmac !== undefined) expect(hmacSha224(v.secret!, message)).toBe(v.hmac.toLowerCase());
      }
    });

    it('answers 200 {"status":"ok","is_valid":true} to a valid signature', async () => {
      const response = await send(signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id }));
      expect(response.status).toBe(200);
      expectJsonHeaders(response);
      expect(response.body).toBe(OK);
    });

    it('accepts every active key of the merchant (key rotation)', async () => {
      for (const secret of main.keys) expect((await send(signedUrl({ secret, url: endpoint(), cp: main.id }))).body).toBe(OK);
    });

    it('compares the hmac case-insensitively', async () => {
      const url = signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id }).replace(/hmac=([0-9a-f]+)$/, (_, h: string) => `hmac=${h.toUpperCase()}`);
      expect((await send(url)).body).toBe(OK);
    });

    it("covers extra parameters: repeated keys, !'()*, non-ASCII, and + decoded as a space", async () => {
      const extra: Pair[] = [['note', "it's (fine)!*"], ['k', 'v2'], ['k', 'v1'], ['k', 'V0'], ['ümlaut', '☃ 🐍'], ['space', 'a b+c']];
      const url = signedUrl({ secret: main.keys[1], url: endpoint(), cp: main.id, extra });
      // Form encoding: a client may send the space as '+'; the '+' itself must stay %2B.
      expect(url).toContain('space=a%20b%2Bc');
      const response = await send(url.replace('space=a%20b%2Bc', 'space=a+b%2Bc'));
      expect(response.body).toBe(OK);
    });

    it('leaves gettoken out of the signature', async () => {
      expect((await send(`${signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id })}&gettoken=anything`)).body).toBe(OK);
    });

    it('accepts a non-ASCII merchant id and key', async () => {
      expect((await send(signedUrl({ secret: unicode.keys[0], url: endpoint(), cp: unicode.id }))).body).toBe(OK);
    });

    it('answers HEAD with the status and headers of GET and no body; the method is signed', async () => {
      const head = await send(signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id, method: 'HEAD' }), { method: 'HEAD' });
      expect([head.status, head.body]).toEqual([200, '']);
      expectJsonHeaders(head);
      const signedForGet = await send(signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id }), { method: 'HEAD' });
      expect([signedForGet.status, signedForGet.body]).toEqual([400, '']);
    });

    for (const name of ['salt', 'cp', 'ts', 'hmac']) {
      it(`answers 400 naming ${name} when it is absent or empty`, async () => {
        const pairs: Pair[] = [['cp', main.id], ['ts', String(Math.floor(Date.now() / 1000))], ['salt', freshSalt()], ['hmac', 'ab12']];
        const body = `{"status":"error","message":"Missing required parameter: ${name}.","is_valid":false}`;
        for (const variant of [pairs.filter(([k]) => k !== name), pairs.map(([k, v]): Pair => [k, k === name ? '' : v])]) {
          const response = await call(`/validatesignature?${queryString(variant)}`);
          expect(response.status).toBe(400);
          expectJsonHeaders(response);
          expect(response.body).toBe(body);
        }
      });
    }

    it('names every missing parameter at once', async () => {
      const answer = parsed(await call('/validatesignature'));
      expect(answer).toMatchObject({ status: 'error', is_valid: false });
      for (const name of ['salt', 'cp', 'ts', 'hmac']) expect(answer.message).toContain(name);
    });

    it('answers 400 when cp, ts, salt or hmac is given twice', async () => {
      for (const name of ['cp', 'ts', 'salt', 'hmac']) {
        const url = signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id, extra: name === 'hmac' ? [] : [[name, name === 'ts' ? '1' : 'again']] });
        const response = await send(name === 'hmac' ? `${url}&hmac=00` : url);
        expect(response.status).toBe(400);
        const answer = parsed(response);
        expect(answer).toMatchObject({ status: 'error', is_valid: false });
        expect(answer.message).toContain(name);
      }
    });

    it('answers 404 {"status":"error","is_valid":false} for an unknown merchant, before checking the signature', async () => {
      const response = await send(signedUrl({ secret: 'whatever', url: endpoint(), cp: 'no-such-merchant' }));
      expect(response.status).toBe(404);
      expectJsonHeaders(response);
      expect(response.body).toBe(NO_MERCHANT);
    });

    it('answers 403 for a disabled merchant, whether or not the signature matches', async () => {
      for (const secret of [closed.keys[0], 'wrong-key']) {
        const response = await send(signedUrl({ secret, url: endpoint(), cp: closed.id }));
        expect(response.status).toBe(403);
        expectJsonHeaders(response);
        expect(response.body).toBe(DISABLED);
      }
    });

    it('answers 400 "Signature does not match." for a wrong key, a changed query, or another URL', async () => {
      const sign = (url: string) => signedUrl({ secret: main.keys[0], url, cp: main.id });
      const otherScheme = endpoint().startsWith('https:') ? endpoint().replace('https:', 'http:') : endpoint().replace('http:', 'https:');
      const urls = [
        signedUrl({ secret: other.keys[0], url: endpoint(), cp: main.id }),
        `${sign(endpoint())}&added=after-signing`,
        sign(endpoint()).replace(/ts=(\d+)/, (_, ts: string) => `ts=${Number(ts) - 1}`),
        // Signed for another host, scheme or path than the one called: base_url is covered.
        sign('http://api.example.com/validatesignature').replace('http://api.example.com', base()),
        sign(otherScheme).replace(otherScheme, endpoint()),
        sign(`${base()}/validateSignature`).replace('/validateSignature', '/validatesignature'),
      ];
      for (const url of urls) {
        const response = await send(url);
        expect(response.status).toBe(400);
        expectJsonHeaders(response);
        expect(response.body).toBe(MISMATCH);
      }
    });

    it('checks the signature before the timestamp', async () => {
      const stale = String(Math.floor(Date.now() / 1000) - 3600);
      expect((await send(signedUrl({ secret: 'wrong-key', url: endpoint(), cp: main.id, ts: stale }))).body).toBe(MISMATCH);
    });

    it('answers 400 for a timestamp that is not whole seconds or is outside the window, either way', async () => {
      const now = Math.floor(Date.now() / 1000);
      // Each refusal below is a failed authentication (docs/security.md#only-a-whole-success-is-a-success):
      // a whole success first resets this address's count of the tests before, as a client's would.
      expect((await send(signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id }))).body).toBe(OK);
      for (const ts of ['abc', `${now}.5`, '1e9', String(now - 3600), String(now + 3600), String(now - 400), String(now + 400)]) {
        const response = await send(signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id, ts }));
        expect(response.status).toBe(400);
        const answer = parsed(response);
        expect(Object.keys(answer)).toEqual(['status', 'message', 'is_valid']);
        expect(answer).toMatchObject({ status: 'error', is_valid: false });
        expect(answer.message).toMatch(/timestamp/i);
      }
      expect((await send(signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id, ts: String(now + 200) }))).body).toBe(OK);
      // 200 s back is inside the window too, unless the server (memory storage) started since then.
      expect([OK, BEFORE_START]).toContain((await send(signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id, ts: String(now - 200) }))).body);
    });

    it('answers 400 to a replayed salt, also re-signed with a new ts; the salt is per merchant', async () => {
      const salt = freshSalt();
      const url = signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id, salt });
      expect((await send(url)).body).toBe(OK);
      for (const replay of [url, signedUrl({ secret: main.keys[1], url: endpoint(), cp: main.id, salt, ts: String(Math.floor(Date.now() / 1000) - 5) })]) {
        const response = await send(replay);
        expect(response.status).toBe(400);
        const answer = parsed(response);
        expect(answer).toMatchObject({ status: 'error', is_valid: false });
        expect(answer.message).toMatch(/salt/i);
        expect(answer.message).toMatch(/already|used|replay/i);
      }
      expect((await send(signedUrl({ secret: other.keys[0], url: endpoint(), cp: other.id, salt }))).body).toBe(OK);
    });

    it('records a salt only when every other check passed', async () => {
      const salt = freshSalt();
      const stale = String(Math.floor(Date.now() / 1000) - 3600);
      expect((await send(signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id, salt, ts: stale }))).status).toBe(400);
      expect((await send(signedUrl({ secret: 'wrong-key', url: endpoint(), cp: main.id, salt }))).status).toBe(400);
      expect((await send(signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id, salt }))).body).toBe(OK);
    });
  });

  describe('GET /merchant/users authentication (docs/protocol.md#users)', () => {
    it('answers 401 with WWW-Authenticate and one same body for every credential problem', async () => {
      const attempts: Record<string, string>[] = [
        {},
        { authorization: 'Bearer abc' },
        { authorization: 'Basic' },
        { authorization: 'Basic !!!' },
        { authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` },
        basic(main.id, ''),
        basic(main.id, 'wrong-key'),
        basic(main.id, main.keys[0].toUpperCase()),
        basic('no-such-merchant', 'any'),
        basic(other.id, main.keys[0]),
      ];
      const bodies = new Set<string>();
      for (const headers of attempts) {
        for (const path of ['/merchant/users', '/merchant/users/u-00001']) {
          const response = await call(path, { headers });
          expect(response.status).toBe(401);
          expect(response.headers['www-authenticate']).toBe('Basic realm="merchant", charset="UTF-8"');
          expect(parsed(response)).toMatchObject({ status: 'error', errors: [{ code: expect.any(String), message: expect.any(String) }] });
          bodies.add(response.body);
        }
      }
      expect(bodies.size).toBe(1);
    });

    it('answers 403 to a disabled merchant with a valid key (and 401 with a wrong one)', async () => {
      const response = await call('/merchant/users', { headers: basic(closed.id, closed.keys[0]) });
      expect(response.status).toBe(403);
      expect(parsed(response)).toMatchObject({ status: 'error', errors: [{ code: expect.any(String) }] });
      expect((await call('/merchant/users', { headers: basic(closed.id, 'wrong') })).status).toBe(401);
    });

    it('accepts any active key, and non-ASCII credentials as UTF-8', async () => {
      for (const key of main.keys) expect((await call('/merchant/users?limit=1', { headers: basic(main.id, key) })).status).toBe(200);
      const answer = parsed(await call('/merchant/users', { headers: basic(unicode.id, unicode.keys[0]) }));
      expect(answer.data.map((u: { shared_user_id: string }) => u.shared_user_id)).toEqual(['uni-1']);
    });
  });

  describe('GET /merchant/users/{shared_user_id} (docs/protocol.md#users)', () => {
    it('answers the one user as an array of one record with all 14 keys in order', async () => {
      const response = await call('/merchant/users/u-00042', { headers: asMain });
      expect(response.status).toBe(200);
      const answer = parsed(response);
      expect(Object.keys(answer)).toEqual(['status', 'data', 'errors']);
      expect(answer).toEqual({ status: 'ok', data: [usersOf(main.id, (u) => u.shared_user_id === 'u-00042')[0]], errors: [] });
      expect(Object.keys(answer.data[0])).toEqual(USER_KEYS);
    });

    it('keeps microseconds exactly, in UTC with an explicit offset, and nulls as null', async () => {
      for (const id of ['u-00010', 'u-00011', 'u-00012']) {
        const [record] = parsed(await call(`/merchant/users/${id}`, { headers: asMain })).data;
        expect(record).toEqual(usersOf(main.id, (u) => u.shared_user_id === id)[0]);
        for (const key of ['date_joined', 'deactivated_at', 'agreed_to_terms_and_conditions', 'agreed_to_marketing']) {
          if (record[key] !== null) expect(record[key]).toMatch(TIMESTAMP);
        }
      }
    });

    it('decodes the id as one percent-encoded path segment (slash, space, ?, #, %, +, non-ASCII)', async () => {
      for (const id of SPECIAL_IDS) {
        const answer = parsed(await call(`/merchant/users/${quote(id)}`, { headers: asMain }));
        expect(answer.data).toEqual(usersOf(main.id, (u) => u.shared_user_id === id));
      }
    });

    it("answers 404 for another merchant's user exactly as for one that does not exist", async () => {
      const shared = await call('/merchant/users/only-other', { headers: asMain });
      const missing = await call('/merchant/users/no-such-user', { headers: asMain });
      expect([shared.status, missing.status]).toEqual([404, 404]);
      expect(parsed(shared)).toMatchObject({ status: 'error', errors: [{ code: 'not_found' }] });
      expect(shared.body).toBe(missing.body);
      const [own] = parsed(await call('/merchant/users/u-00001', { headers: basic(other.id, other.keys[0]) })).data;
      expect(own.first_name).toBe('Other copy');
    });

    it('answers HEAD with the headers of GET and no body', async () => {
      const response = await call('/merchant/users/u-00001', { method: 'HEAD', headers: asMain });
      expect([response.status, response.body]).toEqual([200, '']);
      expectJsonHeaders(response);
    });
  });

  describe('GET /merchant/users listing (docs/protocol.md#users)', () => {
    const all = () => usersOf(main.id);

    it('streams every user as one valid JSON document, in order, each once', async () => {
      const response = await call('/merchant/users', { headers: asMain });
      expect(response.status).toBe(200);
      // Streamed: the length is not known up front (docs/protocol.md#users: memory stays flat).
      expect(response.headers['content-length']).toBeUndefined();
      const answer = parsed(response);
      expect(answer.status).toBe('ok');
      expect(answer.errors).toEqual([]);
      expect(answer.data).toHaveLength(GENERATED_USERS + SPECIAL_IDS.length);
      expect(answer.data).toEqual(all());
    });

    it('treats a trailing slash as the same endpoint, and answers HEAD without a body', async () => {
      const withSlash = parsed(await call('/merchant/users/?limit=3', { headers: asMain }));
      expect(withSlash.data).toEqual(all().slice(0, 3));
      const head = await call('/merchant/users', { method: 'HEAD', headers: asMain });
      expect([head.status, head.body]).toEqual([200, '']);
      expectJsonHeaders(head);
      // Like GET, whose streamed length is not known in advance: no length rather than a wrong one.
      expect(head.headers['content-length']).not.toBe('0');
    });

    it('pages with limit: next_cursor and a Link header until the last page, covering each user once', async () => {
      let url: string | undefined = `${base()}/merchant/users?limit=1000`;
      const seen: unknown[] = [];
      let pages = 0;
      while (url) {
        const response = await send(url, { headers: asMain });
        const answer = parsed(response);
        expect(Object.keys(answer).sort()).toEqual(['data', 'errors', 'next_cursor', 'status']);
        seen.push(...answer.data);
        pages++;
        const link = response.headers.link as string | undefined;
        if (answer.next_cursor === null) {
          expect(link).toBeUndefined();
          url = undefined;
        } else {
          expect(typeof answer.next_cursor).toBe('string');
          expect(answer.data).toHaveLength(1000);
          const match = /^<([^>]+)>; rel="next"$/.exec(link ?? '');
          expect(match).not.toBeNull();
          url = match![1]!;
          expect(url.startsWith(`${base()}/merchant/users?`)).toBe(true);
        }
      }
      expect(pages).toBe(3);
      expect(seen).toEqual(all());
    });

    it('follows next_cursor with the same filters, never repeating or skipping a user', async () => {
      const expected = usersOf(main.id, (u) => u.deactivated_at !== null);
      const seen: unknown[] = [];
      let cursor: string | null = null;
      do {
        const query: string = `active=false&limit=37${cursor ? `&cursor=${quote(cursor)}` : ''}`;
        const answer: { data: unknown[]; next_cursor: string | null } = parsed(await call(`/merchant/users?${query}`, { headers: asMain }));
        seen.push(...answer.data);
        cursor = answer.next_cursor;
      } while (cursor);
      expect(seen).toEqual(expected);
    });

    it('answers 400 invalid_cursor to a tampered cursor, one of another merchant, and one with other filters', async () => {
      const first = parsed(await call('/merchant/users?limit=2&active=true', { headers: asMain }));
      const cursor: string = first.next_cursor;
      const flipped = (i: number) => cursor.slice(0, i) + (cursor[i] === 'A' ? 'B' : 'A') + cursor.slice(i + 1);
      const othersCursor = parsed(await call('/merchant/users?limit=1', { headers: basic(other.id, other.keys[0]) })).next_cursor as string;
      const attempts = [
        `limit=2&active=true&cursor=${quote(flipped(Math.floor(cursor.length / 2)))}`,
        `limit=2&active=true&cursor=${quote(flipped(cursor.length - 3))}`,
        `limit=2&active=true&cursor=${quote(cursor.slice(0, -1))}`,
        'limit=2&active=true&cursor=not-a-cursor',
        `limit=2&active=true&cursor=${quote(othersCursor)}`,
        `limit=2&active=false&cursor=${quote(cursor)}`,
        `limit=2&cursor=${quote(cursor)}`,
      ];
      for (const query of attempts) {
        const response = await call(`/merchant/users?${query}`, { headers: asMain });
        expect(response.status).toBe(400);
        expect(parsed(response)).toMatchObject({ status: 'error', errors: [{ code: 'invalid_cursor', param: 'cursor', message: expect.any(String) }] });
      }
      expect((await call(`/merchant/users?limit=2&active=true&cursor=${quote(cursor)}`, { headers: asMain })).status).toBe(200);
    });

    it('filters by active and by joined_after / joined_before (exclusive)', async () => {
      const list = async (query: string) => parsed(await call(`/merchant/users?${query}`, { headers: asMain })).data;
      expect(await list('active=true')).toEqual(usersOf(main.id, (u) => u.deactivated_at === null));
      expect(await list('active=false')).toEqual(usersOf(main.id, (u) => u.deactivated_at !== null));
      const after = usersOf(main.id, (u) => u.shared_user_id === 'u-00100')[0]!.date_joined;
      const before = usersOf(main.id, (u) => u.shared_user_id === 'u-00200')[0]!.date_joined;
      const between = usersOf(main.id, (u) => u.date_joined > after && u.date_joined < before);
      expect(between).toHaveLength(99);
      expect(await list(`joined_after=${quote(after)}&joined_before=${quote(before)}`)).toEqual(between);
      expect(await list(`joined_after=${quote(after)}&joined_before=${quote(before)}&active=true`)).toEqual(between.filter((u) => u.deactivated_at === null));
    });

    it('lists in order=updated_at with updated_at as a 15th key, from updated_since (inclusive), pages and stream alike', async () => {
      const changes = async (query: string) => {
        const seen: Array<Record<string, unknown>> = [];
        let cursor: string | null = null;
        do {
          const answer: { data: Array<Record<string, unknown>>; next_cursor: string | null } = parsed(await call(`/merchant/users?${query}&limit=700${cursor ? `&cursor=${quote(cursor)}` : ''}`, { headers: asMain }));
          seen.push(...answer.data);
          cursor = answer.next_cursor;
        } while (cursor);
        return seen;
      };
      const all = await changes('order=updated_at');
      const byId = new Map(usersOf(main.id, () => true).map((u) => [u.shared_user_id, u]));
      expect(all).toHaveLength(byId.size);
      for (const [i, record] of all.entries()) {
        const { updated_at: updatedAt, ...rest } = record as { updated_at: string; shared_user_id: string };
        expect(Object.keys(record).at(-1)).toBe('updated_at');
        expect(updatedAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}\+00:00$/);
        expect(rest).toEqual(byId.get(rest.shared_user_id as string));
        if (i > 0) {
          const previous = all[i - 1]! as { updated_at: string; shared_user_id: string };
          expect(previous.updated_at < updatedAt || (previous.updated_at === updatedAt && Buffer.compare(Buffer.from(previous.shared_user_id), Buffer.from(rest.shared_user_id as string)) < 0)).toBe(true);
        }
      }
      const newest = (all.at(-1) as { updated_at: string }).updated_at;
      const since = await changes(`updated_since=${quote(newest)}`);
      expect(since).toEqual(all.filter((u) => u.updated_at === newest));
      expect(parsed(await call(`/merchant/users?order=updated_at`, { headers: asMain })).data).toEqual(all);
      const first = parsed(await call('/merchant/users?limit=1', { headers: asMain })).data[0];
      expect(Object.keys(first)).toHaveLength(14);
    });

    it('accepts limit 1 and 1000', async () => {
      expect(parsed(await call('/merchant/users?limit=1', { headers: asMain })).data).toHaveLength(1);
      expect(parsed(await call('/merchant/users?limit=1000', { headers: asMain })).data).toHaveLength(1000);
    });

    it('answers 400 with one error object per bad, unknown or repeated parameter, param naming it', async () => {
      const cases: [string, [string, string][]][] = [
        ['foo=1', [['unknown_parameter', 'foo']]],
        ['limit=0', [['invalid_parameter', 'limit']]],
        ['limit=1001', [['invalid_parameter', 'limit']]],
        ['limit=abc', [['invalid_parameter', 'limit']]],
        ['limit=', [['invalid_parameter', 'limit']]],
        ['limit=5&limit=6', [['invalid_parameter', 'limit']]],
        ['active=yes', [['invalid_parameter', 'active']]],
        ['joined_after=yesterday', [['invalid_parameter', 'joined_after']]],
        ['joined_before=2020-13-01', [['invalid_parameter', 'joined_before']]],
        ['foo=1&limit=0&active=maybe', [['unknown_parameter', 'foo'], ['invalid_parameter', 'limit'], ['invalid_parameter', 'active']]],
      ];
      for (const [query, problems] of cases) {
        const response = await call(`/merchant/users?${query}`, { headers: asMain });
        expect(response.status).toBe(400);
        const answer = parsed(response);
        expect(answer.status).toBe('error');
        const got = (answer.errors as { code: string; param: string; message: string }[]).map((e) => {
          expect(typeof e.message).toBe('string');
          return [e.code, e.param];
        });
        expect(got.sort()).toEqual([...problems].sort());
      }
    });
  });

  describe('routing, health and the OpenAPI document (docs/protocol.md#endpoints)', () => {
    it('answers /healthz and /readyz with 200 JSON', async () => {
      for (const path of ['/healthz', '/readyz']) {
        const response = await call(path);
        expect(response.status).toBe(200);
        expect(parsed(response).status).toBe('ok');
      }
    });

    it('serves an OpenAPI 3.1 document naming every endpoint', async () => {
      const document = parsed(await call('/openapi.json'));
      expect(document.openapi).toMatch(/^3\.1\./);
      for (const path of ['/validatesignature', '/merchant/users', '/merchant/users/{shared_user_id}', '/healthz', '/readyz', '/openapi.json']) {
        expect(Object.keys(document.paths)).toContain(path);
      }
    });

    it('answers 404 not_found JSON to an unknown path', async () => {
      for (const path of ['/', '/nope', '/validatesignature/x', '/merchant', '/merchant/users/a/b', '/HEALTHZ', '/openapi.yaml']) {
        const response = await call(path, { headers: asMain });
        expect(response.status).toBe(404);
        expect(parsed(response)).toMatchObject({ status: 'error', errors: [{ code: 'not_found', message: expect.any(String) }] });
      }
    });

    it('answers 404 to a dot segment below /merchant/users, plain or percent-encoded, rather than the path it resolves to', async () => {
      const { host, port } = new URL(base());
      // With the segments resolved: the list, the list, the list, one user, /merchant/, /merchant/.
      const resolved = [200, 200, 200, 200, 404, 404];
      const paths = ['/merchant/users/.', '/merchant/users/%2E', '/merchant/users/%2e/', '/merchant/users/./u-00001', '/merchant/users/..', '/merchant/users/.%2E'];
      for (const [i, path] of paths.entries()) {
        const response = await sendRaw(Number(port), get(host, path, AUTH));
        expectJsonHeaders(response);
        if (options.resolvesDotSegments) {
          expect([path, response.status]).toEqual([path, resolved[i]]);
          continue;
        }
        expect([path, response.status]).toEqual([path, 404]);
        expect(JSON.parse(response.body)).toMatchObject({ status: 'error', errors: [{ code: 'not_found' }] });
      }
    });

    it('answers HEAD with the Content-Length of the GET answer wherever that length is known', async () => {
      const paths = ['/healthz', '/readyz', '/openapi.json', '/merchant/users/u-00001', '/merchant/users?limit=2', '/merchant/users/no-such-user', '/nope', '/merchant/users?limit=0'];
      for (const path of paths) {
        const get = await call(path, { headers: asMain });
        const head = await call(path, { method: 'HEAD', headers: asMain });
        expect([path, head.status, head.body]).toEqual([path, get.status, '']);
        expect([path, head.headers['content-length']]).toEqual([path, String(Buffer.byteLength(get.body))]);
      }
      const signed = await send(signedUrl({ secret: main.keys[0], url: endpoint(), cp: main.id, method: 'HEAD' }), { method: 'HEAD' });
      expect(signed.headers['content-length']).toBe(String(Buffer.byteLength(OK)));
    });

    it('answers 405 with an Allow header to another method on a known path', async () => {
      for (const path of ['/validatesignature', '/merchant/users', '/merchant/users/u-00001', '/healthz', '/readyz', '/openapi.json']) {
        for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
          const response = await call(path, { method, headers: asMain });
          expect(response.status).toBe(405);
          expect(String(response.headers.allow)).toMatch(/\bGET\b/);
          expect(parsed(response).status).toBe('error');
        }
      }
    });
  });

  describe('malformed requests (docs/protocol.md#failures)', () => {
    const runtimeAnswers: Partial<Record<string, number>> = options.runtimeAnswers ?? {};
    it('answers 400 to a request with two Host header lines (RFC 9112 section 3.2)', async () => {
      const { host, port } = new URL(base());
      const response = await sendRaw(Number(port), MALFORMED['two Host header lines'](host));
      expect(response.status).toBe(400);
    });
    for (const [name, build] of Object.entries(MALFORMED)) {
      const byRuntime = runtimeAnswers[name];
      it(`${name}: ${byRuntime ? `${byRuntime} from the runtime's HTTP layer` : 'a 4xx JSON answer'}, and the server keeps serving`, async () => {
        const { host, port } = new URL(base());
        const response = await sendRaw(Number(port), build(host));
        if (byRuntime) {
          expect(response.status).toBe(byRuntime);
        } else {
          expect(response.status).toBeGreaterThanOrEqual(400);
          expect(response.status).toBeLessThan(500);
          expectJsonHeaders(response);
          const answer = JSON.parse(response.body);
          expect(answer.status).toBe('error');
          if (answer.is_valid === undefined) expect(answer.errors[0]).toMatchObject({ code: expect.any(String), message: expect.any(String) });
        }
        expect((await call('/healthz')).status).toBe(200);
      });
    }
  });
}
