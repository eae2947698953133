/** The JSON body reader of the webhook endpoints (src/http/json-body.ts): type, size cap, JSON object; for all inputs. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MerchantApiError } from '../../src/errors.js';
import { readJsonBody } from '../../src/http/json-body.js';

/** A POST with `body`; `type` null sends none of its own (a string body is then `text/plain;charset=UTF-8`, as fetch makes it). */
const post = (body: string | ReadableStream<Uint8Array>, type: string | null = 'application/json') =>
  new Request('http://api.test/merchant/webhooks', { method: 'POST', body, headers: type === null ? {} : { 'content-type': type }, duplex: 'half' } as RequestInit);

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'read';
  } catch (error) {
    expect(error).toBeInstanceOf(MerchantApiError);
    return (error as MerchantApiError).code;
  }
}

/** A body as a stream of chunks, so that no Content-Length announces it. */
function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
}

describe('readJsonBody', () => {
  it('reads every JSON object within the cap as JSON.parse does, streamed or whole', async () => {
    await fc.assert(
      fc.asyncProperty(fc.dictionary(fc.string(), fc.jsonValue()), fc.boolean(), async (object, streamed) => {
        const text = JSON.stringify(object);
        const bytes = new TextEncoder().encode(text);
        fc.pre(bytes.byteLength <= 16 * 1024);
        const body = streamed ? streamOf([bytes.slice(0, bytes.length >> 1), bytes.slice(bytes.length >> 1)]) : text;
        expect(await readJsonBody(post(body))).toEqual(JSON.parse(text));
      }),
      { numRuns: 200 },
    );
  });

  it('refuses every body over the cap with 413, however it is cut into chunks, and every non-object with 400', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 4096 }), fc.array(fc.integer({ min: 1, max: 3000 }), { minLength: 1, maxLength: 8 }), async (over, sizes) => {
        const cap = 1024;
        const total = cap + over;
        const chunks: Uint8Array[] = [];
        let left = total;
        for (let i = 0; left > 0; i++) {
          const size = Math.min(left, sizes[i % sizes.length]!);
          chunks.push(new Uint8Array(size).fill(0x20));
          left -= size;
        }
        expect(await codeOf(readJsonBody(post(streamOf(chunks)), cap))).toBe('payload_too_large');
      }),
      { numRuns: 100 },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.jsonValue().filter((v) => v === null || typeof v !== 'object' || Array.isArray(v)),
        async (value) => {
          expect(await codeOf(readJsonBody(post(JSON.stringify(value))))).toBe('malformed_request');
        },
      ),
      { numRuns: 100 },
    );
  });

  it('takes application/json with any parameters and letter case, and nothing else (415)', async () => {
    for (const type of ['application/json', 'Application/JSON', 'application/json; charset=utf-8', ' application/json ;x=y']) expect(await codeOf(readJsonBody(post('{}', type)))).toBe('read');
    for (const type of [null, 'text/plain', 'application/jsonx', 'application/x-www-form-urlencoded', 'application/merge-patch+json']) expect(await codeOf(readJsonBody(post('{}', type)))).toBe('unsupported_media_type');
    // Optional: no body and no type is `{}`; a body without its type is still 415.
    expect(await readJsonBody(new Request('http://api.test/x', { method: 'POST' }), undefined, { optional: true })).toEqual({});
    expect(await codeOf(readJsonBody(post('{}', null), undefined, { optional: true }))).toBe('unsupported_media_type');
    const untyped = new Request('http://api.test/x', { method: 'POST', body: streamOf([new TextEncoder().encode('{}')]), duplex: 'half' } as RequestInit);
    expect(untyped.headers.get('content-type')).toBeNull();
    expect(await codeOf(readJsonBody(untyped, undefined, { optional: true }))).toBe('unsupported_media_type');
  });
});
