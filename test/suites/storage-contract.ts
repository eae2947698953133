/**
 * The storage contract (docs/protocol.md#storage-and-secrets), written once and run against every
 * implementation: `test/storage/memory/memory.test.ts`, `test/storage/mysql/mysql.test.ts`.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { MAX_TEST_CHANGES } from '../../src/storage/test-changes.js';
import { compareCodePoints } from '../../src/storage/order.js';
import { MAX_ACTIVE_KEYS } from '../../src/storage/key-changes.js';
import type { NewMerchantKey } from '../../src/storage/contract.js';
import type { KeyScope } from '../../src/storage/key-limits.js';
import type { ChangedUserRecord, Storage, UserFilter, UserOrder, UserRecord, UserRecordPage } from '../../src/storage/contract.js';
import { formatEpochSeconds } from '../../src/storage/timestamps.js';
import type { Seed, SeedUser } from '../../src/storage/seed/seed.js';
import type { PagePlan } from '../../src/storage/user-pages.js';
import { contractSeed, KEYED_FUTURE, M1_ORDER, user } from '../support/seeds.js';

export interface StorageUnderTest {
  storage: Storage;
  /** Releases what the test created (a database, a pool). */
  cleanup?: () => Promise<void>;
  /** Adds the merchants and users of `seed` (new merchants; a user already there is replaced). */
  add?: (seed: Seed) => Promise<void>;
  /**
   * The storage forgets a salt by its own clock, `expiresAt - now` seconds after recording it (Redis
   * key expiry), rather than by the `now` it is given: its expiry is checked in real time.
   */
  realTimeSaltExpiry?: boolean;
  /**
   * Shares the record `from` names with another merchant too, as `to`: one record, two shares, as
   * MySQL keeps one `users` row for a person several merchants see. Absent where a storage keeps
   * every merchant's records apart (memory): there a write for one merchant changes no other's.
   */
  share?: (from: { merchantId: string; sharedUserId: string }, to: { merchantId: string; sharedUserId: string }) => Promise<void>;
  /**
   * The storage's list of webhook deliveries (the memory storage's `listWebhookDeliveries`, MySQL's
   * function of the same name that `webhook deliveries` prints), where it has one: not an operation
   * of `Storage`, but its filter by merchant is what keeps one merchant's deliveries from another's.
   */
  listWebhookDeliveries?: (options: { merchantId?: string; endpointId?: string }) => Promise<Array<{ merchantId: string; endpointId: string; eventId: string }>>;
}

/** Small bounds, so that a few users cross every boundary of the plan (src/storage/user-pages.ts). */
export const SMALL_PLAN: PagePlan = { seekLimit: 3, scanBudget: 5 };

