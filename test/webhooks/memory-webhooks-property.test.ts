/**
 * The memory storage's webhook queue under any sequence of changes, claims, records, tests and
 * removals (fast-check): the pending count is what is pending, the queue and each merchant's half
 * hold, no endpoint has more claims in flight than allowed, a delivery is never held by two live
 * claims, and a record of a claim no longer held changes nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import type { DueDelivery } from '../../src/storage/webhook-outbox.js';
import { user } from '../support/seeds.js';

const MAX_PENDING = 6;
const IN_FLIGHT = 2;
const MERCHANTS = ['a', 'b'] as const;

const op = fc.oneof(
  fc.record({ kind: fc.constant('change' as const), merchant: fc.constantFrom(...MERCHANTS), user: fc.nat(4), city: fc.constantFrom('Berlin', 'Bonn'), deactivated: fc.boolean() }),
  fc.record({ kind: fc.constant('claim' as const), limit: fc.integer({ min: 1, max: 5 }) }),
  fc.record({ kind: fc.constant('record' as const), index: fc.nat(10), outcome: fc.constantFrom('delivered' as const, 'retry' as const, 'failed' as const, 'gone' as const) }),
  fc.record({ kind: fc.constant('test' as const), merchant: fc.constantFrom(...MERCHANTS) }),
  fc.record({ kind: fc.constant('remove' as const), merchant: fc.constantFrom(...MERCHANTS) }),
  fc.record({ kind: fc.constant('add' as const), merchant: fc.constantFrom(...MERCHANTS) }),
);

describe('the memory webhook queue, for any sequence of operations', () => {
  it('keeps its counts and bounds', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 60 }), async (ops) => {
        const storage = new MemoryStorage({ merchants: MERCHANTS.map((id) => ({ id, status: 'active' as const, keys: [`key-${id}`] })), users: [] }, { webhooks: { maxPendingDeliveries: MAX_PENDING } });
        const outbox = storage.webhookOutbox;
        const add = (merchantId: string) => storage.addWebhookEndpoint({ merchantId, url: `https://hooks.example.com/${merchantId}`, events: ['user.shared', 'user.updated', 'user.deactivated'], maxPerMerchant: 3 }).catch(() => undefined);
        await add('a');
        await add('a');
        await add('b');
        let held: DueDelivery[] = [];
        for (const step of ops) {
          switch (step.kind) {
            case 'change': {
              const { merchant_id: _m, ...record } = user(step.merchant, `u${step.user}`, { city: step.city, deactivated_at: step.deactivated ? '2026-01-01T00:00:00.000000+00:00' : null });
              storage.putUser(step.merchant, record);
              break;
            }
            case 'claim': {
              const claimed = await outbox.claimDue({ limit: step.limit, leaseMs: 60_000, maxInFlightPerEndpoint: IN_FLIGHT });
              // Never one a live claim already holds.
              for (const delivery of claimed) expect(held.some((h) => h.id === delivery.id)).toBe(false);
              held.push(...claimed);
              break;
            }
            case 'record': {
              const delivery = held[step.index % Math.max(1, held.length)];
              if (delivery === undefined) break;
              held = held.filter((h) => h !== delivery);
              const before = await outbox.stats();
              const stillPending = storage.listWebhookDeliveries({ state: 'pending', limit: 1000 }).some((d) => d.id === delivery.id);
              await outbox.recordAttempt({
                delivery,
                outcome: step.outcome === 'gone' ? 'failed' : step.outcome,
                ...(step.outcome === 'retry' ? { nextAttemptAt: new Date() } : {}),
                ...(step.outcome === 'gone' ? { disableEndpoint: 'gone' as const, status: 410 } : { status: step.outcome === 'delivered' ? 204 : 500 }),
                durationMs: 1,
              });
              // A claim whose delivery went meanwhile (its endpoint removed or disabled) records nothing.
              if (!stillPending) expect((await outbox.stats()).pending).toBe(before.pending);
              if (step.outcome === 'gone' && stillPending) held = held.filter((h) => h.endpointId !== delivery.endpointId);
              break;
            }
            case 'test': {
              const [endpoint] = await storage.listWebhookEndpoints(step.merchant);
              if (endpoint !== undefined) await storage.sendWebhookTest(step.merchant, endpoint.id).catch((error: { status?: number }) => expect([409, 429, 503]).toContain(error.status));
              break;
            }
            case 'remove': {
              const [endpoint] = await storage.listWebhookEndpoints(step.merchant);
              if (endpoint !== undefined) {
                expect(await storage.removeWebhookEndpoint(step.merchant, endpoint.id)).toBe(true);
                held = held.filter((h) => h.endpointId !== endpoint.id);
              }
              break;
            }
            case 'add':
              await add(step.merchant);
              break;
          }
          const pending = storage.listWebhookDeliveries({ state: 'pending', limit: 1000 });
          expect((await outbox.stats()).pending).toBe(pending.length);
          expect(pending.length).toBeLessThanOrEqual(MAX_PENDING);
          for (const merchant of MERCHANTS) expect(pending.filter((d) => d.merchantId === merchant).length).toBeLessThanOrEqual(MAX_PENDING / 2);
          const live = held.filter((h) => pending.some((d) => d.id === h.id));
          for (const endpointId of new Set(live.map((h) => h.endpointId))) expect(live.filter((h) => h.endpointId === endpointId).length).toBeLessThanOrEqual(IN_FLIGHT);
        }
        await storage.close();
      }),
      { numRuns: 200 },
    );
  });
});
