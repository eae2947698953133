import { describe, expect, it } from 'vitest';
import { MemoryStorage, createMemoryStorage, SeedError } from '../../../src/storage/memory/index.js';
import { readMemoryStorage } from '../../../src/storage/memory/load.js';
import { MemoryUserIndex } from '../../../src/storage/memory/users.js';
import { storageContract } from '../../suites/storage-contract.js';
import { asRecord, user } from '../../support/seeds.js';
import type { ChangedUserRecord } from '../../../src/storage/contract.js';

storageContract('memory', async (seed, plan) => {
  const storage = plan ? new MemoryStorage({ merchants: seed.merchants, users: MemoryUserIndex.fromSeedUsers(seed.users, plan) }) : new MemoryStorage(seed);
  return {
    storage,
    listWebhookDeliveries: async (options) => storage.listWebhookDeliveries(options),
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
      'merchants[0].keys: must be an array of non-empty strings or key objects',
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

  it("takes a seed user's optional updated_at (any ISO 8601 form), else the load time; a later change is stamped after both", async () => {
    const seed = {
      merchants: [{ id: 'm', status: 'active', keys: ['k'] }],
      users: [user('m', 'given', { updated_at: '2999-01-01T01:00:00.5+01:00' }), user('m', 'loaded')],
    };
    const document = new TextEncoder().encode(JSON.stringify(seed));
    for (const storage of [createMemoryStorage({ seed }), (await readMemoryStorage((async function* () { yield document; })(), 'json')).storage]) {
      const listed = (await storage.listUsers({ merchantId: 'm', filter: {}, order: 'updated_at', limit: 10 })) as ChangedUserRecord[];
      expect(listed.map((u) => [u.shared_user_id, u.updated_at])).toEqual([
        ['loaded', expect.stringMatching(/^20\d\d-/)],
        ['given', '2999-01-01T00:00:00.500000+00:00'],
      ]);
      expect(await storage.getUser('m', 'given')).toEqual(asRecord(user('m', 'given')));
      // The clock never goes back below a stamp it holds: a change now comes after the seed's 2999.
      storage.putUser('m', { ...asRecord(user('m', 'loaded')), city: 'Köln' });
      const after = (await storage.listUsers({ merchantId: 'm', filter: {}, order: 'updated_at', limit: 10 })) as ChangedUserRecord[];
      expect(after.map((u) => u.shared_user_id)).toEqual(['given', 'loaded']);
      expect(after[1]!.updated_at > '2999-01-01T00:00:00.500000+00:00').toBe(true);
    }
    let problems: string[] = [];
    try {
      createMemoryStorage({ seed: { ...seed, users: [user('m', 'bad', { updated_at: 'soon' })] } });
    } catch (error) {
      problems = (error as SeedError).problems;
    }
    expect(problems).toEqual(['users[0].updated_at: not an ISO 8601 timestamp']);
  });

  it('refuses to serve once closed', async () => {
    const storage = new MemoryStorage();
    await storage.close();
    await expect(storage.ping()).rejects.toThrow(/closed/);
  });
});
