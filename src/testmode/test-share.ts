/**
 * The share of the storage test traffic may hold (docs/test-mode.md#operations): every test
 * request of every merchant together runs at most a quarter of a pooled storage's connections at
 * once (half of a merchant's half), so that however hard merchants test, live requests find the
 * rest free; within it each merchant's calls keep to their own share as live ones do. A storage
 * without a pool (memory) has nothing to share: only the merchant's share applies.
 */
import type { RequestContext } from '../http/context.js';
import { MerchantStorageShare } from '../limits/storage-share.js';
import type { StorageGate } from '../storage/guard.js';

/** The one queue every test call waits in (the share counts by this name, which no merchant has: it holds a colon). */
const ALL_TEST_TRAFFIC = 'test:all';

export function testModeGate(concurrency: number | undefined, merchantGate: StorageGate<RequestContext> | undefined): StorageGate<RequestContext> | undefined {
  if (concurrency === undefined) return merchantGate;
  const share = new MerchantStorageShare(Math.max(1, Math.floor(concurrency / 2)));
  return (ctx, call) => share.run(ALL_TEST_TRAFFIC, merchantGate === undefined ? call : () => merchantGate(ctx, call));
}
