/**
 * The parts of `merchant-api/client` that need no server: the incremental
 * JSON parser (every way of cutting a document into pieces gives the same
 * records), the retry policy, the error codes of /validatesignature answers,
 * and the client's signatures against the known-answer vectors
 * (test/fixtures/signing-vectors.json).
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createMerchantClient, MerchantResponseError, MerchantTimeoutError } from '../../src/client/index.js';
import { signatureCode } from '../../src/client/decode-error.js';
import { JsonEnvelopeParser, JsonStreamError } from '../../src/client/json-stream.js';
import { backoffMs, DEFAULT_RETRY, retryAfterMs, retryPolicy } from '../../src/client/retry.js';
import { createMerchantApi, silentLogger } from '../../src/index.js';
import { createMemoryStorage } from '../../src/storage/memory/index.js';
import { conformanceSeed, GENERATED_USERS, MERCHANTS, SPECIAL_IDS } from '../support/seeds.js';
import { within } from '../support/within.js';
import { sleep } from '../support/sleep.js';

const record = (id: string, extra: Record<string, string | null> = {}) => ({ shared_user_id: id, first_name: 'Zoë "Q" \\ }{][', state: null, ...extra });

/** Parses `text` fed in `pieces` (cut at the given offsets). */
function parseInPieces(text: string, cuts: number[]): { elements: unknown[]; members: Record<string, unknown> } {
  const parser = new JsonEnvelopeParser('data');
  const elements: unknown[] = [];
  let from = 0;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    elements.push(...parser.push(text.slice(from, cut)));
    from = cut;
  }
  elements.push(...parser.push(text.slice(from)));
  elements.push(...parser.end());
  return { elements, members: parser.members };
}

describe('the incremental JSON parser', () => {
  const users = [record('a'), record('b/c d', { note: 'emoji 😀 and \u2028 and \\u00e9' }), record('ü-umlaut'), record('q?&=#%+')];
  const document = JSON.stringify({ status: 'ok', data: users, errors: [] });

  it('hands out every element of "data", and the other members, whatever the pieces', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: document.length }), { maxLength: 40 }), (cuts) => {
        const { elements, members } = parseInPieces(document, cuts);
        expect(elements).toEqual(users);
        expect(members).toEqual({ status: 'ok', errors: [] });
      }),
      { numRuns: 500 },
    );
  });

  it('hands out each element as soon as it is complete, before the document ends', () => {
    const parser = new JsonEnvelopeParser('data');
    expect(parser.push('{"status":"ok","data":[{"shared_user_id":"a"},{"shared_user_id":"b')).toEqual([{ shared_user_id: 'a' }]);
    expect(parser.members).toEqual({ status: 'ok' });
    expect(parser.push('"}')).toEqual([{ shared_user_id: 'b' }]);
    expect(parser.push('],"errors":[]}')).toEqual([]);
    expect(parser.end()).toEqual([]);
  });

  it('takes whitespace, any member order, nested values, an empty array and a number at the very end', () => {
    const text = ' {\n "errors" : [ ] , "data" : [ ] ,"meta":{"a":[1,{"b":"]}"}]},"n": 12 } \n';
    expect(parseInPieces(text, [3, 17, 40])).toEqual({ elements: [], members: { errors: [], meta: { a: [1, { b: ']}' }] }, n: 12 } });
    expect(parseInPieces('{"data":[1,true,null,"s",[2]],"n":-1.5e3}', [11, 12])).toEqual({ elements: [1, true, null, 's', [2]], members: { n: -1500 } });
  });

  it('says a document that stops early is truncated, with the number of elements seen', () => {
    for (const cut of [document.length - 1, document.indexOf('"b/c'), 5]) {
      const parser = new JsonEnvelopeParser('data');
      parser.push(document.slice(0, cut));
      expect(() => parser.end()).toThrow(JsonStreamError);
      try {
        parser.end();
      } catch (error) {
        expect((error as JsonStreamError).truncated).toBe(true);
        expect((error as Error).message).toMatch(/ended early, after \d element/);
      }
    }
  });

  it('refuses what is not the expected document', () => {
    for (const bad of ['<html>', '[1,2]', '{"data":{}}', '{"data":[1 2]}', '{"data":[{"a":1,}]}', '{"data":[]}x', '{"data":[],"data":[]}', '{"a" 1}']) {
      expect(() => parseInPieces(bad, []), bad).toThrow(JsonStreamError);
    }
    const missing = new JsonEnvelopeParser('data');
    missing.push('{"status":"ok"}');
    expect(() => missing.end()).toThrow(/no "data" array/);
  });
});