export function storageContract(name: string, create: (seed: Seed, plan?: PagePlan) => Promise<StorageUnderTest>): void {
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
      expect(await storage.getMerchant('m1')).toMatchObject({ id: 'm1', status: 'active', keys: expect.arrayContaining(['key-one', 'key-one-rotated']) });
      expect((await storage.getMerchant('m1'))!.keys).toHaveLength(2);
      expect(await storage.getMerchant('off')).toMatchObject({ id: 'off', status: 'disabled' });
    });

    describe('webhook endpoints (the optional operations, where the storage has them)', () => {
      // The memory and MySQL storages have them; a storage without them is answered 501 by the guard.
      const has = () => storage.addWebhookEndpoint !== undefined;
      const add = (merchantId: string, url: string, maxPerMerchant = 10) => storage.addWebhookEndpoint!({ merchantId, url, events: ['user.updated', 'user.shared'], maxPerMerchant });

      it('adds an endpoint with its secret, shown once, and lists it oldest first without the secret', async (ctx) => {
        if (!has()) return ctx.skip();
        expect(await storage.listWebhookEndpoints!('M1')).toEqual([]);
        const first = await add('M1', 'https://hooks.example.com/first');
        expect(first).toEqual({
          id: expect.stringMatching(/^we_[A-Za-z0-9_-]{22}$/),
          merchantId: 'M1',
          url: 'https://hooks.example.com/first',
          events: ['user.updated', 'user.shared'],
          status: 'enabled',
          disabledReason: null,
          createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/),
          secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
        });
        const second = await add('M1', 'https://hooks.example.com/second');
        expect(second.secret).not.toBe(first.secret);
        const { secret: _first, ...firstListed } = first;
        const { secret: _second, ...secondListed } = second;
        expect(await storage.listWebhookEndpoints!('M1')).toEqual([firstListed, secondListed]);
        // Ids compare by case: m1 is another merchant.
        expect(await storage.listWebhookEndpoints!('m1')).toEqual([]);
        for (const endpoint of [first, second]) expect(await storage.removeWebhookEndpoint!('M1', endpoint.id)).toBe(true);
      });

      it('holds a merchant to maxPerMerchant: one more is 409 conflict', async (ctx) => {
        if (!has()) return ctx.skip();
        const added = [await add('m2', 'https://hooks.example.com/1', 2), await add('m2', 'https://hooks.example.com/2', 2)];
        await expect(add('m2', 'https://hooks.example.com/3', 2)).rejects.toMatchObject({ code: 'conflict', status: 409 });
        expect(await storage.listWebhookEndpoints!('m2')).toHaveLength(2);
        for (const endpoint of added) await storage.removeWebhookEndpoint!('m2', endpoint.id);
      });

      it('acts only on the merchant\'s own endpoints: another merchant\'s is not found, as one that does not exist', async (ctx) => {
        if (!has()) return ctx.skip();
        const own = await add('m2', 'https://hooks.example.com/own');
        for (const id of [own.id, 'we_AAAAAAAAAAAAAAAAAAAAAA']) {
          expect(await storage.removeWebhookEndpoint!('M1', id)).toBe(false);
          expect(await storage.rotateWebhookSecret!('M1', id, 0)).toBeUndefined();
          expect(await storage.sendWebhookTest!('M1', id)).toBeUndefined();
        }
        expect((await storage.listWebhookEndpoints!('m2')).map((e) => e.id)).toEqual([own.id]);
        expect(await storage.sendWebhookTest!('m2', own.id)).toMatch(/^evt_[0-9a-f]{18}[A-Za-z0-9_-]{24}$/);
        const rotated = await storage.rotateWebhookSecret!('m2', own.id, 3_600_000);
        expect(rotated!.secret).toMatch(/^whsec_/);
        expect(rotated!.secret).not.toBe(own.secret);
        expect(Math.abs(Date.parse(rotated!.oldExpiresAt!) - Date.now() - 3_600_000)).toBeLessThan(120_000);
        expect((await storage.rotateWebhookSecret!('m2', own.id, 0))!.oldExpiresAt).toBeNull();
        expect(await storage.removeWebhookEndpoint!('m2', own.id)).toBe(true);
        expect(await storage.removeWebhookEndpoint!('m2', own.id)).toBe(false);
        expect(await storage.listWebhookEndpoints!('m2')).toEqual([]);
      });

      it('acts on one mode\'s endpoints: a test endpoint is not found in the live mode (the default), a live one not in the test mode; each mode has its own limit', async (ctx) => {
        if (!has()) return ctx.skip();
        const live = await add('m2', 'https://hooks.example.com/live', 1);
        const test = await storage.addWebhookEndpoint!({ merchantId: 'm2', url: 'https://hooks.example.com/test', events: ['user.shared'], maxPerMerchant: 1, mode: 'test' });
        expect((await storage.listWebhookEndpoints!('m2')).map((e) => e.id)).toEqual([live.id]);
        expect((await storage.listWebhookEndpoints!('m2', 'live')).map((e) => e.id)).toEqual([live.id]);
        expect((await storage.listWebhookEndpoints!('m2', 'test')).map((e) => e.id)).toEqual([test.id]);
        for (const [id, mode] of [
          [test.id, 'live'],
          [live.id, 'test'],
        ] as const) {
          expect(await storage.sendWebhookTest!('m2', id, mode)).toBeUndefined();
          expect(await storage.rotateWebhookSecret!('m2', id, 0, { mode })).toBeUndefined();
          expect(await storage.listEndpointDeliveries!({ merchantId: 'm2', endpointId: id, limit: 10, mode })).toBeUndefined();
          expect(await storage.redeliverEndpointDeliveries!({ merchantId: 'm2', endpointId: id, target: { eventId: 'evt_none' }, max: 10, mode })).toBeUndefined();
          expect(await storage.removeWebhookEndpoint!('m2', id, { mode })).toBe(false);
        }
        // Without a mode, the live one: a test endpoint is not found.
        expect(await storage.sendWebhookTest!('m2', test.id)).toBeUndefined();
        expect(await storage.removeWebhookEndpoint!('m2', test.id)).toBe(false);
        expect(await storage.sendWebhookTest!('m2', test.id, 'test')).toMatch(/^evt_/);
        expect(await storage.removeWebhookEndpoint!('m2', test.id, { mode: 'test' })).toBe(true);
        expect(await storage.removeWebhookEndpoint!('m2', live.id)).toBe(true);
        expect(await storage.listWebhookEndpoints!('m2', 'test')).toEqual([]);
      });

      it('lists webhook deliveries by merchant: the filter holds only that merchant\'s, ids compared by case', async (ctx) => {
        if (!has() || subject.listWebhookDeliveries === undefined) return ctx.skip();
        const ofM1 = await add('M1', 'https://hooks.example.com/deliveries-M1');
        const ofM2 = await add('m2', 'https://hooks.example.com/deliveries-m2');
        const eventOfM1 = await storage.sendWebhookTest!('M1', ofM1.id);
        const eventOfM2 = await storage.sendWebhookTest!('m2', ofM2.id);
        const of = async (merchantId: string) => (await subject.listWebhookDeliveries!({ merchantId })).map((d) => [d.merchantId, d.endpointId, d.eventId]);
        expect(await of('M1')).toEqual([['M1', ofM1.id, eventOfM1]]);
        expect(await of('m2')).toEqual([['m2', ofM2.id, eventOfM2]]);
        expect(await of('m1')).toEqual([]);
        // Without the filter: both, newest first.
        expect((await subject.listWebhookDeliveries({})).map((d) => d.eventId)).toEqual([eventOfM2, eventOfM1]);
        for (const [merchantId, endpoint] of [['M1', ofM1], ['m2', ofM2]] as const) await storage.removeWebhookEndpoint!(merchantId, endpoint.id);
      });

      it("pages an endpoint's deliveries newest first and redelivers them, the merchant's own only: another merchant's (ids by case) is not found", async (ctx) => {
        if (!has()) return ctx.skip();
        const own = await add('M1', 'https://hooks.example.com/pages');
        const events: string[] = [];
        for (let i = 0; i < 3; i++) events.push((await storage.sendWebhookTest!('M1', own.id))!);
        const first = await storage.listEndpointDeliveries!({ merchantId: 'M1', endpointId: own.id, limit: 2 });
        expect(first!.items.map((d) => d.eventId)).toEqual([events[2], events[1]]);
        expect(first!.next).toEqual({ createdAt: first!.items[1]!.createdAt, id: first!.items[1]!.id });
        const second = await storage.listEndpointDeliveries!({ merchantId: 'M1', endpointId: own.id, limit: 2, after: first!.next! });
        expect(second).toEqual({
          items: [{ id: expect.stringMatching(/^\d+$/), eventId: events[0], endpointId: own.id, merchantId: 'M1', type: 'webhook.test', state: 'pending', attempts: 0, nextAttemptAt: expect.stringMatching(/\+00:00$/), lastAttemptAt: null, lastStatus: null, lastError: null, createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/) }],
          next: null,
        });
        expect(await storage.listEndpointDeliveries!({ merchantId: 'M1', endpointId: own.id, limit: 10, state: 'delivered' })).toEqual({ items: [], next: null });
        for (const [merchantId, endpointId] of [['m1', own.id], ['M1', 'we_AAAAAAAAAAAAAAAAAAAAAA']]) {
          expect(await storage.listEndpointDeliveries!({ merchantId: merchantId!, endpointId: endpointId!, limit: 10 })).toBeUndefined();
          expect(await storage.redeliverEndpointDeliveries!({ merchantId: merchantId!, endpointId: endpointId!, target: { eventId: events[0]! }, max: 10 })).toBeUndefined();
        }
        expect(await storage.redeliverEndpointDeliveries!({ merchantId: 'M1', endpointId: own.id, target: { eventId: events[0]! }, max: 10 })).toEqual({ matched: 1, queued: 1, next: null });
        expect(await storage.redeliverEndpointDeliveries!({ merchantId: 'M1', endpointId: own.id, target: { eventId: 'evt_none' }, max: 10 })).toEqual({ matched: 0, queued: 0, next: null });
        expect(await storage.removeWebhookEndpoint!('M1', own.id)).toBe(true);
      });

      it('bounds test events per endpoint: a burst of 10, then 429 too_many_requests with retryAfter; another endpoint has its own', async (ctx) => {
        if (!has()) return ctx.skip();
        const busy = await add('m2', 'https://hooks.example.com/busy');
        const other = await add('m2', 'https://hooks.example.com/other');
        for (let i = 0; i < 10; i++) expect(await storage.sendWebhookTest!('m2', busy.id)).toMatch(/^evt_/);
        const refused = await storage.sendWebhookTest!('m2', busy.id).catch((error: unknown) => error);
        expect(refused).toMatchObject({ code: 'too_many_requests', status: 429, policy: { name: 'webhook_tests', quota: 10, window: 60 } });
        expect((refused as { retryAfter: number }).retryAfter).toBeGreaterThanOrEqual(1);
        expect((refused as { retryAfter: number }).retryAfter).toBeLessThanOrEqual(6);
        expect(await storage.sendWebhookTest!('m2', other.id)).toMatch(/^evt_/);
        for (const endpoint of [busy, other]) await storage.removeWebhookEndpoint!('m2', endpoint.id);
      });

      it('refuses a rotation with an overlap while an earlier overlap runs (409 naming its end); one without is taken', async (ctx) => {
        if (!has()) return ctx.skip();
        const endpoint = await add('m2', 'https://hooks.example.com/rotating');
        const first = await storage.rotateWebhookSecret!('m2', endpoint.id, 3_600_000);
        const refused = await storage.rotateWebhookSecret!('m2', endpoint.id, 60_000).catch((error: unknown) => error);
        expect(refused).toMatchObject({ code: 'conflict', status: 409 });
        expect((refused as Error).message).toContain(`signs until ${first!.oldExpiresAt}`);
        const now = await storage.rotateWebhookSecret!('m2', endpoint.id, 0);
        expect(now).toEqual({ secret: expect.stringMatching(/^whsec_/), oldExpiresAt: null });
        // Still running: the first overlap was left to its end.
        await expect(storage.rotateWebhookSecret!('m2', endpoint.id, 60_000)).rejects.toMatchObject({ code: 'conflict' });
        await storage.removeWebhookEndpoint!('m2', endpoint.id);
      });
    });

    describe('idempotency keys (the optional operations, where the storage has them)', () => {
      // docs/protocol.md#safe-retries. Times are the caller's clock (`now`), never the backend's.
      const has = () => storage.claimIdempotencyKey !== undefined;
      const T = 1_700_000_000_000;
      const LEASE = 60_000;
      const TTL = 86_400_000;
      const answer = { status: 201, headers: { location: '/merchant/webhooks/we_x' }, body: '{"status":"ok","data":[{"secret":"whsec_shown-once"}],"errors":[]}' };
      let n = 0;
      const fresh = () => `key-${++n}-${Math.random().toString(36).slice(2)}`;
      const claim = (key: string, fingerprint = 'a'.repeat(64), now = T, merchantId = 'm1') => storage.claimIdempotencyKey!({ merchantId, key, fingerprint, now, leaseMs: LEASE, ttlMs: TTL });

      it('claims a new key once; completed, the same fingerprint gets the answer, another is a mismatch', async (ctx) => {
        if (!has()) return ctx.skip();
        const key = fresh();
        const first = await claim(key);
        expect(first).toEqual({ state: 'claimed', token: expect.any(String) });
        expect(await claim(key, 'a'.repeat(64), T + 1000)).toEqual({ state: 'running', retryAfterMs: LEASE - 1000 });
        expect(await claim(key, 'b'.repeat(64), T + 1000)).toEqual({ state: 'mismatch' });
        await storage.completeIdempotencyKey!({ merchantId: 'm1', key, token: (first as { token: string }).token, answer });
        expect(await claim(key, 'a'.repeat(64), T + 2000)).toEqual({ state: 'completed', answer });
        expect(await claim(key, 'b'.repeat(64), T + 2000)).toEqual({ state: 'mismatch' });
      });

      it('scopes a key to its merchant: the same key of another merchant (ids compare by case) is its own', async (ctx) => {
        if (!has()) return ctx.skip();
        const key = fresh();
        expect((await claim(key, 'a'.repeat(64), T, 'm1')).state).toBe('claimed');
        expect((await claim(key, 'b'.repeat(64), T, 'M1')).state).toBe('claimed');
        expect((await claim(key, 'a'.repeat(64), T, 'm2')).state).toBe('claimed');
      });

      it('of many claims of one key at once, exactly one is claimed', async (ctx) => {
        if (!has()) return ctx.skip();
        const key = fresh();
        const outcomes = await Promise.all(Array.from({ length: 12 }, () => claim(key)));
        expect(outcomes.filter((o) => o.state === 'claimed')).toHaveLength(1);
        expect(outcomes.filter((o) => o.state === 'running')).toHaveLength(11);
      });

      it('a released key runs again; a release or completion under another token changes nothing', async (ctx) => {
        if (!has()) return ctx.skip();
        const key = fresh();
        const { token } = (await claim(key)) as { token: string };
        await storage.releaseIdempotencyKey!({ merchantId: 'm1', key, token: 'not-the-token' });
        await storage.completeIdempotencyKey!({ merchantId: 'm1', key, token: 'not-the-token', answer });
        expect((await claim(key)).state).toBe('running');
        await storage.releaseIdempotencyKey!({ merchantId: 'm1', key, token });
        expect((await claim(key, 'b'.repeat(64))).state).toBe('claimed');
      });

      it('a claim whose lease ran out (its worker died) is taken over under a new token; the late worker changes nothing', async (ctx) => {
        if (!has()) return ctx.skip();
        const key = fresh();
        const dead = (await claim(key)) as { token: string };
        const taken = await claim(key, 'a'.repeat(64), T + LEASE + 1);
        expect(taken).toEqual({ state: 'claimed', token: expect.any(String) });
        expect((taken as { token: string }).token).not.toBe(dead.token);
        await storage.completeIdempotencyKey!({ merchantId: 'm1', key, token: dead.token, answer: { ...answer, body: 'late' } });
        expect((await claim(key, 'a'.repeat(64), T + LEASE + 2)).state).toBe('running');
        await storage.completeIdempotencyKey!({ merchantId: 'm1', key, token: (taken as { token: string }).token, answer });
        expect(await claim(key, 'a'.repeat(64), T + LEASE + 3)).toEqual({ state: 'completed', answer });
        // Another request's fingerprint is still refused after a takeover.
        expect(await claim(key, 'b'.repeat(64), T + LEASE + 3)).toEqual({ state: 'mismatch' });
      });

      it('forgets a key ttlMs after its claim: then any request takes it anew', async (ctx) => {
        if (!has()) return ctx.skip();
        const key = fresh();
        const { token } = (await claim(key)) as { token: string };
        await storage.completeIdempotencyKey!({ merchantId: 'm1', key, token, answer });
        expect((await claim(key, 'a'.repeat(64), T + TTL - 1)).state).toBe('completed');
        expect((await claim(key, 'b'.repeat(64), T + TTL)).state).toBe('claimed');
      });

      it('keeps an answer whole: any status, headers and a body with every kind of character', async (ctx) => {
        if (!has()) return ctx.skip();
        const key = fresh();
        const whole = { status: 400, headers: { 'content-type': 'application/json', 'retry-after': '3' }, body: JSON.stringify({ s: '🦄 Ünï\u0000 \u2028 "q" ' + 'x'.repeat(60_000) }) };
        const { token } = (await claim(key)) as { token: string };
        await storage.completeIdempotencyKey!({ merchantId: 'm1', key, token, answer: whole });
        expect(await claim(key, 'a'.repeat(64), T + 5)).toEqual({ state: 'completed', answer: whole });
      });
    });

    describe('keys: ids, limits, metadata and last use', () => {
      const KEY_ID = /^key_[0-9a-hjkmnp-tv-z]{12}$/;
      const future = KEYED_FUTURE;
      // The merchants `keyed` and `gone-key` of the contract seed (test/support/seeds.ts).

      it('names each key, in the order of its keys, with an id of its own', async () => {
        const m1 = (await storage.getMerchant('m1'))!;
        expect(m1.keyIds).toHaveLength(2);
        for (const id of m1.keyIds!) expect(id).toMatch(KEY_ID);
        expect(new Set(m1.keyIds).size).toBe(2);
        // The same answer names the same key alike.
        expect((await storage.getMerchant('m1'))!.keyIds).toEqual(m1.keyIds);
      });

      it('a merchant whose keys limit nothing has no keyLimits (the handler then checks nothing)', async () => {
        expect((await storage.getMerchant('m1'))!.keyLimits).toBeUndefined();
        expect((await storage.getMerchant('off'))!.keyLimits).toBeUndefined();
      });

      it('answers the limits of each key in the order of its keys', async () => {
        const keyed = (await storage.getMerchant('keyed'))!;
        expect(keyed.keys).toEqual(['plain-key-1', 'limited-key-2', 'ending-key-3']);
        expect(keyed.keyLimits).toEqual([undefined, { scopes: ['users:read'], allowFrom: ['203.0.113.0/24', '2001:db8::/48'] }, { expiresAt: future }]);
      });

      it('lists the keys that still work with their metadata, oldest first, never a secret', async () => {
        const keyed = (await storage.getMerchant('keyed'))!;
        const keys = await storage.listKeys('keyed');
        expect(keys.map((key) => key.key_id)).toEqual(keyed.keyIds);
        expect(keys.map(({ created_at: _, ...key }) => key)).toEqual([
          { key_id: keyed.keyIds![0], name: null, scopes: ['signature', 'users:read', 'webhooks:manage', 'keys:manage'], expires_at: null, last_used_at: null, allow_from: [], mode: 'live' },
          { key_id: keyed.keyIds![1], name: 'reporting job', scopes: ['users:read'], expires_at: null, last_used_at: null, allow_from: ['203.0.113.0/24', '2001:db8::/48'], mode: 'live' },
          { key_id: keyed.keyIds![2], name: null, scopes: ['signature', 'users:read', 'webhooks:manage', 'keys:manage'], expires_at: future, last_used_at: null, allow_from: [], mode: 'live' },
        ]);
        expect(JSON.stringify(keys)).not.toMatch(/plain-key|limited-key|ending-key/);
        expect(await storage.listKeys('gone-key')).toEqual([]);
        expect(await storage.listKeys('no-such-merchant')).toEqual([]);
      });

      it('a test key (docs/test-mode.md): its mode in its limits and in listKeys; a live key has none', async () => {
        const moded = (await storage.getMerchant('moded'))!;
        expect(moded.keys).toEqual(['live-key-5', 'test_key-6']);
        expect(moded.keyLimits).toEqual([undefined, { mode: 'test' }]);
        expect((await storage.listKeys('moded')).map((key) => key.mode)).toEqual(['live', 'test']);
      });

      it('keeps the changes of test datasets (docs/test-mode.md#what-is-stored): the latest per user, per merchant, until reset, bounded', async () => {
        expect(storage.testChanges).toBeTypeOf('function');
        const changes = storage.testChanges!()!;
        const record = { ...user('moded', 'test_user_00001'), state: null };
        const { merchant_id: _, ...plain } = record;
        await changes.record('moded', [
          { shared_user_id: 'test_user_00001', record: plain, at: '2026-12-01T00:00:00.000001+00:00' },
          { shared_user_id: 'test_user_00002', record: null, at: '2026-12-01T00:00:00.000002+00:00' },
        ]);
        await changes.record('moded', [{ shared_user_id: 'test_user_00001', record: null, at: '2026-12-01T00:00:00.000003+00:00' }]);
        const held = (await changes.changes('moded')).sort((x, y) => x.at.localeCompare(y.at));
        expect(held).toEqual([
          { shared_user_id: 'test_user_00002', record: null, at: '2026-12-01T00:00:00.000002+00:00' },
          { shared_user_id: 'test_user_00001', record: null, at: '2026-12-01T00:00:00.000003+00:00' },
        ]);
        await changes.record('moded', [{ shared_user_id: 'test_user_00001', record: plain, at: '2026-12-01T00:00:00.000004+00:00' }]);
        expect((await changes.changes('moded')).find((change) => change.shared_user_id === 'test_user_00001')!.record).toEqual(plain);
        expect(await changes.changes('m1')).toEqual([]);
        // Past the bound: refused whole, nothing of it stored.
        const many = Array.from({ length: MAX_TEST_CHANGES }, (_, i) => ({ shared_user_id: `bulk-${i}`, record: null, at: '2026-12-02T00:00:00.000000+00:00' }));
        await expect(changes.record('moded', many)).rejects.toMatchObject({ code: 'conflict' });
        expect(await changes.changes('moded')).toHaveLength(2);
        await changes.reset('moded');
        expect(await changes.changes('moded')).toEqual([]);
      });

      it('records when a key was used, keeping the latest time, and only for that merchant\'s key', async () => {
        expect(storage.recordKeyUse).toBeTypeOf('function');
        const [plain, limited] = (await storage.getMerchant('keyed'))!.keyIds!;
        const m1Key = (await storage.getMerchant('m1'))!.keyIds![0]!;
        await storage.recordKeyUse!([
          { merchantId: 'keyed', keyId: plain!, at: '2026-11-28T04:00:00.250000+00:00' },
          { merchantId: 'keyed', keyId: limited!, at: '2026-11-28T04:01:00.000000+00:00' },
        ]);
        // An earlier time, arriving late from another instance, does not move it back; a key of another merchant is not this one's.
        await storage.recordKeyUse!([
          { merchantId: 'keyed', keyId: plain!, at: '2026-11-28T03:59:00.000000+00:00' },
          { merchantId: 'keyed', keyId: limited!, at: '2026-11-28T04:02:00.000001+00:00' },
        ]);
        const used = Object.fromEntries((await storage.listKeys('keyed')).map((key) => [key.key_id, key.last_used_at]));
        expect(used[plain!]).toBe('2026-11-28T04:00:00.250000+00:00');
        expect(used[limited!]).toBe('2026-11-28T04:02:00.000001+00:00');
        expect((await storage.listKeys('m1')).find((key) => key.key_id === m1Key)!.last_used_at).toBeNull();
      });
    });

    describe("a merchant's changes to its own keys (the optional operations, where the storage has them)", () => {
      // The memory and MySQL storages have them; a storage without them is answered 501 by the guard.
      // On `m2`, whose one seed key (`key-two`, every scope) stays: each test revokes what it made.
      const has = () => storage.createKey !== undefined;
      const at = (ms: number) => formatEpochSeconds(Math.floor(ms / 1000), String((ms % 1000) * 1000).padStart(6, '0'));
      const create = (scopes: KeyScope[] = ['users:read'], more: Partial<NewMerchantKey> = {}) =>
        storage.createKey!({ merchantId: 'm2', name: null, scopes, allowFrom: [], expiresAt: null, ...more });
      const workingIds = async () => (await storage.listKeys('m2')).map((key) => key.key_id);

      it('creates a random key, answered once with its secret, that works at once and is listed without it', async (ctx) => {
        if (!has()) return ctx.skip();
        const end = at(Date.now() + 86_400_000);
        const created = await create(['users:read', 'keys:manage'], { name: 'deploy bot', allowFrom: ['203.0.113.0/24'], expiresAt: end });
        expect(created).toEqual({
          key_id: expect.stringMatching(/^key_[0-9a-hjkmnp-tv-z]{12}$/),
          name: 'deploy bot',
          scopes: ['users:read', 'keys:manage'],
          created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/),
          expires_at: end,
          last_used_at: null,
          allow_from: ['203.0.113.0/24'],
          mode: 'live',
          secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
        });
        const merchant = (await storage.getMerchant('m2'))!;
        const index = merchant.keys.indexOf(created.secret);
        expect(index).toBeGreaterThanOrEqual(0);
        expect(merchant.keyIds![index]).toBe(created.key_id);
        expect(merchant.keyLimits![index]).toEqual({ scopes: ['users:read', 'keys:manage'], allowFrom: ['203.0.113.0/24'], expiresAt: end });
        const { secret: _, ...listed } = created;
        expect((await storage.listKeys('m2')).find((key) => key.key_id === created.key_id)).toEqual(listed);
        expect(JSON.stringify(await storage.listKeys('m2'))).not.toContain(created.secret);
        // A key with every scope, no network and no end is a plain key again.
        const plain = await create(['signature', 'users:read', 'webhooks:manage', 'keys:manage']);
        const again = (await storage.getMerchant('m2'))!;
        expect(again.keyLimits?.[again.keys.indexOf(plain.secret)]).toBeUndefined();
        for (const key of [created, plain]) expect(await storage.revokeKey!('m2', key.key_id)).toBe(true);
        expect((await storage.getMerchant('m2'))!.keys).toEqual(['key-two']);
      });

      it('rotates a key: the same name, scopes and networks, the old one ending at the time asked (an earlier end stays), or at once', async (ctx) => {
        if (!has()) return ctx.skip();
        const old = await create(['users:read'], { name: 'reports', allowFrom: ['2001:db8::/48'] });
        const now = Date.now();
        const rotation = { merchantId: 'm2', rotatedKeyId: old.key_id, oldExpiresAt: at(now + 3_600_000), now: at(now), expiresAt: null, mayGive: ['signature', 'users:read', 'webhooks:manage', 'keys:manage'] as KeyScope[] };
        const rotated = (await storage.rotateKey!(rotation))!;
        expect(rotated).toMatchObject({ name: 'reports', scopes: ['users:read'], allow_from: ['2001:db8::/48'], expires_at: null, old_key_id: old.key_id, old_key_expires_at: at(now + 3_600_000) });
        expect(rotated.secret).not.toBe(old.secret);
        expect((await storage.listKeys('m2')).find((key) => key.key_id === old.key_id)!.expires_at).toBe(at(now + 3_600_000));
        const merchant = (await storage.getMerchant('m2'))!;
        expect(merchant.keyLimits![merchant.keys.indexOf(old.secret)]).toMatchObject({ expiresAt: at(now + 3_600_000) });
        // Rotated again with a longer overlap: the earlier end stays.
        const later = (await storage.rotateKey!({ ...rotation, oldExpiresAt: at(now + 7_200_000) }))!;
        expect(later.old_key_expires_at).toBe(at(now + 3_600_000));
        // Without an overlap the old key stops at once.
        const atOnce = (await storage.rotateKey!({ ...rotation, rotatedKeyId: rotated.key_id, oldExpiresAt: at(now) }))!;
        expect(atOnce.old_key_expires_at).toBe(at(now));
        expect(await workingIds()).not.toContain(rotated.key_id);
        expect((await storage.getMerchant('m2'))!.keys).not.toContain(rotated.secret);
        // A key with a scope the caller may not give is not rotated.
        await expect(storage.rotateKey!({ ...rotation, rotatedKeyId: atOnce.key_id, mayGive: ['keys:manage'] })).rejects.toMatchObject({ code: 'insufficient_scope', status: 403 });
        for (const id of [old.key_id, later.key_id, atOnce.key_id]) expect(await storage.revokeKey!('m2', id)).toBe(true);
        expect(await workingIds()).toHaveLength(1);
      });

      it('changes a name and networks; nothing else', async (ctx) => {
        if (!has()) return ctx.skip();
        const key = await create(['users:read'], { name: 'before', allowFrom: ['203.0.113.0/24'] });
        const { secret: _, ...listed } = key;
        expect(await storage.updateKey!('m2', key.key_id, { name: 'after' })).toEqual({ ...listed, name: 'after' });
        expect(await storage.updateKey!('m2', key.key_id, { allowFrom: [] })).toEqual({ ...listed, name: 'after', allow_from: [] });
        expect(await storage.updateKey!('m2', key.key_id, { name: null, allowFrom: ['198.51.100.0/24'] })).toEqual({ ...listed, name: null, allow_from: ['198.51.100.0/24'] });
        const merchant = (await storage.getMerchant('m2'))!;
        expect(merchant.keyLimits![merchant.keys.indexOf(key.secret)]).toEqual({ scopes: ['users:read'], allowFrom: ['198.51.100.0/24'] });
        expect(await storage.revokeKey!('m2', key.key_id)).toBe(true);
      });

      it("acts only on the merchant's own working keys: another merchant's, a revoked or an ended one is not found", async (ctx) => {
        if (!has()) return ctx.skip();
        const own = await create();
        const other = (await storage.getMerchant('m1'))!.keyIds![0]!;
        const ended = (await storage.listKeys('keyed')).map((key) => key.key_id);
        const goneKey = (await storage.getMerchant('gone-key'))?.keyIds?.[0];
        for (const id of [other, ...ended, 'key_0000000000zz', ...(goneKey ? [goneKey] : [])]) {
          expect(await storage.revokeKey!('m2', id)).toBe(false);
          expect(await storage.updateKey!('m2', id, { name: 'x' })).toBeUndefined();
          expect(await storage.rotateKey!({ merchantId: 'm2', rotatedKeyId: id, oldExpiresAt: at(Date.now()), now: at(Date.now()), expiresAt: null, mayGive: ['users:read', 'signature', 'webhooks:manage', 'keys:manage'] })).toBeUndefined();
        }
        expect((await storage.getMerchant('m1'))!.keys).toHaveLength(2);
        if (goneKey) expect(await storage.revokeKey!('gone-key', goneKey)).toBe(false);
        expect(await storage.revokeKey!('m2', own.key_id)).toBe(true);
        expect(await storage.revokeKey!('m2', own.key_id)).toBe(false);
        expect(await storage.updateKey!('m2', own.key_id, { name: 'x' })).toBeUndefined();
      });

      it('never revokes the last working key with keys:manage; holds a merchant to the most working keys', async (ctx) => {
        if (!has()) return ctx.skip();
        const seedKey = (await storage.getMerchant('m2'))!.keyIds![0]!;
        await expect(storage.revokeKey!('m2', seedKey)).rejects.toMatchObject({ code: 'conflict', status: 409 });
        const manager = await create(['keys:manage']);
        expect(await storage.revokeKey!('m2', manager.key_id)).toBe(true);
        await expect(storage.revokeKey!('m2', seedKey)).rejects.toMatchObject({ code: 'conflict', status: 409 });
        const made = [];
        for (let i = 1; i < MAX_ACTIVE_KEYS; i++) made.push(await create());
        await expect(create()).rejects.toMatchObject({ code: 'conflict', status: 409 });
        // A rotation with an overlap adds a working key: refused too; one without is not.
        const now = Date.now();
        const rotation = { merchantId: 'm2', rotatedKeyId: made[0]!.key_id, now: at(now), expiresAt: null, mayGive: ['users:read'] as KeyScope[] };
        await expect(storage.rotateKey!({ ...rotation, oldExpiresAt: at(now + 60_000) })).rejects.toMatchObject({ code: 'conflict', status: 409 });
        made[0] = { ...made[0]!, key_id: (await storage.rotateKey!({ ...rotation, oldExpiresAt: at(now) }))!.key_id };
        expect(await workingIds()).toHaveLength(MAX_ACTIVE_KEYS);
        for (const key of made) expect(await storage.revokeKey!('m2', key.key_id)).toBe(true);
        expect(await workingIds()).toEqual([seedKey]);
      });
    });

    it('treats merchant ids as case-sensitive and unknown ids as absent', async () => {
      expect((await storage.getMerchant('M1'))!.keys).toEqual(['case-differs']);
      expect(await storage.getMerchant('m3')).toBeUndefined();
      expect(await storage.getMerchant('')).toBeUndefined();
    });

    it('answers a merchant it holds in memory synchronously, as getMerchant answers it, a copy each time', async () => {
      // Every storage of this project holds merchants (the memory storage's map, the MySQL storage's
      // cache, the wrappers forward it): the handler authenticates those without a promise.
      expect(storage.cachedMerchant).toBeTypeOf('function');
      for (const id of ['m1', 'off', 'keyed', 'M1']) {
        const read = await storage.getMerchant(id);
        const held = storage.cachedMerchant!(id);
        expect(held).not.toBeInstanceOf(Promise);
        expect(held).toEqual(read);
        // The caller may change what it got: the next answer is not changed by it.
        held!.keys.push('changed-by-the-caller');
        expect(storage.cachedMerchant!(id)).toEqual(read);
        expect(await storage.getMerchant(id)).toEqual(read);
      }
      // No merchant has these ids: nothing held, and getMerchant says so.
      for (const id of ['m3', '', 'x'.repeat(129)]) {
        expect(storage.cachedMerchant!(id)).toBeUndefined();
        expect(await storage.getMerchant(id)).toBeUndefined();
      }
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
      if (subject.realTimeSaltExpiry) {
        expect(await storage.recordSalt({ merchantId: 'm1', salt: 'old', expiresAt: now + 1, now })).toBe(true);
        expect(await storage.recordSalt({ merchantId: 'm1', salt: 'old', expiresAt: now + 1, now })).toBe(false);
        // The store's own clock expires the record (a second later); a refused attempt records nothing.
        await vi.waitFor(async () => expect(await storage.recordSalt({ merchantId: 'm1', salt: 'old', expiresAt: now + 400, now })).toBe(true), { timeout: 10_000, interval: 100 });
        expect(await storage.recordSalt({ merchantId: 'm1', salt: 'old', expiresAt: now + 400, now })).toBe(false);
        return;
      }
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

    it('lists in order=date_joined: oldest first, ties by shared_user_id, from a (date_joined, id) position', async () => {
      const all = await storage.listUsers({ merchantId: 'm1', filter: {}, order: 'date_joined', limit: 100 });
      expect(all.map((u) => u.shared_user_id)).toEqual(fullScan(seed.users, 'm1', {}, 'date_joined').map((u) => u.shared_user_id));
      const third = all[2]!;
      const rest = await storage.listUsers({ merchantId: 'm1', filter: {}, order: 'date_joined', after: third.shared_user_id, afterJoined: third.date_joined, limit: 100 });
      expect(rest).toEqual(all.slice(3));
      const active = await storage.listUsers({ merchantId: 'm1', filter: { active: false }, order: 'date_joined', limit: 100 });
      expect(active.map((u) => u.shared_user_id)).toEqual(['B-002', '😀-emoji']);
    });

    it('lists in order=updated_at with updated_at on each record, from updated_since inclusive and a (updated_at, id) position', async () => {
      const all = (await storage.listUsers({ merchantId: 'm1', filter: {}, order: 'updated_at', limit: 100 })) as ChangedUserRecord[];
      // Loaded together: one stamp (the load or the import), so ties are in id order.
      expect(all.map((u) => u.shared_user_id)).toEqual(M1_ORDER);
      expect(new Set(all.map((u) => u.updated_at)).size).toBe(1);
      const stamp = all[0]!.updated_at;
      expect(stamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}\+00:00$/);
      const { merchant_id: _, ...record } = seed.users.find((u) => u.merchant_id === 'm1' && u.shared_user_id === 'b-003')!;
      expect(all.find((u) => u.shared_user_id === 'b-003')).toEqual({ ...record, updated_at: stamp });
      expect(Object.keys(all[0]!)).toEqual([...Object.keys(record), 'updated_at']);
      const since = async (updatedSince: string) => (await storage.listUsers({ merchantId: 'm1', filter: { updatedSince }, order: 'updated_at', limit: 100 })).map((u) => u.shared_user_id);
      expect(await since(stamp)).toEqual(M1_ORDER);
      expect(await since(nextMicrosecond(stamp))).toEqual([]);
      const rest = await storage.listUsers({ merchantId: 'm1', filter: {}, order: 'updated_at', after: all[2]!.shared_user_id, afterUpdated: stamp, limit: 100 });
      expect(rest).toEqual(all.slice(3));
      const inactive = await storage.listUsers({ merchantId: 'm1', filter: { active: false, updatedSince: stamp }, order: 'updated_at', limit: 100 });
      expect(inactive.map((u) => u.shared_user_id)).toEqual(['B-002', '😀-emoji']);
      // Other orders keep the 14 keys.
      expect(Object.keys((await storage.listUsers({ merchantId: 'm1', filter: {}, order: 'date_joined', limit: 1 }))[0]!)).toHaveLength(14);
      expect(Object.keys((await storage.getUser('m1', 'b-003'))!)).toHaveLength(14);
    });

    it("misses no change in a merchant's sync loop, whichever merchant's write made it, with its stamps ahead of the clock", async () => {
      // b's own user carries a stamp far ahead of the clock (a seed's `updated_at`; on MySQL, a clock set back since).
      const ahead = '2999-01-01T00:00:00.000000+00:00';
      const other = await create({ merchants: [{ id: 'a', status: 'active', keys: ['ka'] }, { id: 'b', status: 'active', keys: ['kb'] }], users: [user('a', 'a-1'), user('b', 'b-1', { updated_at: ahead })] });
      try {
        await other.share?.({ merchantId: 'a', sharedUserId: 'a-1' }, { merchantId: 'b', sharedUserId: 'b-shared' });
        // One round of the sync loop (docs/protocol.md#the-sync-loop): what changed since, and the last updated_at seen.
        const sync = async (merchantId: string, since?: string) => {
          const page = (await other.storage.listUsers({ merchantId, filter: since === undefined ? {} : { updatedSince: since }, order: 'updated_at', limit: 100 })) as ChangedUserRecord[];
          return { users: new Map(page.map((u) => [u.shared_user_id, u])), last: page.at(-1)!.updated_at };
        };
        const [a, b] = [await sync('a'), await sync('b')];
        const changed = user('a', 'a-1', { city: 'Köln' });
        await other.add!({ merchants: [], users: [changed] });
        const { merchant_id: _, ...record } = changed;
        // a sees its change after everything it saw; so does b where the record is shared with it too.
        const nextA = await sync('a', a.last);
        expect(nextA.users.get('a-1')).toEqual({ ...record, updated_at: expect.any(String) });
        expect(nextA.users.get('a-1')!.updated_at > a.last).toBe(true);
        const nextB = await sync('b', b.last);
        expect([...nextB.users.keys()].sort()).toEqual(other.share ? ['b-1', 'b-shared'] : ['b-1']);
        if (other.share) {
          expect(nextB.users.get('b-shared')).toEqual({ ...record, shared_user_id: 'b-shared', updated_at: expect.any(String) });
          expect(nextB.users.get('b-shared')!.updated_at > b.last).toBe(true);
        }
      } finally {
        await other.storage.close();
        await other.cleanup?.();
      }
    });
  });

  describe(`storage contract: ${name}, filtered pages against a full scan`, () => {
    let subject: StorageUnderTest;
    let run = 0;

    beforeAll(async () => {
      subject = await create({ merchants: [], users: [] }, SMALL_PLAN);
    });
    afterAll(async () => {
      await subject?.storage.close();
      await subject?.cleanup?.();
    });

    it('returns exactly the users a full scan keeps, in order, across every page boundary, on random data', async () => {
      await fc.assert(
        fc.asyncProperty(randomUsers, fc.array(randomListing, { minLength: 1, maxLength: 12 }), async (users, listings) => {
          const merchantId = `prop-${name}-${++run}`;
          const seedUsers = users.map((u) => user(merchantId, u.id, { date_joined: u.joined, deactivated_at: u.active ? null : '2024-02-02T00:00:00.000000+00:00', first_name: `n${u.id.length}` }));
          await subject.add!({ merchants: [{ id: merchantId, status: 'active', keys: ['k'] }], users: seedUsers });
          for (const { filter, order, limit } of listings) {
            const expected = fullScan(seedUsers, merchantId, filter, order);
            const got = await pageThrough(subject.storage, merchantId, filter, order, limit, expected.length);
            expect(got, JSON.stringify({ filter, order, limit })).toEqual(expected);
          }
        }),
        { numRuns: 40 },
      );
    });

    it('keeps every list in step when users are replaced: activity and date_joined change', async () => {
      const merchantId = `replace-${name}`;
      const first = Array.from({ length: 12 }, (_, i) => user(merchantId, `r-${String(i).padStart(2, '0')}`, { date_joined: STAMPS[i % STAMPS.length]!, deactivated_at: i % 3 ? null : STAMPS[0]! }));
      await subject.add!({ merchants: [{ id: merchantId, status: 'active', keys: ['k'] }], users: first });
      const second = first.filter((_, i) => i % 2 === 0).map((u, i) => ({ ...u, date_joined: STAMPS[(i + 3) % STAMPS.length]!, deactivated_at: u.deactivated_at === null ? STAMPS[1]! : null }));
      await subject.add!({ merchants: [], users: second });
      const now = first.map((u) => second.find((s) => s.shared_user_id === u.shared_user_id) ?? u);
      for (const filter of FILTERS) {
        for (const order of ['shared_user_id', 'date_joined'] as const) {
          for (const limit of [1, 2, 5]) {
            const expected = fullScan(now, merchantId, filter, order);
            expect(await pageThrough(subject.storage, merchantId, filter, order, limit, expected.length), JSON.stringify({ filter, order, limit })).toEqual(expected);
          }
        }
      }
    });

    it('moves a changed record to the end of order=updated_at and leaves an unchanged one where it was', async () => {
      const merchantId = `changes-${name}`;
      const first = Array.from({ length: 6 }, (_, i) => user(merchantId, `c-${i}`));
      await subject.add!({ merchants: [{ id: merchantId, status: 'active', keys: ['k'] }], users: first });
      const listed = async () => (await pageThrough(subject.storage, merchantId, {}, 'updated_at', 2, 10)) as ChangedUserRecord[];
      const before = await listed();
      await waitForNextMillisecond();
      await subject.add!({ merchants: [], users: [first[4]!, { ...first[1]!, agreed_to_marketing: '2025-01-01T00:00:00.000000+00:00' }, { ...first[3]!, deactivated_at: '2025-01-02T00:00:00.000000+00:00' }] });
      const after = await listed();
      expect(after.map((u) => u.shared_user_id)).toEqual(['c-0', 'c-2', 'c-4', 'c-5', ...(after.at(-2)!.shared_user_id === 'c-1' ? ['c-1', 'c-3'] : ['c-3', 'c-1'])]);
      const at = (list: ChangedUserRecord[], id: string) => list.find((u) => u.shared_user_id === id)!.updated_at;
      for (const id of ['c-0', 'c-2', 'c-4', 'c-5']) expect(at(after, id)).toBe(at(before, id));
      for (const id of ['c-1', 'c-3']) expect(at(after, id) > at(before, 'c-5')).toBe(true);
      const changed = await subject.storage.listUsers({ merchantId, filter: { updatedSince: at(after, after.at(-2)!.shared_user_id) }, order: 'updated_at', limit: 10 });
      expect(changed.map((u) => u.shared_user_id).sort()).toEqual(['c-1', 'c-3']);
    });

    it('lists exactly what a model says changed since each round, changes applied in random rounds', async () => {
      await fc.assert(
        fc.asyncProperty(randomUsers, fc.array(randomRound, { minLength: 1, maxLength: 4 }), fc.array(randomListing, { minLength: 1, maxLength: 4 }), async (users, rounds, listings) => {
          const merchantId = `sync-${name}-${++run}`;
          const model = new Map<string, { user: SeedUser; round: number }>();
          const initial = users.map((u) => user(merchantId, u.id, { date_joined: u.joined, deactivated_at: u.active ? null : '2024-02-02T00:00:00.000000+00:00' }));
          await subject.add!({ merchants: [{ id: merchantId, status: 'active', keys: ['k'] }], users: initial });
          for (const u of initial) model.set(u.shared_user_id, { user: u, round: 0 });
          const starts: string[] = [];
          for (const [r, round] of rounds.entries()) {
            await waitForNextMillisecond();
            starts.push(formatEpochSeconds(Math.floor(Date.now() / 1000), String((Date.now() % 1000) * 1000).padStart(6, '0')));
            await waitForNextMillisecond();
            const batch: SeedUser[] = [];
            for (const change of round) {
              const known = [...model.values()];
              const target = known.length > 0 && change.pick !== undefined ? known[change.pick % known.length]!.user : undefined;
              const next: SeedUser = target === undefined || change.kind === 'new' ? user(merchantId, `new-${r}-${batch.length}`, { date_joined: STAMPS[change.value % STAMPS.length]! }) : change.kind === 'same' ? target : applyChange(target, change.kind, change.value);
              if (batch.some((u) => u.shared_user_id === next.shared_user_id)) continue;
              batch.push(next);
              const held = model.get(next.shared_user_id);
              const same = held !== undefined && JSON.stringify(held.user) === JSON.stringify(next);
              model.set(next.shared_user_id, { user: next, round: same ? held.round : r + 1 });
            }
            if (batch.length > 0) await subject.add!({ merchants: [], users: batch });
          }
          for (const { filter, limit } of listings) {
            for (let k = 0; k <= starts.length; k++) {
              const since = k === 0 ? undefined : starts[k - 1]!;
              const query: UserFilter = since === undefined ? filter : { ...filter, updatedSince: since };
              const got = (await pageThrough(subject.storage, merchantId, query, 'updated_at', limit, model.size)) as ChangedUserRecord[];
              const kept = new Set(fullScan([...model.values()].filter((m) => m.round >= k).map((m) => m.user), merchantId, filter).map((u) => u.shared_user_id));
              expect(got.map((u) => u.shared_user_id).sort(), JSON.stringify({ query, limit })).toEqual([...kept].sort());
              // In (updated_at, id) order; a later round always later; the records as the model holds them.
              for (let i = 1; i < got.length; i++) {
                const [a, b] = [got[i - 1]!, got[i]!];
                expect(a.updated_at < b.updated_at || (a.updated_at === b.updated_at && compareCodePoints(a.shared_user_id, b.shared_user_id) < 0)).toBe(true);
                expect(model.get(a.shared_user_id)!.round).toBeLessThanOrEqual(model.get(b.shared_user_id)!.round);
              }
              for (const { updated_at: _, ...record } of got) {
                const { merchant_id: __, ...expected } = model.get(record.shared_user_id)!.user;
                expect(record).toEqual(expected);
              }
            }
          }
        }),
        { numRuns: 15 },
      );
    });

    it('answers a filter that matches nothing with an empty last page', async () => {
      const merchantId = `nothing-${name}`;
      await subject.add!({ merchants: [{ id: merchantId, status: 'active', keys: ['k'] }], users: Array.from({ length: 20 }, (_, i) => user(merchantId, `n-${i}`)) });
      for (const order of ['shared_user_id', 'date_joined'] as const) {
        const page = await subject.storage.listUsers({ merchantId, filter: { joinedAfter: '2099-01-01T00:00:00.000000+00:00' }, order, limit: 10 });
        expect([...page]).toEqual([]);
        expect(page.resumeAfter).toBeUndefined();
      }
      const future = await subject.storage.listUsers({ merchantId, filter: { updatedSince: '9999-12-31T23:59:59.999999+00:00' }, order: 'updated_at', limit: 10 });
      expect([...future]).toEqual([]);
      expect(future.resumeAfter).toBeUndefined();
    });
  });
}

