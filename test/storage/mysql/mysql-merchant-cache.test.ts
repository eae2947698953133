/** The MySQL storage's in-process merchant cache: known merchants and unknown ids alike, bounded. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MerchantCache, REFRESH_INTERVAL_MS } from '../../../src/storage/sql/merchant-cache.js';

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

  it('re-reads a merchant on refresh at once, then at most once per second however many wrong keys ask', async () => {
    let clock = 0;
    let loads = 0;
    let keys = ['old'];
    const load = async () => {
      loads++;
      return { id: 'shop', status: 'active' as const, keys: [...keys] };
    };
    const cache = new MerchantCache(300_000, () => clock);
    expect((await cache.get('shop', load))!.keys).toEqual(['old']);
    keys = ['new'];
    // A rotation elsewhere: the cached copy is stale, the first refresh reads the new key.
    expect((await cache.get('shop', load))!.keys).toEqual(['old']);
    expect((await cache.refresh('shop', load))!.keys).toEqual(['new']);
    expect(loads).toBe(2);
    // A flood of wrong keys within the second: no further read.
    await Promise.all(Array.from({ length: 200 }, () => cache.refresh('shop', load)));
    expect(loads).toBe(2);
    clock += REFRESH_INTERVAL_MS;
    await cache.refresh('shop', load);
    expect(loads).toBe(3);
  });

  it('answers a refresh from the copy it holds when the database fails, so a wrong key stays a 401, not a 503', async () => {
    const cache = new MerchantCache(300_000, () => 0);
    await cache.get('shop', async () => ({ id: 'shop', status: 'active', keys: ['k'] }));
    expect(await cache.refresh('shop', () => Promise.reject(new Error('MySQL is down')))).toEqual({ id: 'shop', status: 'active', keys: ['k'] });
    expect(await cache.get('shop', () => Promise.reject(new Error('not asked again')))).toEqual({ id: 'shop', status: 'active', keys: ['k'] });
    await expect(new MerchantCache(300_000).refresh('other', () => Promise.reject(new Error('MySQL is down')))).rejects.toThrow('MySQL is down');
  });

  it('for any timing of refreshes, reads at most one per merchant per interval', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.integer({ min: 0, max: 400 }), fc.constantFrom('a', 'b')), { maxLength: 60 }), async (steps) => {
        let clock = 0;
        const reads: Record<string, number[]> = { a: [], b: [] };
        const cache = new MerchantCache(300_000, () => clock);
        for (const [advance, id] of steps) {
          clock += advance;
          await cache.refresh(id, async () => {
            reads[id]!.push(clock);
            return { id, status: 'active', keys: [] };
          });
        }
        for (const times of Object.values(reads)) for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(REFRESH_INTERVAL_MS);
      }),
    );
  });
});
