/**
 * GET /validatesignature (src/routes/validate-signature.ts) at the edges the outcome table of
 * test/routes/signature.test.ts does not reach: the length limit of cp and salt at exactly 128
 * characters, several problems in one answer, the second look at a merchant whose keys this
 * instance cached before a rotation, and a path with escapes signed with a wrong key.
 */
import { describe, expect, it } from 'vitest';
import { pct, sign } from '../../src/signing/index.js';
import { call, NOW, ORIGIN, signedUrl, testApi } from '../support/api.js';
import { staleMerchantApi } from '../support/stale-merchant.js';

describe('cp and salt: at most 128 characters', () => {
  it('accepts a salt of exactly 128 characters, and looks up a cp of exactly 128', async () => {
    const { api, storage } = testApi();
    expect((await call(api, signedUrl({ salt: 's'.repeat(128) }))).status).toBe(200);
    expect(storage.saltCount).toBe(1);
    expect(await call(api, signedUrl({ cp: 'c'.repeat(128) }))).toMatchObject({ status: 404, text: '{"status":"error","is_valid":false}' });
  });

  it('refuses a cp of 129 characters before looking it up, naming it', async () => {
    const { api } = testApi();
    expect((await call(api, signedUrl({ cp: 'c'.repeat(129) }))).body).toEqual({
      status: 'error',
      message: 'Invalid parameter: cp longer than 128 characters.',
      is_valid: false,
    });
  });

  it('names every problem in one message: missing, too long (both), but not a value of exactly 128', async () => {
    const { api } = testApi();
    const withoutTs = (url: string) => url.replace(/&ts=\d+/, '');
    expect((await call(api, withoutTs(signedUrl({ cp: 'c'.repeat(129), salt: 's'.repeat(129) })))).body.message).toBe(
      'Missing required parameter: ts. Invalid parameter: cp, salt longer than 128 characters.',
    );
    expect((await call(api, withoutTs(signedUrl({ cp: 'c'.repeat(128), salt: 's'.repeat(128) })))).body.message).toBe('Missing required parameter: ts.');
  });
});

// held: the stale copy comes from the storage's synchronous cachedMerchant (no promise for the first read); else from getMerchant.
describe.each([false, true])('a merchant whose keys this instance cached before a rotation (held in memory: %s)', (held) => {
  // The first read of each request: synchronous when held, else a getMerchant.
  const first = held ? 'held' : 'cached';
  it('accepts a signature under a key added since, after reading the merchant again once', async () => {
    const { api, lookups } = staleMerchantApi((merchant) => merchant, { held });
    expect((await call(api, signedUrl())).status).toBe(200);
    expect(lookups).toEqual([first, 'refresh']);
    expect((await call(api, signedUrl({ key: 'key-old' }))).status).toBe(200);
    expect(lookups).toEqual([first, 'refresh', first]);
  });

  it('refuses it when the merchant read again is disabled, or gone', async () => {
    const disabled = staleMerchantApi((merchant) => merchant && { ...merchant, status: 'disabled' }, { held });
    expect((await call(disabled.api, signedUrl())).body).toEqual({ status: 'error', message: 'Signature does not match.', is_valid: false });
    const gone = staleMerchantApi(() => undefined, { held });
    expect((await call(gone.api, signedUrl())).body).toEqual({ status: 'error', message: 'Signature does not match.', is_valid: false });
  });
});

describe('a path with escapes', () => {
  it('refuses a wrong signature, whichever form of the path it covers', async () => {
    const { api } = testApi({ basePath: '/ąpi' });
    const encodedPath = '/%C4%85pi/validatesignature';
    for (const signedPath of ['/ąpi/validatesignature', encodedPath]) {
      const pairs: [string, string][] = [['cp', 'm1'], ['ts', String(NOW)], ['salt', `w-${signedPath.length}`]];
      const hmac = sign('not-the-key', { method: 'GET', url: ORIGIN + signedPath, params: pairs });
      const query = [...pairs, ['hmac', hmac]].map(([k, v]) => `${k}=${pct(v!)}`).join('&');
      expect((await call(api, `${ORIGIN}${encodedPath}?${query}`)).body).toMatchObject({ message: 'Signature does not match.' });
    }
  });
});