const STAMPS = [
  '2020-01-01T00:00:00.000000+00:00',
  '2020-01-01T00:00:00.000001+00:00',
  '2020-06-15T12:30:00.500000+00:00',
  '2021-03-04T05:06:07.123456+00:00',
  '2023-12-31T23:59:59.999999+00:00',
];
const BOUNDS = [undefined, '2019-12-31T23:59:59.999999+00:00', ...STAMPS, '2024-01-01T00:00:00.000000+00:00'];
const FILTERS: UserFilter[] = [{}, { active: true }, { active: false }, { joinedAfter: STAMPS[1] }, { joinedBefore: STAMPS[3] }, { joinedAfter: STAMPS[0], joinedBefore: STAMPS[4], active: true }, { joinedAfter: STAMPS[4] }];

// Ids that catch ordering bugs: case, U+E000-U+FFFF against astral characters, prefixes.
const randomId = fc.string({ unit: fc.constantFrom('a', 'b', 'B', '-', '中', '\ue000', '😀', 'z'), minLength: 1, maxLength: 4 });
const randomUsers = fc.uniqueArray(fc.record({ id: randomId, joined: fc.constantFrom(...STAMPS), active: fc.boolean() }), { selector: (u) => u.id, maxLength: 30 });
/** One round of changes: each one to a known user (changed or sent as it is) or a new user. */
const randomRound = fc.array(
  fc.record({ kind: fc.constantFrom('same', 'name', 'deactivate', 'reactivate', 'consent', 'address', 'joined', 'new'), pick: fc.option(fc.nat(), { nil: undefined }), value: fc.nat({ max: 9 }) }),
  { minLength: 1, maxLength: 8 },
);

