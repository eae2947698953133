import { readFileSync } from 'node:fs';
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { canonicalMessage, pct, sign, signUrl, verify } from '../../src/signing/index.js';

interface Vector {
  source: string;
  note?: string;
  secret: string | null;
  method: string;
  url: string;
  pairs: [string, string][];
  message?: string;
  hmac?: string;
}

const { vectors } = JSON.parse(readFileSync(new URL('../fixtures/signing-vectors.json', import.meta.url), 'utf8')) as { vectors: Vector[] };

describe('signing known-answer vectors (test/fixtures/signing-vectors.json)', () => {
  it('has vectors to check', () => expect(vectors.length).toBeGreaterThanOrEqual(7));

  for (const [i, vector] of vectors.entries()) {
    const request = { method: vector.method, url: vector.url, params: vector.pairs };
    if (vector.message !== undefined) {
      it(`vector ${i} (${vector.source}): canonical message`, () => {
        expect(canonicalMessage(request)).toBe(vector.message);
      });
    }
    if (vector.hmac !== undefined && vector.secret !== null) {
      const { secret, hmac } = vector;
      it(`vector ${i} (${vector.source}): hmac`, () => {
        expect(sign(secret, request)).toBe(hmac.toLowerCase());
        expect(verify(hmac, [secret], request)).toBe(true);
        expect(verify(hmac, ['wrong', secret], request)).toBe(true);
        expect(verify(hmac, ['wrong'], request)).toBe(false);
      });
    }
  }
});

describe('pct: Python quote(s, safe="")', () => {
  it('escapes what encodeURIComponent spares', () => {
    expect(pct("!'()*")).toBe('%21%27%28%29%2A');
  });
  it('keeps only A-Z a-z 0-9 - . _ ~', () => {
    expect(pct('AZaz09-._~')).toBe('AZaz09-._~');
    expect(pct(' /?#&=+%')).toBe('%20%2F%3F%23%26%3D%2B%25');
  });
  it('encodes UTF-8 bytes in upper-case hex', () => {
    expect(pct('ą☃🐍')).toBe('%C4%85%E2%98%83%F0%9F%90%8D');
  });
});

describe('canonical message', () => {
  const url = 'https://api.example.com/validatesignature';

  it('signs !\'()* in keys and values as Python does', () => {
    expect(canonicalMessage({ method: 'get', url, params: [["k!'", "v()*"]] })).toBe(
      'GET&https%3A%2F%2Fapi.example.com%2Fvalidatesignature&k%2521%2527%3Dv%2528%2529%252A',
    );
  });

  it('sorts by encoded key first, so a key that is a prefix of another comes first', () => {
    const message = canonicalMessage({ method: 'GET', url, params: [['a-b', '1'], ['a', '2'], ['a.', '0'], ['a0', '9']] });
    expect(decodeURIComponent(message.split('&')[2]!)).toBe('a=2&a-b=1&a.=0&a0=9');
  });

  it('sorts repeated keys by encoded value, so an escaped value sorts before letters', () => {
    const message = canonicalMessage({ method: 'GET', url, params: [['k', 'b'], ['k', 'B'], ['k', 'ä'], ['k', 'a']] });
    expect(decodeURIComponent(message.split('&')[2]!)).toBe('k=%C3%A4&k=B&k=a&k=b');
  });

  it('leaves out hmac and gettoken but signs every other parameter', () => {
    const a = canonicalMessage({ method: 'GET', url, params: { cp: 'm', hmac: 'x', gettoken: 'y', extra: '1' } });
    expect(a).toBe(canonicalMessage({ method: 'GET', url, params: [['extra', '1'], ['cp', 'm']] }));
  });

  it('accepts a record with arrays and numbers', () => {
    expect(canonicalMessage({ method: 'GET', url, params: { k: ['2', 1], ts: 1700000000 } })).toBe(
      canonicalMessage({ method: 'GET', url, params: [['k', '1'], ['k', '2'], ['ts', '1700000000']] }),
    );
  });
});

