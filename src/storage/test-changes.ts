/**
 * The changes made to a merchant's test datasets (docs/test-mode.md#what-is-stored): the generated
 * users cost nothing until the simulator changes one, and then only the change is stored, the
 * latest per user. A storage keeps them where it keeps everything else (`Storage.testChanges`: the
 * MySQL storage in `test_user_changes`, shared by every instance); one without a place of its own
 * gets `MemoryTestChanges`, which lives as long as the process.
 */
import { createHash } from 'node:crypto';
import { MerchantApiError } from '../errors.js';
import type { TestChange, TestChangeStore, TestWebhookEvent } from './contract.js';

export type { TestChange, TestChangeStore, TestWebhookEvent } from './contract.js';

/**
 * The most users one merchant's test dataset may hold a change for. A simulator call past it is
 * 409 `conflict` naming `POST /merchant/test/reset`: the stored part of a test dataset, and the
 * work of every test request that reads it, stays bounded.
 */
export const MAX_TEST_CHANGES = 1000;

/** The refusal of a change past `MAX_TEST_CHANGES`. */
export function tooManyTestChanges(): MerchantApiError {
  return new MerchantApiError('conflict', `This test dataset already holds changes to ${MAX_TEST_CHANGES} users, the most it keeps; POST /merchant/test/reset restores the generated dataset.`);
}

/** Test changes in process memory: the memory storage's, and any storage's without a place of its own. */
export class MemoryTestChanges implements TestChangeStore {
  readonly #byMerchant = new Map<string, Map<string, TestChange>>();
  readonly #queueEvents: ((merchantId: string, events: readonly TestWebhookEvent[]) => void) | undefined;

  /** `queueEvents`: where the simulator's webhook events go once stored (the memory storage's test endpoints); without it they go nowhere. */
  constructor(queueEvents?: (merchantId: string, events: readonly TestWebhookEvent[]) => void) {
    this.#queueEvents = queueEvents;
  }

  async changes(merchantId: string): Promise<TestChange[]> {
    return [...(this.#byMerchant.get(merchantId)?.values() ?? [])];
  }

  async record(merchantId: string, changes: readonly TestChange[], events: readonly TestWebhookEvent[] = []): Promise<void> {
    const held = this.#byMerchant.get(merchantId) ?? new Map<string, TestChange>();
    const added = new Set(changes.map((change) => change.shared_user_id).filter((id) => !held.has(id)));
    if (held.size + added.size > MAX_TEST_CHANGES) throw tooManyTestChanges();
    for (const change of changes) held.set(change.shared_user_id, { ...change });
    this.#byMerchant.set(merchantId, held);
    if (events.length > 0) this.#queueEvents?.(merchantId, events);
  }

  async reset(merchantId: string): Promise<void> {
    this.#byMerchant.delete(merchantId);
  }
}

/**
 * The merchant id a test key's salts are recorded under (docs/test-mode.md#signing): `test:` and a
 * digest of the live id. No live merchant id holds a colon (`merchantIdProblem`), so the two never
 * share a salt; the digest keeps the name within the 128 characters every storage keeps for an id,
 * whatever the live id's length.
 */
export function testSaltNamespace(merchantId: string): string {
  return `test:${createHash('sha256').update(merchantId).digest('base64url')}`;
}
