/** The import's redaction (src/storage/mysql/admin/redact.ts): user values out, merchant ids kept. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { redact } from '../../../src/storage/mysql/admin/redact.js';

describe('redact', () => {
  it('replaces every quoted value but a merchant id, whatever it holds', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (merchantId, value) => {
        const id = JSON.stringify(merchantId);
        const secret = JSON.stringify(value);
        expect(redact(`users[3].shared_user_id: appears twice for merchant ${id}`)).toBe(`users[3].shared_user_id: appears twice for merchant ${id}`);
        expect(redact(`merchants[12].id: ${id} appears twice`)).toBe(`merchants[12].id: ${id} appears twice`);
        expect(redact(`users[3].first_name: ${secret} is too long`)).toBe('users[3].first_name: the value is too long');
        expect(redact(`line 4: email_address: ${secret}, merchant ${id}`)).toBe(`line 4: email_address: the value, merchant ${id}`);
      }),
    );
  });
});
