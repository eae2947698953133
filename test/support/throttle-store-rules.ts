/**
 * A shared throttle store (MySQL's SQL, Redis's Lua) must count exactly as
 * the in-process throttle does: over random failures, successes and time,
 * the block the store's records say and the one the local throttle decides
 * are the same, for the address and for each merchant from it.
 */
import fc from 'fast-check';
import { expect } from 'vitest';
import { FailureThrottle } from '../../src/limits/throttle.js';
import type { ThrottleRecord, ThrottleStore } from '../../src/storage/throttle-store.js';

export async function assertStoreCountsAsTheLocalThrottle(store: ThrottleStore, start: number): Promise<void> {
  const options = { pairFailures: 3, pairBlockSeconds: 10, pairMaxBlockSeconds: 50, addressFailures: 5, addressWindowSeconds: 100, addressBlockSeconds: 30 };
  const event = fc.record({ merchant: fc.constantFrom('m1', 'm2', undefined), ok: fc.boolean(), dt: fc.integer({ min: 0, max: 150 }) });
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(event, { minLength: 20, maxLength: 60 }), async (events) => {
      const address = `198.51.100.${++run}`;
      const local = new FailureThrottle(options);
      const shared = new Map<string, ThrottleRecord>();
      const keep = (records: readonly ThrottleRecord[]) => records.forEach((record) => shared.set(`${record.scope}/${record.merchantId}`, record));
      let now = start;
      for (const e of events) {
        now += e.dt;
        if (e.ok && e.merchant !== undefined) {
          local.succeeded(address, e.merchant);
          keep(await store.resetPair(address, e.merchant, now));
        } else if (!e.ok) {
          local.failed(address, e.merchant, now);
          keep(await store.recordFailure({ address, merchantId: e.merchant, now }, local.rules));
        }
        for (const merchant of ['m1', 'm2']) {
          const fromStore = [shared.get('address/undefined'), shared.get(`pair/${merchant}`)].find((record) => record !== undefined && record.blockedUntil > now);
          const block = local.blocked(address, () => merchant, now);
          expect(block && { scope: block.scope, retryAfter: block.retryAfter }).toEqual(fromStore && { scope: fromStore.scope, retryAfter: fromStore.blockedUntil - now });
        }
      }
    }),
    { numRuns: 8, seed: 11 },
  );
}

/**
 * A store's reservations (docs/security.md#ten-checks-even-all-at-once) against a model, over
 * random sequences of reservations (some with forced checks), failures that give a reservation
 * back, and releases: a reservation is granted exactly when the pair's failures plus the checks
 * held plus these stay within the limit and the pair is not blocked (the address's limit is far),
 * so the checks that can run never exceed what is left before the block.
 */
export async function assertStoreReservesAsTheModel(store: ThrottleStore, start: number): Promise<void> {
  const rules = new FailureThrottle({ pairFailures: 4, pairBlockSeconds: 1000, addressFailures: 1000 }).rules;
  const step = fc.oneof(
    fc.record({ kind: fc.constant('reserve' as const), forced: fc.integer({ min: 0, max: 1 }) }),
    fc.record({ kind: fc.constant('fail' as const) }),
    fc.record({ kind: fc.constant('release' as const) }),
  );
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 25 }), async (steps) => {
      const address = `198.51.100.${200 + ++run}`;
      const now = start;
      let failures = 0;
      let held = 0;
      let blocked = false;
      for (const s of steps) {
        const reservation = { address, merchantId: 'm1', addressCount: 1, pairCount: 1, now };
        if (s.kind === 'reserve') {
          held += s.forced;
          const expected = !blocked && failures + held + 1 <= rules.pairFailures;
          const answer = await store.reserveChecks!({ ...reservation, ...(s.forced ? { forced: { address: 1, pair: 1 } } : {}) }, rules);
          expect(answer.granted).toBe(expected);
          if (answer.granted) held++;
        } else if (s.kind === 'fail' && held > 0) {
          held--;
          failures++;
          if (failures >= rules.pairFailures) [failures, blocked] = [0, true];
          await store.recordFailure({ address, merchantId: 'm1', now, reserved: { address: true, pair: true } }, rules);
        } else if (s.kind === 'release' && held > 0) {
          held--;
          await store.releaseChecks!(reservation);
        }
      }
    }),
    { numRuns: 15, seed: 34 },
  );
}