function applyChange(u: SeedUser, kind: string, value: number): SeedUser {
  switch (kind) {
    case 'name':
      return { ...u, first_name: `${u.first_name}${value}` };
    case 'deactivate':
      return { ...u, deactivated_at: STAMPS[value % STAMPS.length]! };
    case 'reactivate':
      return { ...u, deactivated_at: null };
    case 'consent':
      return { ...u, agreed_to_marketing: u.agreed_to_marketing === null ? STAMPS[value % STAMPS.length]! : null };
    case 'address':
      return { ...u, street: `Weg ${value}`, city: value % 2 ? 'Köln' : u.city };
    default:
      return { ...u, date_joined: STAMPS[value % STAMPS.length]! };
  }
}

/** Resolves once the wall clock is past the millisecond it was in, so the next stamp is later. */
async function waitForNextMillisecond(): Promise<void> {
  const start = Date.now();
  while (Date.now() <= start) await new Promise((resolve) => setImmediate(resolve));
}

function nextMicrosecond(stamp: string): string {
  const micros = Number(stamp.slice(20, 26)) + 1;
  if (micros < 1_000_000) return `${stamp.slice(0, 20)}${String(micros).padStart(6, '0')}+00:00`;
  return formatEpochSeconds(Date.parse(`${stamp.slice(0, 19)}Z`) / 1000 + 1);
}

