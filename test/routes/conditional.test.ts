/**
 * Conditional reads (docs/protocol.md#conditional-requests): `GET /merchant/users/{id}`
 * and pages of `GET /merchant/users` carry a strong `ETag`, the SHA-256 of the
 * exact body bytes; `If-None-Match` naming it (or `*`, or its weak form)
 * answers 304 with no body, on GET and HEAD; a changed record changes the tag;
 * the streamed list has none; answers without `If-None-Match` keep their bytes.
 * Through the handler on the memory storage and on MariaDB, and a real Node server
 * (its direct path), whose bytes on the wire are read raw.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, type Served } from '../../adapters/node.js';
import { createMerchantApi } from '../../src/api.js';
import { requestCost } from '../../src/limits/fair-share.js';
import { silentLogger } from '../../src/observe/logger.js';
import { noneMatchHolds } from '../../src/pipeline/conditional.js';
import { createMysqlKysely, importSeed, MysqlStorage } from '../../src/storage/mysql/index.js';
import type { Storage } from '../../src/storage/contract.js';
import { basic, call, NOW_MS, ORIGIN, testApi } from '../support/api.js';
import { send, sendRaw } from '../support/http-client.js';
import { RUNTIMES, useCliServer } from '../support/processes.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { asRecord, conformanceSeed, contractSeed, MERCHANTS, user } from '../support/seeds.js';

const M1 = basic('m1', 'key-one');
const tagOf = (body: string) => `"${createHash('sha256').update(body, 'utf8').digest('base64url')}"`;

/** The conditional behaviour every storage must show, through `api.fetch`. */
function conditionalSuite(name: string, setup: () => Promise<{ api: { fetch(r: Request): Promise<Response> }; change(): Promise<void> }>) {
  describe(name, () => {
    let api: { fetch(r: Request): Promise<Response> };
    let change: () => Promise<void>;
    beforeAll(async () => ({ api, change } = await setup()));
    const get = (path: string, headers: Record<string, string> = {}, method = 'GET') => call(api, `${ORIGIN}${path}`, { method, headers: { ...M1, ...headers } });

    for (const path of ['/merchant/users/a-001', '/merchant/users?limit=100', '/merchant/users?limit=2', '/merchant/users?limit=3&order=date_joined', '/merchant/users?limit=2&include_removed=true']) {
      it(`${path}: an ETag; If-None-Match naming it is 304 with no body, on GET and HEAD`, async () => {
        const first = await get(path);
        expect(first.status).toBe(200);
        const tag = first.response.headers.get('etag')!;
        if (first.body.next_cursor === undefined || first.body.next_cursor === null) {
          // A body without a cursor: the strong tag of its exact bytes.
          expect(tag).toBe(tagOf(first.text));
        } else {
          // A page with a cursor, sealed afresh each time: a weak tag, the same for the same page.
          expect(tag).toMatch(/^W\/"[A-Za-z0-9_-]{43}"$/);
          const second = await get(path);
          expect(second.text).not.toBe(first.text);
          expect(second.response.headers.get('etag')).toBe(tag);
        }
        const opaque = tag.replace(/^W\//, '');
        for (const wanted of [tag, opaque, `W/${opaque}`, `"other", ${tag}`, '*', ` ${tag} `]) {
          for (const method of ['GET', 'HEAD']) {
            const again = await get(path, { 'if-none-match': wanted }, method);
            expect([wanted, method, again.status, again.text]).toEqual([wanted, method, 304, '']);
            expect(again.response.headers.get('etag')).toBe(tag);
            expect(again.response.headers.get('content-type')).toBeNull();
            expect(again.response.headers.get('content-length')).toBeNull();
            expect(again.response.headers.get('cache-control')).toBe('no-store');
            expect(again.response.headers.get('x-request-id')).toBeTruthy();
          }
        }
        // A tag of another body, or a malformed field, matches nothing: the whole 200, byte for byte as without the header.
        for (const wanted of ['"other"', opaque.slice(1, -1), `${opaque.slice(0, -2)}"`, '', 'W/']) {
          const whole = await get(path, { 'if-none-match': wanted });
          expect([wanted, whole.status, whole.body.data]).toEqual([wanted, 200, first.body.data]);
          if (!first.body.next_cursor) expect(whole.text).toBe(first.text);
        }
        const head = await get(path, {}, 'HEAD');
        expect([head.status, head.response.headers.get('etag')]).toEqual([200, tag]);
      });
    }

    it('the same page under another merchant, an error and the streamed list carry no ETag; a 404 is never 304', async () => {
      const missing = await get('/merchant/users/nobody', { 'if-none-match': '*' });
      expect([missing.status, missing.response.headers.get('etag')]).toEqual([404, null]);
      const stream = await get('/merchant/users', { 'if-none-match': '*' });
      expect([stream.status, stream.response.headers.get('etag')]).toEqual([200, null]);
      expect(stream.body.data.length).toBeGreaterThan(0);
      const bad = await get('/merchant/users?limit=0', { 'if-none-match': '*' });
      expect([bad.status, bad.response.headers.get('etag')]).toEqual([400, null]);
    });

    it('a changed record changes the tag: the old one is answered in full', async () => {
      const before = await get('/merchant/users/a-001');
      const page = await get('/merchant/users?limit=2&order=date_joined');
      await change();
      const after = await get('/merchant/users/a-001', { 'if-none-match': before.response.headers.get('etag')! });
      expect(after.status).toBe(200);
      expect(after.body.data[0].first_name).toBe('Changed');
      expect(after.response.headers.get('etag')).toBe(tagOf(after.text));
      const pageAfter = await get('/merchant/users?limit=2&order=date_joined', { 'if-none-match': page.response.headers.get('etag')! });
      expect(pageAfter.status).toBe(200);
    });
  });
}

conditionalSuite('conditional reads on the memory storage', async () => {
  const { api, storage } = testApi();
  return { api, change: async () => storage.putUser('m1', asRecord(user('m1', 'a-001', { date_joined: '2020-01-01T00:00:00.000001+00:00', first_name: 'Changed' }))) };
});

const available = await mysqlAvailable();
describe.skipIf(!available)('on MariaDB', () => {
  let database: TestDatabase;
  let storage: MysqlStorage;
  afterAll(async () => {
    await storage?.close();
    await database?.drop();
  });
  conditionalSuite('conditional reads on MySQL', async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, contractSeed());
    storage = new MysqlStorage({ db: createMysqlKysely(database.url), masterKey: database.masterKey, destroyOnClose: true });
    const api = createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, accessLog: false, tracing: false });
    const changed = contractSeed();
    changed.users = changed.users.map((u) => (u.merchant_id === 'm1' && u.shared_user_id === 'a-001' ? { ...u, first_name: 'Changed' } : u));
    return { api, change: async () => void (await importSeed(database.db, database.masterKey, { merchants: [], users: changed.users.filter((u) => u.merchant_id === 'm1') })) };
  });
});

