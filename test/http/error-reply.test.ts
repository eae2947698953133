/**
 * The one error renderer (src/http/error-reply.ts): for any text at all in an
 * error's message or param, every string field of the body, in both shapes,
 * holds no raw C0, DEL or C1 control, is at most MAX_ERROR_TEXT long, and
 * reads back as the text it was (or its start, cut with `…`).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MerchantApiError, type ErrorDetail, type MerchantApiErrorCode } from '../../src/errors.js';
import { errorReply, MAX_ERROR_TEXT } from '../../src/http/error-reply.js';
import { basic, testApi } from '../support/api.js';

const RAW_CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const CODES: MerchantApiErrorCode[] = ['unknown_parameter', 'invalid_parameter', 'invalid_cursor', 'malformed_request', 'not_found', 'too_many_requests', 'internal_error'];

/** Any UTF-16 text, controls, line separators and lone surrogates included, sometimes far longer than the bound. */
const anyText = fc.oneof(
  fc.string({ unit: fc.oneof(fc.integer({ min: 0, max: 0xffff }).map((unit) => String.fromCharCode(unit)), fc.constantFrom('\u0085', '\u007f', '\u009b', '\u0000', '\u001b', '\u2028', '😀', 'a')), maxLength: 40 }),
  fc.string({ unit: 'binary', minLength: MAX_ERROR_TEXT - 4, maxLength: MAX_ERROR_TEXT * 3 }),
);

/** The field as sent, read back: whole, or its start with `…` when it was too long. */
function expectReadBack(field: unknown, sent: string): void {
  expect(typeof field).toBe('string');
  const text = field as string;
  expect(text.length).toBeLessThanOrEqual(MAX_ERROR_TEXT);
  if (sent.length <= MAX_ERROR_TEXT) expect(text).toBe(sent);
  else {
    expect(text.endsWith('…')).toBe(true);
    expect(sent.startsWith(text.slice(0, -1))).toBe(true);
    // Never cut inside a surrogate pair: what is kept does not end with the pair's first half.
    expect(text.slice(0, -1)).not.toMatch(/[\ud800-\udbff]$/);
  }
}

describe('error bodies', () => {
  it('for any message and param, in both shapes: no raw control character, every string bounded, the text read back', () => {
    const detail = fc.record({ code: fc.constantFrom(...CODES), message: anyText, param: fc.option(anyText, { nil: undefined }) });
    fc.assert(
      fc.property(fc.array(detail, { minLength: 1, maxLength: 3 }), fc.constantFrom('envelope' as const, 'signature' as const), (details, shape) => {
        const given: ErrorDetail[] = details.map(({ code, message, param }) => (param === undefined ? { code, message } : { code, message, param }));
        const error = new MerchantApiError(given[0]!.code, given[0]!.message, { details: given, status: 400 });
        const { body } = errorReply(error, shape);
        const text = body as string;
        expect(text).not.toMatch(RAW_CONTROL);
        expect(text).not.toMatch(/[\u2028\u2029]/);
        const parsed = JSON.parse(text);
        if (shape === 'signature') {
          expectReadBack(parsed.message, given.map((d) => d.message).join(' '));
          return;
        }
        expect(parsed.errors).toHaveLength(given.length);
        given.forEach((sent, i) => {
          const got = parsed.errors[i];
          expect(got.code).toBe(sent.code);
          expectReadBack(got.message, sent.message);
          if (sent.param === undefined) expect('param' in got).toBe(false);
          else expectReadBack(got.param, sent.param);
        });
      }),
      { numRuns: 500 },
    );
  });

  for (const path of ['/merchant/users', '/merchant/users/a-001']) {
    it(`${path}: the param of unknown_parameter has its C1 and DEL escaped in the body, not raw`, async () => {
      const { api } = testApi();
      const response = await api.fetch(new Request(`http://api.test${path}?${encodeURIComponent('x\u0085y\u007fz')}=1`, { headers: basic('m1', 'key-one') }));
      const text = await response.text();
      expect(text).toContain('"param":"x\\u0085y\\u007fz"');
      expect(text).not.toMatch(RAW_CONTROL);
      expect(JSON.parse(text).errors[0].param).toBe('x\u0085y\u007fz');
    });
  }

  it('bounds a param of thousands of characters', async () => {
    const { api } = testApi();
    const name = 'p'.repeat(6000);
    const response = await api.fetch(new Request(`http://api.test/merchant/users?${name}=1`, { headers: basic('m1', 'key-one') }));
    const param: string = (await response.json()).errors[0].param;
    expect(param).toBe(`${'p'.repeat(MAX_ERROR_TEXT - 1)}…`);
  });
});
