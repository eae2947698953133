/** The MySQL storage's in-process merchant cache: known merchants and unknown ids alike, bounded. */
import { describe, expect, it } from 'vitest';
import { MerchantCache } from '../../src/storage/mysql/merchants/merchant-cache.js';

describe('MerchantCache', () => {
  it('caches an unknown id as absent for the TTL: guessing ids costs no query', async () => {
    let clock = 0;
    let loads = 0;
    const cache = new MerchantCache(1000, () => clock);
    const nobody = async () => {
      loads++;
      return undefined;
    };
    for (let i = 0; i < 5; i++) expect(await cache.get('guess', nobody)).toBeUndefined();
    expect(loads).toBe(1);
    clock = 1000;
    const added = async () => ({ id: 'guess', status: 'active' as const, keys: ['k'] });
    expect(await cache.get('guess', added)).toEqual({ id: 'guess', status: 'active', keys: ['k'] });
    cache.invalidate('guess');
    expect(await cache.get('guess', nobody)).toBeUndefined();
    cache.invalidate();
    expect(await cache.get('guess', added)).toBeDefined();
  });

  it('stays bounded whatever ids callers make up', async () => {
    const cache = new MerchantCache(60_000);
    for (let i = 0; i < 25_000; i++) await cache.get(`invented-${i}`, async () => undefined);
    expect(cache.size.absent).toBe(10_000);
    expect(cache.size.merchants).toBe(0);
  });
});