const randomListing = fc.record({
  filter: fc.record({ active: fc.constantFrom(undefined, true, false), joinedAfter: fc.constantFrom(...BOUNDS), joinedBefore: fc.constantFrom(...BOUNDS) }).map(withoutUndefined),
  order: fc.constantFrom<UserOrder>('shared_user_id', 'date_joined'),
  limit: fc.integer({ min: 1, max: 6 }),
});

function withoutUndefined(filter: UserFilter): UserFilter {
  return Object.fromEntries(Object.entries(filter).filter(([, value]) => value !== undefined));
}

/** What the listing must return: the merchant's users the filter keeps, sorted, as records. */
export function fullScan(users: SeedUser[], merchantId: string, filter: UserFilter, order: UserOrder = 'shared_user_id'): UserRecord[] {
  const kept = users
    .filter((u) => u.merchant_id === merchantId)
    .filter((u) => filter.active === undefined || (u.deactivated_at === null) === filter.active)
    .filter((u) => filter.joinedAfter === undefined || u.date_joined > filter.joinedAfter)
    .filter((u) => filter.joinedBefore === undefined || u.date_joined < filter.joinedBefore)
    .map(({ merchant_id: _, ...record }) => record);
  const byId = (a: UserRecord, b: UserRecord) => compareCodePoints(a.shared_user_id, b.shared_user_id);
  return kept.sort(order === 'date_joined' ? (a, b) => (a.date_joined < b.date_joined ? -1 : a.date_joined > b.date_joined ? 1 : byId(a, b)) : byId);
}

