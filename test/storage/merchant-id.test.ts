/**
 * The merchant id rule (src/storage/contract.ts): every id it accepts can authenticate with HTTP
 * Basic (the reason for it), and it refuses exactly what the documentation says.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseBasicAuth } from '../../src/auth/basic-auth.js';
import { MAX_ID_LENGTH, merchantIdProblem } from '../../src/storage/contract.js';
import { MemoryStorage, parseSeed, SeedError } from '../../src/storage/memory/index.js';

const anyText = fc.string({ unit: 'binary', minLength: 0, maxLength: MAX_ID_LENGTH + 5 });

describe('merchant ids', () => {
  it('accepts exactly 1-128 characters without a colon or a control character', () => {
    fc.assert(
      fc.property(anyText, (id) => {
        const expected = id.length >= 1 && id.length <= MAX_ID_LENGTH && !id.includes(':') && ![...id].some((c) => /[\u0000-\u001f\u007f-\u009f]/.test(c));
        expect(merchantIdProblem(id) === undefined).toBe(expected);
      }),
      { numRuns: 2000 },
    );
  });

  it('every id it accepts comes back whole from an HTTP Basic header', () => {
    fc.assert(
      fc.property(
        anyText.filter((id) => merchantIdProblem(id) === undefined && !/\p{Cs}/u.test(id)),
        fc.string({ minLength: 1, maxLength: 40 }),
        (id, key) => {
          const header = `Basic ${Buffer.from(`${id}:${key}`, 'utf8').toString('base64')}`;
          expect(parseBasicAuth(header)).toEqual({ id, key });
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('the seed format refuses the rest, naming the place', () => {
    for (const id of ['shop:colon', 'tab\there', 'x'.repeat(MAX_ID_LENGTH + 1), '\u0085next-line']) {
      expect(() => parseSeed({ merchants: [{ id, keys: ['k'] }] })).toThrow(SeedError);
    }
    expect(() => parseSeed({ merchants: [{ id: 'shop:colon', keys: ['k'] }] })).toThrow(/merchants\[0\]\.id: must be 1-128 characters, without a colon or a control character/);
    expect(parseSeed({ merchants: [{ id: 'Ünïcode shop 🛒', keys: ['k'] }] }).merchants[0]!.id).toBe('Ünïcode shop 🛒');
  });

  it('MemoryStorage.putMerchant, a library entry point, takes exactly the ids the rule takes and names it for the rest', async () => {
    const storage = new MemoryStorage();
    expect(() => storage.putMerchant({ id: 'shop:colon', status: 'active', keys: ['k'] })).toThrow(
      new TypeError('MemoryStorage.putMerchant: merchant id "shop:colon": must be 1-128 characters, without a colon or a control character: HTTP Basic authentication ends the merchant id at the first colon.'),
    );
    expect(await storage.getMerchant('shop:colon')).toBeUndefined();
    await fc.assert(
      fc.asyncProperty(anyText, async (id) => {
        const problem = merchantIdProblem(id);
        const put = () => storage.putMerchant({ id, status: 'active', keys: ['k'] });
        if (problem === undefined) {
          put();
          expect(await storage.getMerchant(id)).toMatchObject({ id, status: 'active', keys: ['k'] });
        } else {
          expect(put).toThrow(`merchant id ${JSON.stringify(id)}: ${problem}.`);
          expect(await storage.getMerchant(id)).toBeUndefined();
        }
      }),
      { numRuns: 500 },
    );
    // A seed given to the constructor unvalidated (no parseSeed) meets the same check.
    expect(() => new MemoryStorage({ merchants: [{ id: 'tab\there', status: 'active', keys: ['k'] }], users: [] })).toThrow(/merchant id "tab\\there": .*control character/);
  });
});
