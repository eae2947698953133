/**
 * The test traffic's share of a pooled storage (docs/test-mode.md#operations): all test calls of
 * all merchants together run at most a quarter of the pool at once, the rest wait; the merchant's
 * own share still applies inside it; a storage without a pool keeps the merchant's gate alone.
 */
import { describe, expect, it } from 'vitest';
import type { RequestContext } from '../../src/http/context.js';
import { testModeGate } from '../../src/testmode/test-share.js';

const ctx = (merchantId: string) => ({ merchantId }) as RequestContext;

describe('testModeGate', () => {
  it('runs at most a quarter of the pool of test calls at once, over every merchant', async () => {
    const gate = testModeGate(8, undefined)!;
    let running = 0;
    let most = 0;
    const releases: (() => void)[] = [];
    const call = () =>
      new Promise<void>((resolve) => {
        running++;
        most = Math.max(most, running);
        releases.push(() => {
          running--;
          resolve();
        });
      });
    const all = Array.from({ length: 10 }, (_, i) => gate(ctx(`m${i % 3}`), call));
    // Release one at a time until every call ran: never more than 2 (8 / 4) at once.
    for (let done = 0; done < 10; ) {
      await new Promise((resolve) => setImmediate(resolve));
      const release = releases.shift();
      if (release) {
        release();
        done++;
      }
    }
    await Promise.all(all);
    expect(most).toBe(2);
  });

  it('keeps the merchant\'s own gate inside it, and is that gate alone without a pool', async () => {
    const seen: string[] = [];
    const merchantGate = <T>(context: RequestContext, call: () => Promise<T>) => (seen.push(context.merchantId!), call());
    await testModeGate(8, merchantGate)!(ctx('shop'), async () => undefined);
    expect(seen).toEqual(['shop']);
    expect(testModeGate(undefined, merchantGate)).toBe(merchantGate);
  });
});
