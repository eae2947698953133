/**
 * The library's signing against signers it shares no code with: the vectors Python computed
 * (`urllib.parse.quote(s, safe='')` and hmac/sha224, test/fixtures/signing-vectors-python.py),
 * which hold `~` beside the characters that are escaped, and, for all inputs, the independent
 * signer of the HTTP suites (test/support/test-signer.ts, Python's `quote` written byte by byte).
 * A `pct` that escaped `~` would still sign and verify its own URLs: only a signer of another
 * hand sees it, as a PHP or Python merchant would.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalMessage, pct, sign, signUrl, verify } from '../../src/signing/index.js';
import { hmacSha224, quote, signatureMessage } from '../support/test-signer.js';

interface Vector {
  source: string;
  secret: string | null;
  method: string;
  url: string;
  pairs: [string, string][];
  message?: string;
  hmac?: string;
}

const { vectors } = JSON.parse(readFileSync(new URL('../fixtures/signing-vectors.json', import.meta.url), 'utf8')) as { vectors: Vector[] };
const python = vectors.filter((v) => v.source === 'python');

/** Any text, whole code points; `~` and what is escaped beside it come often. */
const text = fc.string({ unit: fc.oneof(fc.constantFrom('~', ' ', '%', '*', '!', "'", '(', ')', '+', '&', '=', '/', 'ą', '🐍'), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 })), maxLength: 16 });
const pairs = fc.array(fc.tuple(text, text), { maxLength: 6 });
const url = fc.tuple(fc.webUrl({ withQueryParameters: false, withFragments: false }), text).map(([base, segment]) => `${base.replace(/\/$/, '')}/${encodeURIComponent(segment)}~`);

describe('the vectors Python computed (source "python" in test/fixtures/signing-vectors.json)', () => {
  it('hold "~" beside a space, %, *, !\'() and non-ASCII, in keys, values and the path', () => {
    const signed = python.flatMap((v) => v.pairs.flat());
    expect(python.length).toBeGreaterThanOrEqual(6);
    for (const neighbour of [' ', '%', '*', "!'()", 'ą']) expect(signed.some((s) => s.includes('~') && s.includes(neighbour)), neighbour).toBe(true);
    expect(python.flatMap((v) => v.pairs.map(([key]) => key)).some((key) => key.includes('~'))).toBe(true);
    expect(python.some((v) => new URL(v.url).pathname.includes('~'))).toBe(true);
    // Python kept every "~" as it is.
    for (const vector of python) expect(vector.message).not.toMatch(/%7E/i);
  });

  for (const vector of python) {
    it(`${vector.method} ${vector.url} ${JSON.stringify(vector.pairs.slice(0, 3))}: the message and the hmac Python made`, () => {
      const request = { method: vector.method, url: vector.url, params: vector.pairs };
      expect(canonicalMessage(request)).toBe(vector.message);
      expect(sign(vector.secret!, request)).toBe(vector.hmac);
      expect(verify(vector.hmac!, [vector.secret!], request)).toBe(true);
    });
  }
});

describe('for all inputs, the library signs as the independent signer (test/support/test-signer.ts)', () => {
  it('pct is Python\'s quote(s, safe="")', () => {
    fc.assert(
      fc.property(text, (value) => {
        expect(pct(value)).toBe(quote(value));
      }),
      { numRuns: 2000 },
    );
  });

  it('the canonical message and the hmac of any method, URL, pairs and key', () => {
    fc.assert(
      fc.property(fc.constantFrom('GET', 'HEAD', 'post'), url, pairs, text, (method, base, params, secret) => {
        const message = signatureMessage(method, base, params);
        expect(canonicalMessage({ method, url: base, params })).toBe(message);
        const hmac = hmacSha224(secret, message);
        expect(sign(secret, { method, url: base, params })).toBe(hmac);
        expect(verify(hmac, [secret], message)).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('a URL signUrl made carries the hmac the independent signer computes for its pairs', () => {
    fc.assert(
      fc.property(url, pairs, text, (base, params, secret) => {
        const extra = params.filter(([key]) => !['cp', 'ts', 'salt', 'hmac', 'gettoken'].includes(key));
        const signed = new URL(signUrl(secret, base, [['cp', 'm~1'], ...extra], { now: () => 1_700_000_000_000, salt: 's~ 1' }));
        const sent = [...signed.searchParams].filter(([key]) => key !== 'hmac');
        expect(signed.searchParams.get('hmac')).toBe(hmacSha224(secret, signatureMessage('GET', `${signed.origin}${signed.pathname}`, sent)));
      }),
      { numRuns: 500 },
    );
  });
});
