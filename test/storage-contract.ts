/**
 * The storage contract (docs/protocol.md#storage-and-secrets), written once and run against every
 * implementation: `test/storage-memory.test.ts`, `test/storage-mysql.test.ts`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Storage } from '../src/storage.js';
import type { Seed } from '../src/storage/seed.js';
import { contractSeed, M1_ORDER } from './support/fixtures.js';

export interface StorageUnderTest {
  storage: Storage;
  /** Releases what the test created (a database, a pool). */
  cleanup?: () => Promise<void>;
}

export function storageContract(name: string, create: (seed: Seed) => Promise<StorageUnderTest>): void {
  describe(`storage contract: ${name}`, () => {
    let subject: StorageUnderTest;
    let storage: Storage;
    const seed = contractSeed();
    const now = 1_700_000_000;

    beforeAll(async () => {
      subject = await create(seed);
      storage = subject.storage;
    });
    afterAll(async () => {
      await storage?.close();
      await subject?.cleanup?.();
    });

    it('returns a merchant with its status and active keys', async () => {
      expect(await storage.getMerchant('m1')).toEqual({ id: 'm1', status: 'active', keys: expect.arrayContaining(['key-one', 'key-one-rotated']) });
      expect((await storage.getMerchant('m1'))!.keys).toHaveLength(2);
      expect(await storage.getMerchant('off')).toMatchObject({ id: 'off', status: 'disabled' });
    });

    it('treats merchant ids as case-sensitive and unknown ids as absent', async () => {
      expect((await storage.getMerchant('M1'))!.keys).toEqual(['case-differs']);
      expect(await storage.getMerchant('m3')).toBeUndefined();
      expect(await storage.getMerchant('')).toBeUndefined();
    });

    it('records a salt once per merchant and reports the replay', async () => {
      expect(await storage.recordSalt({ merchantId: 'm1', salt: 'salt-1', expiresAt: now + 300, now })).toBe(true);
      expect(await storage.recordSalt({ merchantId: 'm1', salt: 'salt-1', expiresAt: now + 300, now })).toBe(false);
      expect(await storage.recordSalt({ merchantId: 'm2', salt: 'salt-1', expiresAt: now + 300, now })).toBe(true);
    });

    it('compares salts case-sensitively', async () => {
      expect(await storage.recordSalt({ merchantId: 'm1', salt: 'CaseTest-AbC', expiresAt: now + 300, now })).toBe(true);
      expect(await storage.recordSalt({ merchantId: 'm1', salt: 'casetest-abc', expiresAt: now + 300, now })).toBe(true);
    });

    it('keeps a 128-character salt whole: a longer twin is not a replay of it', async () => {
      const salt = 's'.repeat(128);
      expect(await storage.recordSalt({ merchantId: 'm1', salt, expiresAt: now + 300, now })).toBe(true);
      expect(await storage.recordSalt({ merchantId: 'm1', salt: `${salt.slice(0, 127)}t`, expiresAt: now + 300, now })).toBe(true);
      expect(await storage.recordSalt({ merchantId: 'm1', salt, expiresAt: now + 300, now })).toBe(false);
    });

    it('treats a trailing space as significant in merchant ids, user ids and salts', async () => {
      // MySQL's PAD SPACE collations (utf8mb4_bin too) would call 'm1 ' equal to 'm1'.
      expect(await storage.getMerchant('m1 ')).toBeUndefined();
      expect(await storage.getUser('m1', 'a-001 ')).toBeUndefined();
      expect(await storage.listUsers({ merchantId: 'm1 ', filter: {}, limit: 10 })).toEqual([]);
      expect(await storage.recordSalt({ merchantId: 'm1', salt: 'pad', expiresAt: now + 300, now })).toBe(true);
      expect(await storage.recordSalt({ merchantId: 'm1', salt: 'pad ', expiresAt: now + 300, now })).toBe(true);
      const page = await storage.listUsers({ merchantId: 'm1', filter: {}, after: 'a-001 ', limit: 1 });
      expect(page.map((u) => u.shared_user_id)).toEqual(['b-003']);
    });

    it('accepts a salt again once its record expired', async () => {
      expect(await storage.recordSalt({ merchantId: 'm1', salt: 'old', expiresAt: now + 10, now })).toBe(true);
      expect(await storage.recordSalt({ merchantId: 'm1', salt: 'old', expiresAt: now + 20, now: now + 10 })).toBe(false);
      expect(await storage.recordSalt({ merchantId: 'm1', salt: 'old', expiresAt: now + 400, now: now + 11 })).toBe(true);
      expect(await storage.recordSalt({ merchantId: 'm1', salt: 'old', expiresAt: now + 400, now: now + 12 })).toBe(false);
    });

    it('lets exactly one of concurrent recordings of one salt win', async () => {
      for (let trial = 0; trial < 20; trial++) {
        const results = await Promise.all(
          [0, 1, 2, 3].map(() => storage.recordSalt({ merchantId: 'm1', salt: `race-${trial}`, expiresAt: now + 300, now })),
        );
        expect(results.filter(Boolean)).toHaveLength(1);
      }
    });

    it('lists a merchant\'s users in code-point order of shared_user_id', async () => {
      const page = await storage.listUsers({ merchantId: 'm1', filter: {}, limit: 100 });
      expect(page.map((u) => u.shared_user_id)).toEqual(M1_ORDER);
    });

    it('pages by keyset: every user exactly once whatever the page size', async () => {
      for (const limit of [1, 2, 3, 7]) {
        const ids: string[] = [];
        let after: string | undefined;
        for (;;) {
          const page = await storage.listUsers({ merchantId: 'm1', filter: {}, after, limit });
          expect(page.length).toBeLessThanOrEqual(limit);
          ids.push(...page.map((u) => u.shared_user_id));
          if (page.length < limit) break;
          after = page.at(-1)!.shared_user_id;
        }
        expect(ids).toEqual(M1_ORDER);
      }
    });

    it('starts strictly after a keyset position that is not itself an id', async () => {
      const page = await storage.listUsers({ merchantId: 'm1', filter: {}, after: 'a', limit: 2 });
      expect(page.map((u) => u.shared_user_id)).toEqual(['a-001', 'b-003']);
    });

    it('filters by active and deactivated', async () => {
      const active = await storage.listUsers({ merchantId: 'm1', filter: { active: true }, limit: 100 });
      expect(active.map((u) => u.shared_user_id)).toEqual(M1_ORDER.filter((id) => id !== 'B-002' && id !== '😀-emoji'));
      const inactive = await storage.listUsers({ merchantId: 'm1', filter: { active: false }, limit: 100 });
      expect(inactive.map((u) => u.shared_user_id)).toEqual(['B-002', '😀-emoji']);
    });

    it('bounds date_joined exclusively on both sides, to the microsecond', async () => {
      const page = await storage.listUsers({
        merchantId: 'm1',
        filter: { joinedAfter: '2020-01-01T00:00:00.000001+00:00', joinedBefore: '2020-01-04T00:00:00.500000+00:00' },
        limit: 100,
      });
      expect(page.map((u) => u.shared_user_id)).toEqual(['B-002', 'b-003']);
      const combined = await storage.listUsers({
        merchantId: 'm1',
        filter: { active: true, joinedAfter: '2020-01-01T00:00:00.000000+00:00', joinedBefore: '2020-01-05T00:00:00.000000+00:00' },
        limit: 1,
        after: 'a-001',
      });
      expect(combined.map((u) => u.shared_user_id)).toEqual(['b-003']);
    });

    it('takes bounds at the ends of the range: year 0000 and 9999', async () => {
      const ids = async (filter: { joinedAfter?: string; joinedBefore?: string }) =>
        (await storage.listUsers({ merchantId: 'm1', filter, limit: 100 })).map((u) => u.shared_user_id);
      expect(await ids({ joinedAfter: '0000-01-01T00:00:00.000000+00:00' })).toEqual(M1_ORDER);
      expect(await ids({ joinedBefore: '0000-01-01T00:00:00.000000+00:00' })).toEqual([]);
      expect(await ids({ joinedBefore: '9999-12-31T23:59:59.999999+00:00' })).toEqual(M1_ORDER);
      expect(await ids({ joinedAfter: '9999-12-31T23:59:59.999999+00:00' })).toEqual([]);
    });

    it('returns every key of a record exactly, microseconds and Unicode included', async () => {
      const expected = seed.users.find((u) => u.merchant_id === 'm1' && u.shared_user_id === 'b-003')!;
      const { merchant_id: _, ...record } = expected;
      expect(await storage.getUser('m1', 'b-003')).toEqual(record);
      const page = await storage.listUsers({ merchantId: 'm1', filter: {}, after: 'B-002', limit: 1 });
      expect(page).toEqual([{ ...record, shared_user_id: 'a-001', first_name: 'Ada', city: 'Berlin', state: null, email_address: 'a-001@example.com', date_joined: '2020-01-01T00:00:00.000001+00:00' }]);
      expect(Object.keys(page[0]!)).toHaveLength(14);
    });

    it('keeps tenants apart: a user shared with another merchant is not found', async () => {
      expect(await storage.getUser('m1', 'other-id-for-shared')).toBeUndefined();
      expect(await storage.getUser('m2', 'shared')).toBeUndefined();
      expect(await storage.getUser('m1', 'A-001')).toBeUndefined();
      expect(await storage.getUser('m3', 'a-001')).toBeUndefined();
      expect((await storage.getUser('m2', 'a-001'))!.first_name).toBe('Same id, other merchant');
      expect((await storage.getUser('m1', 'shared'))!.first_name).toBe('Shared-as-m1');
      expect((await storage.getUser('m2', 'other-id-for-shared'))!.first_name).toBe('Shared-as-m2');
      expect(await storage.listUsers({ merchantId: 'off', filter: {}, limit: 10 })).toEqual([]);
      expect(await storage.listUsers({ merchantId: 'nobody', filter: {}, limit: 10 })).toEqual([]);
    });

    it('answers ping while reachable', async () => {
      await expect(storage.ping()).resolves.toBeUndefined();
    });
  });
}
