import { describe, expect, it } from 'vitest';
import { MemoryStorage, createMemoryStorage, SeedError } from '../../src/storage/memory/index.js';
import { MemoryUserIndex } from '../../src/storage/memory/users.js';
import { storageContract } from '../suites/storage-contract.js';
import { user } from '../support/seeds.js';

storageContract('memory', async (seed, plan) => {
  const storage = plan ? new MemoryStorage({ merchants: seed.merchants, users: MemoryUserIndex.fromSeedUsers(seed.users, plan) }) : new MemoryStorage(seed);
  return {
    storage,
    async add({ merchants, users }) {
      for (const merchant of merchants) storage.putMerchant(merchant);
      for (const { merchant_id, ...record } of users) storage.putUser(merchant_id, record);
    },
  };
});

describe('memory storage specifics', () => {
  it('forgets expired salts, so memory stays bounded', async () => {
    const storage = new MemoryStorage();
    for (let i = 0; i < 1000; i++) await storage.recordSalt({ merchantId: 'm', salt: `s${i}`, expiresAt: 100 + (i % 10), now: 100 });
    expect(storage.saltCount).toBe(1000);
    await storage.recordSalt({ merchantId: 'm', salt: 'later', expiresAt: 500, now: 110 });
    expect(storage.saltCount).toBe(1);
  });

  it('validates a seed and names every problem with its place', () => {
    expect(() => createMemoryStorage({ seed: { merchants: [{ id: 'm', keys: [] }], users: [{ ...user('x', 'u'), date_joined: 'yesterday' }] } })).toThrowError(SeedError);
    let problems: string[] = [];
    try {
      createMemoryStorage({ seed: { merchants: [{ id: 'm', keys: 'k' }], users: [{ ...user('x', 'u'), date_joined: 'yesterday', extra: 1 }] } });
    } catch (error) {
      problems = (error as SeedError).problems;
    }
    expect(problems).toEqual([
      'merchants[0].keys: must be an array of non-empty strings',
      'users[0].date_joined: not an ISO 8601 timestamp',
      'users[0].extra: unknown field',
    ]);
  });

  it('normalises seed timestamps to UTC with six digits and codes to lower case', async () => {
    const storage = createMemoryStorage({
      seed: {
        merchants: [{ id: 'm', status: 'active', keys: ['k'] }],
        users: [user('m', 'u', { date_joined: '2019-12-12T13:19:17.19+01:00', country: 'DE', preferred_language: 'EN' })],
      },
    });
    expect(await storage.getUser('m', 'u')).toMatchObject({ date_joined: '2019-12-12T12:19:17.190000+00:00', country: 'de', preferred_language: 'en' });
  });

  it('refuses to serve once closed', async () => {
    const storage = new MemoryStorage();
    await storage.close();
    await expect(storage.ping()).rejects.toThrow(/closed/);
  });
});