/**
 * Pages through a listing as the handler does: past a full page from its last user, past a short
 * page with `resumeAfter` from there; a short page without it is the last. Checks every page.
 */
export async function pageThrough(storage: Storage, merchantId: string, filter: UserFilter, order: UserOrder, limit: number, expected: number): Promise<UserRecord[]> {
  const users: UserRecord[] = [];
  let position: { after?: string; afterJoined?: string; afterUpdated?: string } = {};
  for (let pages = 0; ; pages++) {
    if (pages > 10 * expected + 20) throw new Error('the listing does not end');
    const page: UserRecordPage = await storage.listUsers({ merchantId, filter, order, ...position, limit });
    expect(page.length).toBeLessThanOrEqual(limit);
    users.push(...page);
    if (page.length === limit) {
      const last = page.at(-1)!;
      position = { after: last.shared_user_id, afterJoined: last.date_joined, afterUpdated: (last as Partial<ChangedUserRecord>).updated_at };
    } else if (page.resumeAfter !== undefined) {
      // Only a scan in id order or in updated_at order stops early, and it moves on.
      expect(order).not.toBe('date_joined');
      if (order === 'updated_at') {
        expect(page.resumeAfterUpdated).toBeDefined();
        position = { after: page.resumeAfter, afterUpdated: page.resumeAfterUpdated };
        continue;
      }
      if (position.after !== undefined) expect(compareCodePoints(page.resumeAfter, position.after)).toBeGreaterThan(0);
      if (page.length > 0) expect(compareCodePoints(page.resumeAfter, page.at(-1)!.shared_user_id)).toBeGreaterThanOrEqual(0);
      position = { after: page.resumeAfter };
    } else {
      return users;
    }
  }
}