describe('the retry policy', () => {
  it('reads Retry-After as seconds or as an HTTP date', () => {
    expect(retryAfterMs('3', 0)).toBe(3000);
    expect(retryAfterMs(' 0 ', 0)).toBe(0);
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4000)).toBe(6000);
    expect(retryAfterMs(new Date(1000).toUTCString(), 4000)).toBe(0);
    expect(retryAfterMs('soon', 0)).toBeUndefined();
    expect(retryAfterMs(null, 0)).toBeUndefined();
  });

  it('backs off exponentially with full jitter, capped at maxDelayMs', () => {
    const policy = retryPolicy({ baseDelayMs: 100, maxDelayMs: 1000 });
    expect([1, 2, 3, 4, 5].map((retry) => backoffMs(policy, retry, () => 0.999999))).toEqual([99, 199, 399, 799, 999]);
    expect(backoffMs(policy, 3, () => 0)).toBe(0);
  });

  it('takes a number, false, or options, and refuses nonsense', () => {
    expect(retryPolicy(undefined)).toEqual(DEFAULT_RETRY);
    expect(retryPolicy(false).maxRetries).toBe(0);
    expect(retryPolicy(5).maxRetries).toBe(5);
    expect(retryPolicy({ deadlineMs: 5 })).toMatchObject({ maxRetries: 3, deadlineMs: 5 });
    expect(() => retryPolicy({ maxRetries: -1 })).toThrow(RangeError);
    expect(() => retryPolicy({ baseDelayMs: Number.NaN })).toThrow(RangeError);
  });
});

describe('error codes of /validatesignature answers, which carry none', () => {
  it('derives a stable code from every documented answer (docs/protocol.md#validating-a-signature)', () => {
    expect(signatureCode(400, 'Missing required parameters: salt, ts, hmac.')).toBe('missing_parameter');
    expect(signatureCode(400, 'Missing required parameter: ts.')).toBe('missing_parameter');
    expect(signatureCode(400, 'Parameter given more than once: cp.')).toBe('invalid_parameter');
    expect(signatureCode(400, 'Invalid parameter: cp longer than 128 characters.')).toBe('invalid_parameter');
    expect(signatureCode(404, undefined)).toBe('unknown_merchant');
    expect(signatureCode(403, 'This account is disabled.')).toBe('merchant_disabled');
    expect(signatureCode(400, 'Signature does not match.')).toBe('signature_mismatch');
    expect(signatureCode(400, 'Invalid timestamp: ts must be a Unix time in whole seconds.')).toBe('invalid_timestamp');
    expect(signatureCode(400, "Invalid timestamp: ts is outside the accepted window of 300 seconds from the server's time.")).toBe('timestamp_out_of_window');
    expect(signatureCode(400, 'This salt was already used: every request needs a new salt.')).toBe('salt_reused');
    expect(signatureCode(400, 'The query string contains a NUL byte.')).toBe('malformed_request');
    expect(signatureCode(414, 'The query string is longer than 8192 characters.')).toBe('uri_too_long');
    expect(signatureCode(429, 'Too many failed authentications from this address; try again in 300 seconds.')).toBe('too_many_requests');
    expect(signatureCode(503, 'The storage is unavailable; try again shortly.')).toBe('storage_unavailable');
    expect(signatureCode(500, 'Internal server error.')).toBe('internal_error');
  });
});

