/**
 * One merchant holds at most half of a pooled storage's connections
 * (docs/security.md#fair-sharing): its further calls wait in its own queue,
 * so another merchant's call runs at once; past the queue's bound, 429.
 */
import { describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MerchantStorageShare } from '../../src/limits/storage-share.js';
import type { Storage, UserRecord } from '../../src/storage/contract.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { basic } from '../support/api.js';
import { signUrl } from '../../src/signing/index.js';
import { contractSeed } from '../support/seeds.js';
import { sleep } from '../support/sleep.js';

/** The contract seed on a storage of `concurrency` connections whose getUser for m1 waits until released. */
function pooledStorage(concurrency: number) {
  // Started a minute ago: signed at the current time, requests are after its start (it refuses a ts of its start's own second).
  const memory = new MemoryStorage(contractSeed(), { startedAt: Date.now() / 1000 - 60 });
  let running = 0;
  let most = 0;
  const held: (() => void)[] = [];
  const storage: Storage = {
    concurrency,
    getMerchant: (id) => memory.getMerchant(id),
    recordSalt: (record) => memory.recordSalt(record),
    listUsers: (query) => memory.listUsers(query),
    ping: () => memory.ping(),
    listKeys: (merchantId) => memory.listKeys(merchantId),
    close: () => memory.close(),
    async getUser(merchantId, sharedUserId): Promise<UserRecord | undefined> {
      if (merchantId !== 'm1') return memory.getUser(merchantId, sharedUserId);
      running++;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => held.push(resolve));
      running--;
      return memory.getUser(merchantId, sharedUserId);
    },
  };
  return { storage, running: () => running, most: () => most, releaseAll: () => held.splice(0).forEach((release) => release()) };
}

const tick = () => sleep(20);

describe('a merchant share of the storage connections', () => {
  it('runs at most half of the connections for one merchant; another merchant is answered while it waits', async () => {
    const pooled = pooledStorage(4);
    const api = createMerchantApi({ storage: pooled.storage, logger: silentLogger, merchantConcurrency: 100 });
    const flood = Array.from({ length: 10 }, () => api.fetch(new Request('http://x/merchant/users/a-001', { headers: basic('m1', 'key-one') })));
    await tick();
    expect(pooled.running()).toBe(2);

    const other = await api.fetch(new Request('http://x/merchant/users/a-001', { headers: basic('m2', 'key-two') }));
    expect(other.status).toBe(200);
    expect(((await other.json()) as { data: { first_name: string }[] }).data[0]!.first_name).toBe('Same id, other merchant');

    // Released two at a time, every queued call runs, never more than two at once.
    while (pooled.running() > 0) {
      pooled.releaseAll();
      await tick();
    }
    const answers = await Promise.all(flood);
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect(pooled.most()).toBe(2);
  });

  it('without a stated concurrency, keeps no share', async () => {
    const pooled = pooledStorage(4);
    const { concurrency: _, ...unpooled } = pooled.storage;
    const api = createMerchantApi({ storage: unpooled as Storage, logger: silentLogger, merchantConcurrency: 100 });
    const flood = Array.from({ length: 6 }, () => api.fetch(new Request('http://x/merchant/users/a-001', { headers: basic('m1', 'key-one') })));
    await tick();
    expect(pooled.running()).toBe(6);
    pooled.releaseAll();
    await Promise.all(flood);
  });

  it('does not hold back the operations a storage says use no pooled connection (salts on Redis in front of MySQL)', async () => {
    for (const pooledOperations of [undefined, ['getMerchant', 'listUsers', 'getUser', 'ping'] as const]) {
      const pooled = pooledStorage(2);
      const storage: Storage = pooledOperations === undefined ? pooled.storage : { ...pooled.storage, pooledOperations };
      const api = createMerchantApi({ storage, logger: silentLogger, merchantConcurrency: 100, publicUrl: 'http://x' });
      // m1 holds its whole share (one of two connections) with a user read that waits.
      const holding = api.fetch(new Request('http://x/merchant/users/a-001', { headers: basic('m1', 'key-one') }));
      await tick();
      expect(pooled.running()).toBe(1);
      let answered = false;
      const signed = api.fetch(new Request(signUrl('key-one', 'http://x/validatesignature', { cp: 'm1' }))).then((response) => {
        answered = true;
        return response;
      });
      await tick();
      // Without pooledOperations the salt waits for m1's share; with it, it is answered at once.
      expect(answered).toBe(pooledOperations !== undefined);
      pooled.releaseAll();
      expect((await signed).status).toBe(200);
      expect((await holding).status).toBe(200);
    }
  });

  it('refuses with 429 and Retry-After once the merchant queue is full, and gives every slot back', async () => {
    const share = new MerchantStorageShare(2, 3);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const calls = Array.from({ length: 4 }, () => share.run('m', () => gate));
    expect(share.usage('m')).toEqual({ running: 1, waiting: 3 });
    const refused = await share.run('m', async () => undefined).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'too_many_requests', status: 429, retryAfter: 1, policy: { name: 'storage-share', quota: 1 } });
    expect(share.usage('other')).toEqual({ running: 0, waiting: 0 });
    release();
    await Promise.all(calls);
    expect(share.usage('m')).toEqual({ running: 0, waiting: 0 });
  });
});
