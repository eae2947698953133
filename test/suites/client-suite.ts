/**
 * `merchant-api/client` against a real server on the conformance seed
 * (test/support/seeds.ts): every method, every filter, pagination across
 * page boundaries with ids that need percent-encoding, 404, a wrong key,
 * and retries through a faulty proxy put between the client and the server
 * (503 then 200, a connection reset, 429, re-signing after a used salt).
 * Run by test/client/http.test.ts (memory storage on Node, Bun and Deno)
 * and test/client/mysql.test.ts (the MySQL storage on the same three).
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantClient, MerchantResponseError, type MerchantClientOptions, type RetryInfo, type UserRecord } from '../../src/client/index.js';
import { asRecord, conformanceSeed, MERCHANTS, SPECIAL_IDS } from '../support/seeds.js';

const seed = conformanceSeed();
const { main, other, closed, unicode } = MERCHANTS;

/** UTF-8 byte order, the order of the API (docs/protocol.md#pagination-and-cursors). */
export function byCodePoint(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** The records of a merchant as the API answers them, in order, filtered like the server filters. */
export function expectedUsers(merchantId: string, filter: { active?: boolean; after?: string; before?: string } = {}): UserRecord[] {
  return seed.users
    .filter((u) => u.merchant_id === merchantId)
    .filter((u) => filter.active === undefined || (u.deactivated_at === null) === filter.active)
    // The seed's timestamps and the bounds below are all canonical (+00:00, six digits): string order is time order.
    .filter((u) => filter.after === undefined || u.date_joined > filter.after)
    .filter((u) => filter.before === undefined || u.date_joined < filter.before)
    .map((u) => asRecord(u) as UserRecord)
    .sort((a, b) => byCodePoint(a.shared_user_id, b.shared_user_id));
}

const ids = (users: readonly UserRecord[]) => users.map((u) => u.shared_user_id);

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

export function describeClientSuite(options: { baseUrl: () => string }): void {
  const client = (extra: Partial<MerchantClientOptions> = {}) => createMerchantClient({ baseUrl: options.baseUrl(), merchantId: main.id, apiKey: main.keys[1], ...extra });
  // The special ids (A-upper, slash/inside, with space, q?&=#%+, ü-umlaut, 中文-id, 😀-emoji) joined last: this bound keeps them and a few generated users.
  const lateBound = '2019-04-07T00:00:00.000000+00:00';

  describe('validateSignature()', () => {
    it('resolves {status:"ok", is_valid:true} with either active key, and for a non-ASCII merchant id and key', async () => {
      expect(await client().validateSignature()).toEqual({ status: 'ok', is_valid: true });
      expect(await client({ apiKey: main.keys[0] }).validateSignature()).toEqual({ status: 'ok', is_valid: true });
      expect(await createMerchantClient({ baseUrl: options.baseUrl(), merchantId: unicode.id, apiKey: unicode.keys[0] }).validateSignature()).toEqual({ status: 'ok', is_valid: true });
    });

    it('signs further parameters too, and each call with a new salt', async () => {
      const c = client();
      expect(await c.validateSignature({ params: { note: "a b!'()*", k: ['2', '1'] } })).toEqual({ status: 'ok', is_valid: true });
      await Promise.all([c.validateSignature(), c.validateSignature(), c.validateSignature()]);
    });

    it('throws MerchantResponseError with a code for a wrong key, an unknown merchant and a disabled one', async () => {
      const wrong = await client({ apiKey: 'not-a-key' }).validateSignature().catch((e: unknown) => e);
      expect(wrong).toBeInstanceOf(MerchantResponseError);
      expect(wrong).toMatchObject({ status: 400, code: 'signature_mismatch', message: 'Signature does not match.', body: { status: 'error', message: 'Signature does not match.', is_valid: false } });
      expect((wrong as MerchantResponseError).requestId).toMatch(/^[\w-]{8,}$/);
      const unknown = await createMerchantClient({ baseUrl: options.baseUrl(), merchantId: 'no-such-shop', apiKey: 'k' }).validateSignature().catch((e: unknown) => e);
      expect(unknown).toMatchObject({ status: 404, code: 'unknown_merchant', body: { status: 'error', is_valid: false } });
      const disabled = await createMerchantClient({ baseUrl: options.baseUrl(), merchantId: closed.id, apiKey: closed.keys[0] }).validateSignature().catch((e: unknown) => e);
      expect(disabled).toMatchObject({ status: 403, code: 'merchant_disabled', message: 'This account is disabled.' });
    });

    it('throws timestamp_out_of_window for a clock 10 minutes off', async () => {
      const skewed = await client({ now: () => Date.now() - 600_000 }).validateSignature().catch((e: unknown) => e);
      expect(skewed).toMatchObject({ status: 400, code: 'timestamp_out_of_window' });
    });
  });

  describe('user()', () => {
    it('reads every id that needs percent-encoding, exactly as the seed has it', async () => {
      const c = client();
      for (const id of SPECIAL_IDS) expect(await c.user(id), id).toEqual(expectedUsers(main.id).find((u) => u.shared_user_id === id));
      expect(await c.user('u-00001')).toEqual(expectedUsers(main.id)[SPECIAL_IDS.filter((id) => byCodePoint(id, 'u-00001') < 0).length]);
    });

    it("sees only the merchant's own users: another merchant's copy, and 404 for what is not shared", async () => {
      expect((await createMerchantClient({ baseUrl: options.baseUrl(), merchantId: other.id, apiKey: other.keys[0] }).user('u-00001')).first_name).toBe('Other copy');
      for (const id of ['only-other', 'nobody', 'slash', 'with%20space']) {
        const error = await client().user(id).catch((e: unknown) => e);
        expect(error, id).toBeInstanceOf(MerchantResponseError);
        expect(error, id).toMatchObject({ status: 404, code: 'not_found', message: 'No user with this shared_user_id is shared with this merchant.', details: [{ code: 'not_found' }] });
      }
    });

    it('throws 401 unauthorized for a wrong key, and 403 for a disabled merchant', async () => {
      expect(await client({ apiKey: 'wrong' }).user('u-00001').catch((e: unknown) => e)).toMatchObject({ status: 401, code: 'unauthorized' });
      expect(await createMerchantClient({ baseUrl: options.baseUrl(), merchantId: closed.id, apiKey: closed.keys[0] }).user('closed-user').catch((e: unknown) => e)).toMatchObject({
        status: 403,
        code: 'merchant_disabled',
      });
    });
  });

  describe('users() and userPages()', () => {
    it('lists every user, in order, lazily across pages of 1000', async () => {
      expect(ids(await collect(client().users()))).toEqual(ids(expectedUsers(main.id)));
    });

    it('crosses page boundaries between ids that need percent-encoding, page size 2', async () => {
      const pages = await collect(client().userPages({ pageSize: 2, joinedAfter: lateBound }));
      const expected = expectedUsers(main.id, { after: lateBound });
      expect(expected.map((u) => u.shared_user_id)).toEqual(expect.arrayContaining(SPECIAL_IDS));
      expect(pages.flatMap((p) => p.users)).toEqual(expected);
      expect(pages.map((p) => p.users.length)).toEqual(expected.map((_, i) => i).filter((i) => i % 2 === 0).map((i) => Math.min(2, expected.length - i)));
      expect(pages.slice(0, -1).every((p) => typeof p.nextCursor === 'string')).toBe(true);
      expect(pages.at(-1)!.nextCursor).toBeNull();
    });

    it('resumes from a nextCursor with userPages({ cursor }), keeping the page size, and with another page size', async () => {
      const filter = { active: true, joinedAfter: lateBound };
      const expected = expectedUsers(main.id, { active: true, after: lateBound });
      const first = (await client().userPages({ ...filter, pageSize: 3 }).next()).value!;
      expect(first.users).toEqual(expected.slice(0, 3));
      const rest = await collect(client().userPages({ ...filter, cursor: first.nextCursor! }));
      expect(rest[0]!.users).toHaveLength(3);
      expect(rest.flatMap((p) => p.users)).toEqual(expected.slice(3));
      const wider = await collect(client().userPages({ ...filter, cursor: first.nextCursor!, pageSize: 1000 }));
      expect(wider).toHaveLength(1);
      expect(wider[0]!.users).toEqual(expected.slice(3));
    });

    it('applies every filter, alone and combined, with strings and Dates', async () => {
      const after = '2019-02-10T00:00:00.000000+00:00';
      const before = '2019-02-20T12:30:00.000000+00:00';
      const cases: [Parameters<ReturnType<typeof client>['users']>[0], UserRecord[]][] = [
        [{ active: true, joinedAfter: lateBound }, expectedUsers(main.id, { active: true, after: lateBound })],
        [{ active: false }, expectedUsers(main.id, { active: false })],
        [{ joinedAfter: after, joinedBefore: before }, expectedUsers(main.id, { after, before })],
        [{ joinedAfter: new Date('2019-02-10T00:00:00Z'), joinedBefore: new Date('2019-02-20T12:30:00Z') }, expectedUsers(main.id, { after, before })],
        [{ joinedAfter: '2019-02-10T01:00:00+01:00', joinedBefore: '2019-02-20' }, expectedUsers(main.id, { after, before: '2019-02-20T00:00:00.000000+00:00' })],
        [{ active: false, joinedBefore: before }, expectedUsers(main.id, { active: false, before })],
      ];
      for (const [filter, expected] of cases) {
        expect(expected.length, JSON.stringify(filter)).toBeGreaterThan(0);
        expect(ids(await collect(client().users({ ...filter, pageSize: 97 }))), JSON.stringify(filter)).toEqual(ids(expected));
        expect(ids(await collect(client().exportUsers(filter))), JSON.stringify(filter)).toEqual(ids(expected));
      }
    });

    it("lists in order: 'updated_at' with updated_at on every record, from updatedSince, and in order: 'date_joined'", async () => {
      const changed = await collect(client().users({ order: 'updated_at', pageSize: 600 }));
      expect(ids([...changed].sort((a, b) => byCodePoint(a.shared_user_id, b.shared_user_id)))).toEqual(ids(expectedUsers(main.id)));
      const byId = new Map(expectedUsers(main.id).map((u) => [u.shared_user_id, u]));
      for (const [i, user] of changed.entries()) {
        const { updated_at: updatedAt, ...record } = user;
        expect(record).toEqual(byId.get(user.shared_user_id));
        if (i > 0) expect(changed[i - 1]!.updated_at < updatedAt || (changed[i - 1]!.updated_at === updatedAt && byCodePoint(changed[i - 1]!.shared_user_id, user.shared_user_id) < 0)).toBe(true);
      }
      // The sync loop's next round: from the last updated_at seen, inclusive.
      const last = changed.at(-1)!.updated_at;
      expect(await collect(client().users({ order: 'updated_at', updatedSince: last }))).toEqual(changed.filter((u) => u.updated_at === last));
      const oldest = await collect(client().exportUsers({ order: 'date_joined' }));
      expect(ids(oldest)).toEqual(ids([...expectedUsers(main.id)].sort((a, b) => (a.date_joined < b.date_joined ? -1 : a.date_joined > b.date_joined ? 1 : byCodePoint(a.shared_user_id, b.shared_user_id)))));
    });

    it('a listing that matches nothing is one empty last page', async () => {
      expect(await collect(client().userPages({ joinedAfter: '2100-01-01' }))).toEqual([{ users: [], nextCursor: null }]);
      expect(await collect(client().exportUsers({ joinedAfter: '2100-01-01' }))).toEqual([]);
    });

    it('throws 401 for a wrong key on the first page, and invalid_parameter for a filter the server refuses', async () => {
      expect(await collect(client({ apiKey: 'wrong' }).users()).catch((e: unknown) => e)).toMatchObject({ status: 401, code: 'unauthorized' });
      const bad = await collect(client().users({ joinedAfter: 'yesterday' })).catch((e: unknown) => e);
      expect(bad).toMatchObject({ status: 400, code: 'invalid_parameter', details: [{ code: 'invalid_parameter', param: 'joined_after' }] });
    });
  });

  describe('exportUsers()', () => {
    it('streams every user in one request, the same records as the pages', async () => {
      const exported = await collect(client().exportUsers());
      expect(exported).toEqual(expectedUsers(main.id));
    });

    it('stops reading when the loop stops, and the next listing works', async () => {
      let seen = 0;
      for await (const user of client().exportUsers()) {
        expect(user.shared_user_id).toBeTypeOf('string');
        if (++seen === 10) break;
      }
      expect(seen).toBe(10);
      expect((await collect(client().exportUsers({ active: false }))).length).toBe(expectedUsers(main.id, { active: false }).length);
    });

    it('throws 401 for a wrong key before any user', async () => {
      expect(await collect(client({ apiKey: 'wrong' }).exportUsers()).catch((e: unknown) => e)).toMatchObject({ status: 401, code: 'unauthorized' });
    });
  });

  describe('retries, through a faulty proxy in front of the server', () => {
    let proxy: FaultyProxy;
    beforeAll(async () => {
      proxy = await startFaultyProxy(() => new URL(options.baseUrl()));
    });
    afterAll(async () => {
      await proxy?.close();
    });
    const viaProxy = (retries: MerchantClientOptions['retries'], extra: Partial<MerchantClientOptions> = {}) =>
      createMerchantClient({ baseUrl: proxy.url, merchantId: main.id, apiKey: main.keys[0], retries, ...extra });

    it('a page that answers 503 once is asked again with the same cursor: the listing is complete, without duplicates', async () => {
      const retries: RetryInfo[] = [];
      proxy.plan(['forward', 'forward', '503']);
      const pages = await collect(viaProxy({ onRetry: (info) => retries.push(info) }).userPages({ pageSize: 500 }));
      const users = pages.flatMap((p) => p.users);
      expect(ids(users)).toEqual(ids(expectedUsers(main.id)));
      expect(new Set(ids(users)).size).toBe(users.length);
      expect(retries).toHaveLength(1);
      expect(retries[0]).toMatchObject({ retry: 1, status: 503, method: 'GET' });
      // The third request failed; the fourth is the same URL, cursor and all.
      expect(proxy.seen[2]!.answer).toBe('503');
      expect(proxy.seen[3]!.url).toBe(proxy.seen[2]!.url);
      expect(proxy.seen[2]!.url).toContain('cursor=');
    });

    it('a connection cut before the answer is retried too', async () => {
      const retries: RetryInfo[] = [];
      proxy.plan(['forward', 'reset']);
      const users = await collect(viaProxy({ onRetry: (info) => retries.push(info) }).users({ pageSize: 1000 }));
      expect(ids(users)).toEqual(ids(expectedUsers(main.id)));
      expect(retries).toHaveLength(1);
      expect(retries[0]!.status).toBeUndefined();
      expect(retries[0]!.error.name).toBe('MerchantNetworkError');
    });

    it('the streamed export is retried after a 503 and arrives whole', async () => {
      const retries: RetryInfo[] = [];
      proxy.plan(['503']);
      expect(await collect(viaProxy({ onRetry: (info) => retries.push(info) }).exportUsers())).toEqual(expectedUsers(main.id));
      expect(retries.map((r) => r.status)).toEqual([503]);
    });

    it('validateSignature re-signs each attempt: the server used up the first salt, the retry still validates', async () => {
      // The first attempt reaches the server (which records its salt), but the client gets a 503.
      proxy.plan(['swallow-503']);
      const retries: RetryInfo[] = [];
      expect(await viaProxy({ onRetry: (info) => retries.push(info) }).validateSignature()).toEqual({ status: 'ok', is_valid: true });
      expect(retries).toHaveLength(1);
      const salts = proxy.seen.slice(-2).map((s) => new URL(s.url, 'http://x').searchParams.get('salt'));
      expect(salts[0]).not.toBe(salts[1]);
    });

    it('honours Retry-After on 429, and gives up at once when it is longer than the client waits', async () => {
      proxy.plan(['429:1']);
      const started = Date.now();
      expect(await viaProxy(undefined).user('u-00002')).toMatchObject({ shared_user_id: 'u-00002' });
      expect(Date.now() - started).toBeGreaterThanOrEqual(950);
      proxy.plan(['429:3600']);
      const error = await viaProxy(undefined).user('u-00002').catch((e: unknown) => e);
      expect(error).toMatchObject({ status: 429, code: 'too_many_requests', retryAfter: 3600 });
      expect(proxy.pending()).toBe(0);
    });

    it('never retries other 4xx, nor when retries are off', async () => {
      const before = proxy.seen.length;
      await expect(viaProxy(undefined, { apiKey: 'wrong' }).user('u-00001')).rejects.toMatchObject({ status: 401 });
      await expect(viaProxy(undefined).user('nobody')).rejects.toMatchObject({ status: 404 });
      proxy.plan(['503']);
      await expect(viaProxy(false).user('u-00001')).rejects.toMatchObject({ status: 503, code: 'storage_unavailable', retryAfter: 0, requestId: 'proxy-503' });
      expect(proxy.seen.length - before).toBe(3);
    });

    it('gives up with the last answer when the next wait would pass the deadline', async () => {
      proxy.plan(['503:1', '503:1', '503:1']);
      const before = proxy.seen.length;
      const started = Date.now();
      const waits: number[] = [];
      const error = await viaProxy({ maxRetries: 10, deadlineMs: 1500, onRetry: (info) => waits.push(info.delayMs) }).user('u-00001').catch((e: unknown) => e);
      // 503, a wait of 1 s, 503 again: a second wait would end after 1.5 s, so the client stops there, without waiting.
      expect(error).toMatchObject({ status: 503, retryAfter: 1 });
      expect(proxy.seen.length - before).toBe(2);
      expect(waits).toEqual([1000]);
      expect(Date.now() - started).toBeGreaterThanOrEqual(950);
      proxy.plan([]);
    });

    // POSTs carry an Idempotency-Key (docs/protocol.md#safe-retries): the same on every retry of a
    // call, so the server runs the change once. Needs WEBHOOK_ALLOW_PRIVATE and WEBHOOK_ALLOW_HTTP
    // on the server (the callers set them) for a receiver URL on 127.0.0.1.
    const hook = (name: string) => `http://127.0.0.1:9/${name}-${Math.random().toString(36).slice(2)}`;
    const direct = () => createMerchantClient({ baseUrl: options.baseUrl(), merchantId: main.id, apiKey: main.keys[0] });

    it('a POST whose answer was lost after the server made the change is retried with the same key: one endpoint, and its secret', async () => {
      const url = hook('lost');
      const retries: RetryInfo[] = [];
      proxy.plan(['swallow-reset']);
      const before = proxy.seen.length;
      const created = await viaProxy({ baseDelayMs: 1, onRetry: (info) => retries.push(info) }).webhooks.create(url);
      expect(created).toMatchObject({ url, secret: expect.stringMatching(/^whsec_/) });
      expect(retries.map((r) => [r.method, r.error.name])).toEqual([['POST', 'MerchantNetworkError']]);
      const sent = proxy.seen.slice(before);
      expect(sent.map((s) => s.answer)).toEqual(['swallow-reset', 'forward']);
      expect(sent[0]!.key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(sent[1]!.key).toBe(sent[0]!.key);
      const listed = (await direct().webhooks.list()).filter((e) => e.url === url);
      expect(listed).toEqual([expect.objectContaining({ id: created.id })]);
      await direct().webhooks.remove(created.id);
    });

    it('a POST answered 503 is retried with the same key; each call has its own key', async () => {
      const url = hook('busy');
      proxy.plan(['503']);
      const before = proxy.seen.length;
      const created = await viaProxy({ baseDelayMs: 1 }).webhooks.create(url);
      const sent = proxy.seen.slice(before);
      expect(sent).toHaveLength(2);
      expect(sent[1]!.key).toBe(sent[0]!.key);
      const tested = await viaProxy(undefined).webhooks.test(created.id);
      expect(tested.endpoint_id).toBe(created.id);
      expect(proxy.seen.at(-1)!.key).not.toBe(sent[0]!.key);
      await direct().webhooks.remove(created.id);
    });

    it("the caller's idempotencyKey: a call repeated with it answers the first call's endpoint, secret included; with another body it is 422", async () => {
      const url = hook('own-key');
      const idempotencyKey = `order-${Math.random().toString(36).slice(2)}`;
      const first = await direct().webhooks.create(url, { idempotencyKey });
      const again = await direct().webhooks.create(url, { idempotencyKey });
      expect(again).toEqual(first);
      expect((await direct().webhooks.list()).filter((e) => e.url === url)).toHaveLength(1);
      await expect(direct().webhooks.create(hook('other'), { idempotencyKey })).rejects.toMatchObject({ status: 422, code: 'idempotency_mismatch' });
      expect(() => direct().webhooks.create(url, { idempotencyKey: 'ü' })).toThrow(/printable ASCII/);
      await direct().webhooks.remove(first.id);
    });
  });
}

/** What the proxy does with a request: forward it, or answer 503 (Retry-After 0, or N s), 429 (Retry-After N s), cut the connection, or forward it and answer 503 all the same, or cut the connection once the server answered. */
type Fault = 'forward' | '503' | `503:${number}` | 'reset' | 'swallow-503' | 'swallow-reset' | `429:${number}`;

interface FaultyProxy {
  url: string;
  /** The answers of the next requests, in order; after them, everything is forwarded. */
  plan(faults: Fault[]): void;
  /** Planned faults not used yet. */
  pending(): number;
  /** Every request: its path and query, and what the proxy did. */
  seen: { url: string; answer: Fault; key?: string }[];
  close(): Promise<void>;
}

/**
 * An HTTP proxy that forwards to the server (keeping the Host the client
 * sent, so the server checks the signature over the URL the client signed),
 * except for the faults planned for the next requests.
 */
async function startFaultyProxy(target: () => URL): Promise<FaultyProxy> {
  let planned: Fault[] = [];
  const seen: FaultyProxy['seen'] = [];
  const forward = (req: IncomingMessage, res: ServerResponse | undefined, done?: () => void) => {
    const to = target();
    const upstream = httpRequest({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      if (!res) {
        answer.resume();
        answer.on('end', () => done?.());
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res?.destroy());
    // The body too (a POST's): nothing for a GET.
    req.pipe(upstream);
  };
  const server: Server = createServer((req, res) => {
    const fault = planned.shift() ?? 'forward';
    const key = req.headers['idempotency-key'];
    seen.push({ url: req.url ?? '', answer: fault, ...(typeof key === 'string' ? { key } : {}) });
    const unavailable = (retryAfter = '0') => {
      const signature = req.url?.startsWith('/validatesignature');
      const body = signature
        ? '{"status":"error","message":"The storage is unavailable; try again shortly.","is_valid":false}'
        : '{"status":"error","data":[],"errors":[{"code":"storage_unavailable","message":"The storage is unavailable; try again shortly."}]}';
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': retryAfter, 'x-request-id': 'proxy-503' }).end(body);
    };
    if (fault === 'forward') forward(req, res);
    else if (fault === '503') unavailable();
    else if (fault.startsWith('503:')) unavailable(fault.slice(4));
    else if (fault === 'swallow-503') forward(req, undefined, () => unavailable());
    else if (fault === 'reset') req.socket.destroy();
    else if (fault === 'swallow-reset') forward(req, undefined, () => req.socket.destroy());
    else {
      const seconds = fault.slice(4);
      res
        .writeHead(429, { 'content-type': 'application/json', 'retry-after': seconds })
        .end(`{"status":"error","data":[],"errors":[{"code":"too_many_requests","message":"Slow down; try again in ${seconds} seconds."}]}`);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    plan: (faults) => {
      planned = [...faults];
    },
    pending: () => planned.length,
    seen,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