describe('the client against the handler in process (a fetch that calls api.fetch)', () => {
  const { main } = MERCHANTS;
  const api = createMerchantApi({ storage: createMemoryStorage({ seed: conformanceSeed() }), logger: silentLogger, accessLog: false, tracing: false });
  const inProcess: typeof fetch = (input, init) => api.fetch(new Request(input, init));

  it('every wrong answer is a MerchantResponseError with status, code, message, request id and body', async () => {
    const client = createMerchantClient({ baseUrl: 'http://merchant-api.test', merchantId: main.id, apiKey: 'not-the-key', fetch: inProcess });
    const error = (await client.validateSignature().catch((e: unknown) => e)) as MerchantResponseError;
    expect(error).toBeInstanceOf(MerchantResponseError);
    expect(error).toMatchObject({ status: 400, code: 'signature_mismatch', message: 'Signature does not match.', body: { status: 'error', message: 'Signature does not match.', is_valid: false }, method: 'GET', url: 'http://merchant-api.test/validatesignature' });
    expect(error.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(error.requestId).toBe(error.headers.get('x-request-id'));
    const listing = (await client.users().next().catch((e: unknown) => e)) as MerchantResponseError;
    expect(listing).toMatchObject({ status: 401, code: 'unauthorized', details: [{ code: 'unauthorized' }] });
    expect(listing.headers.get('www-authenticate')).toContain('Basic');
  });

  it('asks for order=updated_at and updated_since, and orders by date_joined, as the server lists them', async () => {
    const urls: string[] = [];
    const recording: typeof fetch = (input, init) => (urls.push(String(input)), inProcess(input, init));
    const client = createMerchantClient({ baseUrl: 'http://merchant-api.test', merchantId: main.id, apiKey: main.keys[0], fetch: recording });
    const changed = [];
    for await (const user of client.users({ order: 'updated_at', pageSize: 1000 })) changed.push(user);
    expect(changed).toHaveLength(GENERATED_USERS + SPECIAL_IDS.length);
    expect(changed.every((user) => typeof user.updated_at === 'string' && Object.keys(user).at(-1) === 'updated_at')).toBe(true);
    const since = new Date(Date.parse(changed[0]!.updated_at) - 1000);
    const again = [];
    for await (const user of client.users({ order: 'updated_at', updatedSince: since, pageSize: 500 })) again.push(user);
    expect(again).toEqual(changed);
    expect(urls.at(-1)).toContain(`updated_since=${since.toISOString().replace(/:/g, '%3A')}`);
    const oldest = await client.users({ order: 'date_joined', pageSize: 3 }).next();
    expect(Object.keys(oldest.value!)).toHaveLength(14);
    expect(urls.at(-1)).toContain('order=date_joined');
    await expect(client.users({ order: 'newest' as never }).next()).rejects.toThrow(TypeError);
  });

  it('refuses bad arguments before sending anything', async () => {
    let sent = 0;
    const counting: typeof fetch = (input, init) => (sent++, inProcess(input, init));
    const client = createMerchantClient({ baseUrl: 'http://merchant-api.test/', merchantId: main.id, apiKey: main.keys[0], fetch: counting });
    expect(client.baseUrl).toBe('http://merchant-api.test');
    await expect(client.userPages({ pageSize: 0 }).next()).rejects.toThrow(RangeError);
    await expect(client.userPages({ pageSize: 1001 }).next()).rejects.toThrow(RangeError);
    await expect(client.users({ joinedAfter: new Date(Number.NaN) }).next()).rejects.toThrow(RangeError);
    await expect(client.user('')).rejects.toThrow(TypeError);
    // A URL resolves them away: /merchant/users/. is the list on a server that cannot see the raw path (Bun).
    await expect(client.user('.')).rejects.toThrow(/no user has the id "\."/);
    await expect(client.user('..')).rejects.toThrow(TypeError);
    expect(sent).toBe(0);
    expect(() => createMerchantClient({ baseUrl: 'ftp://x', merchantId: 'm', apiKey: 'k' })).toThrow(/http or https/);
    expect(() => createMerchantClient({ baseUrl: 'http://x?y=1', merchantId: 'm', apiKey: 'k' })).toThrow(/query/);
    expect(() => createMerchantClient({ baseUrl: 'http://u:p@x', merchantId: 'm', apiKey: 'k' })).toThrow(/credentials/);
    expect(() => createMerchantClient({ baseUrl: 'http://x', merchantId: '', apiKey: 'k' })).toThrow(/merchantId/);
    expect(() => createMerchantClient({ baseUrl: 'http://x', merchantId: 'm', apiKey: 'k', timeoutMs: 0 })).toThrow(/timeoutMs/);
  });

  it('retries a POST answered 409 idempotency_in_progress with the same Idempotency-Key; a 409 conflict is thrown at once', async () => {
    const keys: string[] = [];
    const answer = (status: number, body: string) => new Response(body, { status, headers: { 'content-type': 'application/json', 'retry-after': '0' } });
    let calls = 0;
    const running: typeof fetch = async (_input, init) => {
      keys.push(new Headers(init?.headers).get('idempotency-key')!);
      if (++calls === 1) return answer(409, '{"status":"error","data":[],"errors":[{"code":"idempotency_in_progress","message":"still running","param":"Idempotency-Key"}]}');
      return answer(202, '{"status":"ok","data":[{"event_id":"evt_1","endpoint_id":"we_1"}],"errors":[]}');
    };
    const client = (fetch: typeof globalThis.fetch) => createMerchantClient({ baseUrl: 'http://merchant-api.test', merchantId: main.id, apiKey: main.keys[0], fetch });
    expect(await client(running).webhooks.test('we_1')).toEqual({ event_id: 'evt_1', endpoint_id: 'we_1' });
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    keys.length = 0;
    const conflict: typeof fetch = async (_input, init) => {
      keys.push(new Headers(init?.headers).get('idempotency-key')!);
      return answer(409, '{"status":"error","data":[],"errors":[{"code":"conflict","message":"The webhook endpoint is disabled; enable it first."}]}');
    };
    await expect(client(conflict).webhooks.test('we_1', { idempotencyKey: 'mine-1' })).rejects.toMatchObject({ status: 409, code: 'conflict' });
    expect(keys).toEqual(['mine-1']);
  });

  it('a caller abort rejects with the signal reason, not a client error', async () => {
    const client = createMerchantClient({ baseUrl: 'http://merchant-api.test', merchantId: main.id, apiKey: main.keys[0], fetch: inProcess });
    const reason = new Error('stop');
    await expect(client.user('u-00001', { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
  });

  it('an abort during the wait before a retry ends the call at once, with the reason', async () => {
    let calls = 0;
    const unavailable: typeof fetch = async () => {
      calls++;
      return Response.json({ status: 'error', data: [], errors: [{ code: 'storage_unavailable', message: 'The storage is unavailable; try again shortly.' }] }, { status: 503, headers: { 'retry-after': '30' } });
    };
    const controller = new AbortController();
    // Retry-After is honoured up to maxDelayMs: the client would wait the whole 30 s but for the abort.
    const client = createMerchantClient({ baseUrl: 'http://merchant-api.test', merchantId: main.id, apiKey: main.keys[0], fetch: unavailable, signal: controller.signal, retries: { maxDelayMs: 60_000, deadlineMs: 120_000 } });
    const reason = new Error('shutting down');
    setTimeout(() => controller.abort(reason), 50);
    // The bound is the behaviour (the abort ends the wait, not the wait's end): 10 s is 200x the abort's
    // delay and a third of the 30 s the call takes when the abort does not reach the wait.
    await expect(within(client.user('u-00001'), 10_000, 'the call aborted during its retry wait')).rejects.toBe(reason);
    expect(calls).toBe(1);
  });

  it('a body that stalls mid-way times out (timeoutMs is per piece of the body, too)', async () => {
    const stalling: typeof fetch = async (_input, init) => {
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{"status":"ok","data":[{"shared_user_id":"a"},'));
          init?.signal?.addEventListener('abort', () => controller.error(init.signal!.reason));
        },
      });
      return new Response(body, { status: 200, headers: { 'content-type': 'application/json' } });
    };
    const client = createMerchantClient({ baseUrl: 'http://merchant-api.test', merchantId: main.id, apiKey: main.keys[0], fetch: stalling, timeoutMs: 200 });
    const seen: string[] = [];
    // The body never goes on, so without the timeout the export never ends: 10 s is 50x the timeout.
    const error = await within(
      (async () => {
        for await (const user of client.exportUsers()) seen.push(user.shared_user_id);
      })(),
      10_000,
      'the export of a stalled body',
    ).catch((e: unknown) => e);
    expect(seen).toEqual(['a']);
    expect(error).toBeInstanceOf(MerchantTimeoutError);
    expect(error).toMatchObject({ kind: 'request', timeoutMs: 200 });
  });

  it('a slow consumer of the export does not time out: the clock runs only while waiting for the server', async () => {
    // The consumer takes twice the timeout over one user; the in-process server itself needs far less than the timeout per piece, even on a loaded machine.
    const client = createMerchantClient({ baseUrl: 'http://merchant-api.test', merchantId: main.id, apiKey: main.keys[0], fetch: inProcess, timeoutMs: 500 });
    let count = 0;
    for await (const user of client.exportUsers()) {
      if (count++ === 0) await sleep(1000);
      expect(user.shared_user_id).toBeTypeOf('string');
    }
    expect(count).toBe(conformanceSeed().users.filter((u) => u.merchant_id === main.id).length);
  });
});

interface Vector {
  source: string;
  secret: string | null;
  method: string;
  url: string;
  pairs: [string, string][];
  hmac?: string;
}

const { vectors } = JSON.parse(readFileSync(new URL('../fixtures/signing-vectors.json', import.meta.url), 'utf8')) as { vectors: Vector[] };

describe("the client's signatures equal the known-answer vectors (test/fixtures/signing-vectors.json)", () => {
  // The client signs GET <base>/validatesignature with cp, ts, salt and any further parameters:
  // every vector of that form is replayed through validateSignature() with the vector's clock and salt.
  const applicable = vectors.filter((v) => v.method === 'GET' && v.url.endsWith('/validatesignature') && v.hmac !== undefined && v.secret !== null);

  it('has vectors of the form the client sends', () => expect(applicable.length).toBeGreaterThanOrEqual(3));

  for (const vector of applicable) {
    it(`vector ${vectors.indexOf(vector)} (${vector.source}): the URL the client sends carries the vector's hmac`, async () => {
      const value = (key: string) => vector.pairs.find(([k]) => k === key)![1];
      const sent: string[] = [];
      const capture: typeof fetch = async (input) => {
        sent.push(String(input));
        return Response.json({ status: 'ok', is_valid: true });
      };
      const client = createMerchantClient({
        baseUrl: vector.url.slice(0, -'/validatesignature'.length),
        merchantId: value('cp'),
        apiKey: vector.secret!,
        fetch: capture,
        now: () => Number(value('ts')) * 1000,
        salt: () => value('salt'),
      });
      const extra = vector.pairs.filter(([k]) => !['cp', 'ts', 'salt', 'hmac', 'gettoken'].includes(k));
      expect(await client.validateSignature({ params: extra })).toEqual({ status: 'ok', is_valid: true });
      const url = new URL(sent[0]!);
      expect(`${url.origin}${url.pathname}`).toBe(vector.url);
      expect(url.searchParams.get('hmac')).toBe(vector.hmac!.toLowerCase());
      // What was sent is what the vector signed: the same pairs, hmac aside.
      const sentPairs = [...url.searchParams].filter(([k]) => k !== 'hmac').sort();
      expect(sentPairs).toEqual(vector.pairs.filter(([k]) => k !== 'hmac' && k !== 'gettoken').sort());
    });
  }

  it('signs every attempt anew: a retry after a 503 has a fresh salt and its own hmac', async () => {
    const sent: URL[] = [];
    const flaky: typeof fetch = async (input) => {
      sent.push(new URL(String(input)));
      return sent.length === 1
        ? Response.json({ status: 'error', message: 'The storage is unavailable; try again shortly.', is_valid: false }, { status: 503, headers: { 'retry-after': '0' } })
        : Response.json({ status: 'ok', is_valid: true });
    };
    const client = createMerchantClient({ baseUrl: 'https://api.example.com', merchantId: 'demo-merchant', apiKey: 'demo-secret', fetch: flaky });
    await client.validateSignature();
    expect(sent).toHaveLength(2);
    expect(sent[0]!.searchParams.get('salt')).not.toBe(sent[1]!.searchParams.get('salt'));
    expect(sent[0]!.searchParams.get('hmac')).not.toBe(sent[1]!.searchParams.get('hmac'));
  });
});
