/**
 * The list of every merchant id that lets the MySQL storage answer a new
 * unknown id without a query (src/storage/sql/merchant-directory.ts):
 * trusted for ttlMs after the read began, read again by the first lookup
 * after that (the database answers meanwhile), dropped when a change is
 * made through this process, not kept above maxIds, and never trusted
 * after a failed read.
 */
import { describe, expect, it } from 'vitest';
import { MerchantDirectory } from '../../../src/storage/sql/merchant-directory.js';

function directory(ids: string[], options: { maxIds?: number } = {}) {
  let time = 0;
  let reads = 0;
  let fail = false;
  const list = new MerchantDirectory({
    ttlMs: 1000,
    maxIds: options.maxIds,
    clock: () => time,
    readIds: async (limit) => {
      reads++;
      if (fail) throw new Error('connection refused');
      return ids.slice(0, limit);
    },
  });
  return {
    list,
    ids,
    advance: (ms: number) => (time += ms),
    reads: () => reads,
    failReads: (value: boolean) => (fail = value),
    settled: async () => void (await list.reading),
  };
}

describe('MerchantDirectory', () => {
  it('answers "may exist" until the first read is done, then knows every unknown id without a read', async () => {
    const d = directory(['shop', 'other']);
    expect(d.list.mayExist('guess-1')).toBe(true);
    await d.settled();
    expect(d.reads()).toBe(1);
    for (let i = 0; i < 1000; i++) expect(d.list.mayExist(`guess-${i}`)).toBe(false);
    expect(d.list.mayExist('shop')).toBe(true);
    expect(d.list.mayExist('Shop')).toBe(false);
    expect(d.reads()).toBe(1);
  });

  it('reads again once the list is older than ttlMs, and sees a merchant added meanwhile', async () => {
    const d = directory(['shop']);
    d.list.mayExist('x');
    await d.settled();
    d.ids.push('new-shop');
    d.advance(999);
    expect(d.list.mayExist('new-shop')).toBe(false);
    d.advance(2);
    // Stale: the database answers while the list is read again.
    expect(d.list.mayExist('new-shop')).toBe(true);
    expect(d.list.mayExist('guess')).toBe(true);
    await d.settled();
    expect(d.reads()).toBe(2);
    expect(d.list.mayExist('new-shop')).toBe(true);
    expect(d.list.mayExist('guess')).toBe(false);
  });

  it('trusts no list after a change through this process, nor one read before it', async () => {
    const d = directory(['shop']);
    d.list.mayExist('x');
    d.ids.push('added-here');
    d.list.invalidate();
    await d.settled();
    expect(d.list.size).toBeUndefined();
    expect(d.list.mayExist('added-here')).toBe(true);
    await d.settled();
    expect(d.list.mayExist('added-here')).toBe(true);
    expect(d.list.mayExist('guess')).toBe(false);
  });

  it('keeps no list above maxIds, and asks again only after ttlMs', async () => {
    const d = directory(['a', 'b', 'c'], { maxIds: 2 });
    d.list.mayExist('x');
    await d.settled();
    expect(d.list.size).toBeUndefined();
    expect(d.list.mayExist('guess')).toBe(true);
    expect(d.reads()).toBe(1);
    d.advance(1001);
    d.list.mayExist('guess');
    await d.settled();
    expect(d.reads()).toBe(2);
  });

  it('answers "may exist" while reads fail, one read at a time', async () => {
    const d = directory(['shop']);
    d.failReads(true);
    expect(d.list.mayExist('guess')).toBe(true);
    expect(d.list.mayExist('guess')).toBe(true);
    await d.settled();
    expect(d.reads()).toBe(1);
    expect(d.list.mayExist('guess')).toBe(true);
    d.failReads(false);
    await d.settled();
    d.list.mayExist('guess');
    await d.settled();
    expect(d.list.mayExist('guess')).toBe(false);
  });

  it('keeps no list with a TTL of 0', async () => {
    const d = directory(['shop']);
    const off = new MerchantDirectory({ ttlMs: 0, readIds: async () => ['shop'] });
    expect(off.mayExist('guess')).toBe(true);
    expect(off.reading).toBeUndefined();
    expect(d.reads()).toBe(0);
  });
});