describe('on a real Node server', () => {
  let served: Served;
  let port: number;
  beforeAll(async () => {
    const { api } = testApi();
    served = await serve(api, { port: 0, hostname: '127.0.0.1' });
    port = Number(new URL(served.url).port);
  });
  afterAll(() => served?.close());

  it('answers a 304 on the wire with the tag, no body and no length; a 200 with its body and the tag', async () => {
    const auth = `Authorization: ${M1.authorization}\r\n`;
    const whole = await sendRaw(port, `GET /merchant/users/a-001 HTTP/1.1\r\nHost: api.test\r\n${auth}Connection: close\r\n\r\n`);
    const tag = whole.headers.etag!;
    expect([whole.status, tag]).toEqual([200, tagOf(whole.body)]);
    for (const method of ['GET', 'HEAD']) {
      const answer = await sendRaw(port, `${method} /merchant/users/a-001 HTTP/1.1\r\nHost: api.test\r\n${auth}If-None-Match: ${tag}\r\nConnection: close\r\n\r\n`);
      expect([answer.status, answer.headers.etag, answer.headers['content-length'], answer.headers['content-type'], answer.body]).toEqual([304, tag, undefined, undefined, '']);
    }
  });
});

// The standalone server on each runtime (the built CLI): the 304 as Bun and Deno write it too.
for (const runtime of RUNTIMES) {
  describe(`a 304 from the standalone server on ${runtime}`, () => {
    const server = useCliServer(runtime, conformanceSeed());

    it('has the tag, no body, no type and no length; GET and HEAD', async () => {
      const { main } = MERCHANTS;
      const auth = basic(main.id, main.keys[0]);
      const url = `${server.url}/merchant/users/u-00001`;
      const whole = await send(url, { headers: auth });
      const tag = whole.headers.etag as string;
      expect([whole.status, tag]).toEqual([200, tagOf(whole.body)]);
      for (const method of ['GET', 'HEAD']) {
        const answer = await send(url, { method, headers: { ...auth, 'if-none-match': tag } });
        expect([method, answer.status, answer.headers.etag, answer.headers['content-type'], answer.headers['content-length'], answer.body]).toEqual([method, 304, tag, undefined, undefined, '']);
      }
    });
  });
}

describe('If-None-Match and the fair share', () => {
  it('a tag matches itself alone, among others, weak or not; no other tag matches it', () => {
    const tag = fc.stringMatching(/^[A-Za-z0-9_-]{1,43}$/).map((t) => `"${t}"`);
    fc.assert(
      fc.property(tag, fc.array(tag), fc.array(tag), fc.boolean(), (mine, before, after, weak) => {
        const others = [...before, ...after].filter((t) => t !== mine);
        expect(noneMatchHolds([...before, weak ? `W/${mine}` : mine, ...after].join(', '), mine)).toBe(true);
        expect(noneMatchHolds(others.join(','), mine)).toBe(false);
      }),
    );
  });

  it('a 304 is charged the time it held the pipeline, without the HTTP work of a body', () => {
    expect(requestCost(304, 0.2)).toBe(0.2);
    expect(requestCost(200, 0.2)).toBeGreaterThan(0.2);
  });
});

// Keeps the type import used: a storage of any kind gives the same answers.
export type { Storage };
