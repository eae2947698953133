/**
 * What the handler quotes back, and which ids a URL can address: names echoed
 * in error messages are cut by code point and carry no control characters, on
 * every endpoint; ids that URL normalisation would remove are refused when
 * data is loaded.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createMemoryStorage, SeedError } from '../../src/storage/memory/index.js';
import { basic, testApi } from '../support/api.js';
import { user } from '../support/seeds.js';

const M1 = basic('m1', 'key-one');
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

async function unknownParameterMessage(path: string, name: string): Promise<{ text: string; message: string; param: string }> {
  const { api } = testApi();
  const response = await api.fetch(new Request(`http://api.test${path}?${encodeURIComponent(name)}=1`, { headers: M1 }));
  expect(response.status).toBe(400);
  const text = await response.text();
  const body = JSON.parse(text);
  expect(body.errors[0].code).toBe('unknown_parameter');
  return { text, message: body.errors[0].message, param: body.errors[0].param };
}

describe('names quoted back in error messages', () => {
  for (const path of ['/merchant/users', '/merchant/users/a-001']) {
    it(`${path}: cuts a long name by code point, never inside a surrogate pair`, async () => {
      const name = `${'a'.repeat(63)}😀😀😀`;
      const { message, text } = await unknownParameterMessage(path, name);
      expect(message).toContain(`${'a'.repeat(63)}😀…`);
      expect(LONE_SURROGATE.test(message)).toBe(false);
      expect(text).not.toMatch(/\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])/i);
    });

    it(`${path}: replaces C0 and C1 control characters with ?`, async () => {
      const { message } = await unknownParameterMessage(path, 'a\u0001b\u0085c\u009fd\u007fe');
      expect(message).toContain('a?b?c?d?e');
      expect(CONTROL.test(message)).toBe(false);
    });
  }

  it('for every name: the message holds no control character and no lone surrogate, and at most 64 code points of it', async () => {
    const { api } = testApi();
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: fc.oneof(fc.constantFrom('a', '😀', 'é', '\u0001', '\u0085', '\u009f', '\u007f'), fc.constant('\u{10FFFF}')), minLength: 1, maxLength: 100 }), async (name) => {
        fc.pre(!['limit', 'cursor', 'active', 'joined_after', 'joined_before'].includes(name) && !name.includes('\u0000'));
        const response = await api.fetch(new Request(`http://api.test/merchant/users?${encodeURIComponent(name)}=1`, { headers: M1 }));
        const body = await response.json();
        const message: string = body.errors[0].message;
        const quoted = message.slice('Unknown parameter: '.length, -1).replace(/…$/, '');
        expect(CONTROL.test(message)).toBe(false);
        expect(LONE_SURROGATE.test(message)).toBe(false);
        expect([...quoted].length).toBeLessThanOrEqual(64);
      }),
      { numRuns: 300 },
    );
  });
});

describe('ids that no URL can address', () => {
  for (const id of ['.', '..']) {
    it(`refuses shared_user_id ${JSON.stringify(id)} in a seed, saying why`, () => {
      let problems: string[] = [];
      try {
        createMemoryStorage({ seed: { merchants: [{ id: 'm', keys: ['k'] }], users: [user('m', id)] } });
      } catch (error) {
        expect(error).toBeInstanceOf(SeedError);
        problems = (error as SeedError).problems;
      }
      expect(problems).toEqual(['users[0].shared_user_id: `.` and `..` cannot be used, because URLs drop such path segments']);
    });
  }

  it('accepts ids that merely contain dots', () => {
    const storage = createMemoryStorage({ seed: { merchants: [{ id: '.', keys: ['k'] }], users: [user('.', '...'), user('.', '.a'), user('.', 'a..')] } });
    expect(storage).toBeDefined();
  });
});
