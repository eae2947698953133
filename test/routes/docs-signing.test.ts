/**
 * The reference page's own SHA-224, HMAC and canonical message (src/routes/docs/signing-script.ts), run as the
 * browser runs it: the script text evaluated in a fresh context. Checked against node:crypto on random inputs and
 * against the known-answer vectors every signer of this protocol passes.
 */
import { createHash, createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SIGNING_SCRIPT } from '../../src/routes/docs/signing-script.js';
import { canonicalMessage, sign } from '../../src/signing/index.js';

interface PageSigning {
  sha224(bytes: Uint8Array): Uint8Array;
  hmacSha224Hex(secret: string, message: string): string;
  canonicalMessage(method: string, url: string, pairs: [string, string][]): string;
  signUrl(method: string, url: string, merchantId: string, key: string, nowSeconds: number, salt: string): string;
}

const sandbox: { globalThis?: unknown; merchantApiSigning?: PageSigning } = { TextEncoder, URL } as never;
sandbox.globalThis = sandbox;
runInNewContext(SIGNING_SCRIPT, sandbox);
const page = sandbox.merchantApiSigning!;

const vectors = (JSON.parse(readFileSync(new URL('../fixtures/signing-vectors.json', import.meta.url), 'utf8')) as {
  vectors: { secret: string | null; method: string; url: string; pairs: [string, string][]; hmac?: string; message?: string }[];
}).vectors;

describe('the page signs like the server', () => {
  it('SHA-224 of any bytes is node:crypto’s (lengths across the padding boundaries included)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        expect(Buffer.from(page.sha224(bytes)).toString('hex')).toBe(createHash('sha224').update(bytes).digest('hex'));
      }),
      { numRuns: 500 },
    );
  });

  it('HMAC-SHA224 of any text under any key (longer than a block included) is node:crypto’s', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 100 }), fc.string({ unit: 'binary', maxLength: 200 }), (key, message) => {
        expect(page.hmacSha224Hex(key, message)).toBe(createHmac('sha224', key).update(message).digest('hex'));
      }),
      { numRuns: 500 },
    );
  });

  it('the canonical message of any pairs is the server’s', () => {
    const pair = fc.tuple(fc.string({ unit: 'binary', maxLength: 12 }), fc.string({ unit: 'binary', maxLength: 12 }));
    fc.assert(
      fc.property(fc.constantFrom('GET', 'post'), fc.webUrl({ withQueryParameters: false, withFragments: false }), fc.array(pair, { maxLength: 8 }), (method, url, pairs) => {
        expect(page.canonicalMessage(method, url, pairs)).toBe(canonicalMessage({ method, url, params: pairs }));
      }),
      { numRuns: 300 },
    );
  });

  it.each(vectors.map((v, i) => [i, v] as const))('signing vector %i', (_, vector) => {
    const message = page.canonicalMessage(vector.method, vector.url, vector.pairs);
    if (vector.message !== undefined) expect(message).toBe(vector.message);
    // Signatures compare case-insensitively; the page writes lower case, like the server.
    if (vector.hmac !== undefined) expect(page.hmacSha224Hex(vector.secret!, message)).toBe(vector.hmac.toLowerCase());
  });

  it('a signed URL carries cp, ts, salt and the hmac the server computes', () => {
    const signed = new URL(page.signUrl('GET', 'http://127.0.0.1:8787/validatesignature?cp=other&hmac=old', 'demo-merchant', 'demo-secret', 1700000000, 'abc'));
    const params = Object.fromEntries(signed.searchParams);
    expect(params).toMatchObject({ cp: 'demo-merchant', ts: '1700000000', salt: 'abc' });
    const expected = sign('demo-secret', { method: 'GET', url: 'http://127.0.0.1:8787/validatesignature', params: { cp: 'demo-merchant', ts: '1700000000', salt: 'abc' } });
    expect(params.hmac).toBe(expected);
  });
});