describe('verify', () => {
  const request = { method: 'GET', url: 'http://x/validatesignature', params: { cp: 'm', ts: '1', salt: 's' } };
  const signature = sign('key', request);

  it('accepts any case and any of several keys', () => {
    expect(verify(signature.toUpperCase(), ['old', 'key'], request)).toBe(true);
  });
  it('rejects a truncated, empty or non-hex signature', () => {
    expect(verify(signature.slice(0, -1), ['key'], request)).toBe(false);
    expect(verify('', ['key'], request)).toBe(false);
    expect(verify('ü'.repeat(56), ['key'], request)).toBe(false);
    expect(verify(signature, [], request)).toBe(false);
  });
  it('rejects a signature with a non-hex character whose low byte equals the right digit', () => {
    const i = [...signature].findIndex((c) => c >= 'a' && c <= 'f');
    // U+0261 to U+0266 are lower-case letters, so lower-casing the signature keeps them; their
    // low byte is the digit's (U+0100 + digit was not: for b, d and f it is an upper-case letter,
    // whose lower case has another low byte, and this signature's first letter is an f).
    const lookalike = signature.slice(0, i) + String.fromCharCode(0x200 + signature.charCodeAt(i)) + signature.slice(i + 1);
    expect(lookalike).not.toBe(signature);
    expect(lookalike.toLowerCase()).toBe(lookalike);
    expect(Buffer.from(lookalike, 'latin1').toString('latin1')).toBe(signature);
    expect(verify(lookalike, ['key'], request)).toBe(false);
  });
});

describe('signUrl', () => {
  it('returns a URL whose query verifies, with fresh ts and salt', () => {
    const signed = new URL(signUrl('key', 'https://api.example.com/validatesignature', { cp: "m!'()*", note: 'a b+c' }, { now: () => 1_700_000_000_123 }));
    const params = [...signed.searchParams];
    expect(signed.searchParams.get('ts')).toBe('1700000000');
    expect(signed.searchParams.get('salt')).toMatch(/^[0-9a-f]{32}$/);
    expect(signed.searchParams.get('note')).toBe('a b+c');
    expect(signed.search).not.toContain('+');
    const hmac = signed.searchParams.get('hmac')!;
    expect(verify(hmac, ['key'], { method: 'GET', url: 'https://api.example.com/validatesignature', params })).toBe(true);
  });

  it('draws a different salt each time', () => {
    const a = new URL(signUrl('k', 'http://x/validatesignature', { cp: 'm' })).searchParams.get('salt');
    const b = new URL(signUrl('k', 'http://x/validatesignature', { cp: 'm' })).searchParams.get('salt');
    expect(a).not.toBe(b);
  });

  it('keeps parameters already in the URL and signs them', () => {
    const signed = new URL(signUrl('k', 'http://x/validatesignature?cp=m&extra=1', {}));
    expect(signed.searchParams.get('extra')).toBe('1');
    expect(verify(signed.searchParams.get('hmac')!, ['k'], { method: 'GET', url: 'http://x/validatesignature', params: [...signed.searchParams] })).toBe(true);
  });

  it('uses a ts and salt given in params instead of adding a second of each; refuses an hmac in params', () => {
    const signed = new URL(signUrl('k', 'http://x/validatesignature', [['cp', 'm'], ['ts', '1700000000'], ['salt', 'mine']]));
    expect(signed.searchParams.getAll('ts')).toEqual(['1700000000']);
    expect(signed.searchParams.getAll('salt')).toEqual(['mine']);
    expect(verify(signed.searchParams.get('hmac')!, ['k'], { method: 'GET', url: 'http://x/validatesignature', params: [...signed.searchParams] })).toBe(true);
    expect(() => signUrl('k', 'http://x/validatesignature', { cp: 'm', hmac: 'x' })).toThrow(/must not hold hmac/);
  });
});
