/**
 * What an instance of the shared throttle takes from the store
 * (src/limits/throttle.ts `learn`, src/limits/throttle-sharing.ts), through
 * api.fetch with a store the test answers: records that arrive out of order
 * or twice, blocks made elsewhere, an operator's lift, the answer to its own
 * report; and which successes it tells the store about. No database: the
 * MySQL store's side is test/limits/throttle-shared.test.ts.
 */
import { describe, expect, it, vi } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { FailureThrottle } from '../../src/limits/throttle.js';
import { MAX_REPORTS_IN_FLIGHT, MAX_REPORTS_QUEUED } from '../../src/limits/throttle-sharing.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import type { ThrottleRecord, ThrottleStore, ThrottleStoreListener } from '../../src/storage/throttle-store.js';
import { basic, NOW, NOW_MS, ORIGIN } from '../support/api.js';
import { contractSeed } from '../support/seeds.js';
import { recordingLogger } from '../support/recording.js';
import { sleep } from '../support/sleep.js';

const ADDRESS = '203.0.113.40';

/** Versions in time order, as the store writes them. */
const v = (n: number) => `2030-01-01 00:00:00.${String(n).padStart(6, '0')}`;

function pair(fields: Partial<ThrottleRecord>): ThrottleRecord {
  return { scope: 'pair', address: ADDRESS, merchantId: 'm1', failures: 0, windowStart: NOW, blocks: 0, blockedUntil: 0, version: v(1), ...fields };
}
function address(fields: Partial<ThrottleRecord>): ThrottleRecord {
  return { scope: 'address', address: ADDRESS, merchantId: undefined, failures: 0, windowStart: NOW, blocks: 0, blockedUntil: 0, version: v(1), ...fields };
}

interface Held {
  resolve(records: ThrottleRecord[]): void;
  reject(error: Error): void;
}

/**
 * A handler on the memory storage sharing its throttle through a store the test
 * controls: the store answers each report with the next of `answerNext` (nothing
 * by default), or holds it while `holding` (released by hand), and `poll(records)`
 * is another instance's change read by the background poll. `store` replaces
 * any of the store's methods.
 */
function sharedInstance(store: Partial<ThrottleStore> = {}) {
  let now = NOW_MS;
  const writes: string[] = [];
  const asked: { method: string; now: number }[] = [];
  const held: Held[] = [];
  let holding = false;
  let next: ThrottleRecord[][] = [];
  let listener: ThrottleStoreListener | undefined;
  const answer = () => (holding ? new Promise<ThrottleRecord[]>((resolve, reject) => held.push({ resolve, reject })) : Promise.resolve(next.shift() ?? []));
  const fake: ThrottleStore = {
    recordFailure: (failure) => (writes.push(`failure ${failure.merchantId ?? '-'}`), asked.push({ method: 'recordFailure', now: failure.now }), answer()),
    resetPair: (_address, merchantId, at) => (writes.push(`reset ${merchantId}`), asked.push({ method: 'resetPair', now: at }), answer()),
    activeBlocks: async (at) => (asked.push({ method: 'activeBlocks', now: at }), []),
    subscribe(given) {
      listener = given;
      return () => undefined;
    },
    ...store,
  };
  const { logger, lines: logged } = recordingLogger();
  const storage = Object.assign(new MemoryStorage(contractSeed()), { throttleStore: () => fake });
  const api = createMerchantApi({ storage, now: () => now, logger, accessLog: false, tracing: false });
  const call = async (id: string, key: string, from = ADDRESS) => {
    const response = await api.fetch(new Request(`${ORIGIN}/merchant/users`, { headers: basic(id, key) }), { clientAddress: from });
    return { status: response.status, retryAfter: response.headers.get('retry-after'), body: await response.text() };
  };
  return {
    call,
    writes,
    asked,
    held,
    /** The throttle's own log lines (the handler logs nothing else here but requests, which are off). */
    events: () => logged.filter((line) => typeof line.event === 'string' && line.event.startsWith('throttle_')),
    poll: (...records: ThrottleRecord[]) => listener!.learn(records),
    pollFailed: (error: Error) => listener!.failed(error),
    /** What the store answers to the next reports, in order. */
    answerNext: (...answers: ThrottleRecord[][]) => void (next = answers),
    hold: (on = true) => void (holding = on),
    advance: (seconds: number) => void (now += seconds * 1000),
  };
}

describe('the shared throttle learns pair records', () => {
  it('takes a record about a pair it has counted alone', async () => {
    const one = sharedInstance();
    await one.call('m1', 'nope');
    one.poll(pair({ failures: 9 }));
    await one.call('m1', 'nope');
    expect(await one.call('m1', 'key-one')).toMatchObject({ status: 429, retryAfter: '300' });
  });

  it('ignores the answer to its own report when a poll read a newer version first', async () => {
    const one = sharedInstance();
    one.poll(pair({ failures: 5, version: v(1) }));
    one.hold();
    const sixth = one.call('m1', 'nope');
    await vi.waitFor(() => expect(one.held).toHaveLength(1));
    // A success elsewhere reset the pair after this failure was written; the poll read it first.
    one.poll(pair({ failures: 0, version: v(3) }));
    one.held.shift()!.resolve([pair({ failures: 6, version: v(2) })]);
    expect((await sixth).status).toBe(401);
    one.hold(false);
    for (let i = 0; i < 4; i++) expect((await one.call('m1', 'nope')).status).toBe(401);
    expect((await one.call('m1', 'key-one')).status).toBe(200);
  });

  it('takes a newer record as its count: nine failures elsewhere and one here block', async () => {
    const one = sharedInstance();
    one.poll(pair({ failures: 9 }));
    expect((await one.call('m1', 'nope')).status).toBe(401);
    expect(await one.call('m1', 'key-one')).toMatchObject({ status: 429, retryAfter: '300' });
  });

  it('takes the doubling too: after two blocks elsewhere the next one lasts 1200 s', async () => {
    const one = sharedInstance();
    one.poll(pair({ failures: 9, blocks: 2 }));
    await one.call('m1', 'nope');
    expect(await one.call('m1', 'key-one')).toMatchObject({ status: 429, retryAfter: '1200' });
  });

  it('ignores an older copy that arrives after a newer one', async () => {
    const one = sharedInstance();
    one.poll(pair({ failures: 0, version: v(2) }));
    one.poll(pair({ failures: 9, version: v(1) }));
    expect((await one.call('m1', 'nope')).status).toBe(401);
    expect((await one.call('m1', 'key-one')).status).toBe(200);
  });

  it('keeps the failures counted here when a poll reads the same version again', async () => {
    const one = sharedInstance();
    const eight = pair({ failures: 8, version: v(1) });
    one.poll(eight);
    expect((await one.call('m1', 'nope')).status).toBe(401); // 9 here; the store answers nothing
    one.poll(eight);
    expect((await one.call('m1', 'nope')).status).toBe(401); // the 10th
    expect(await one.call('m1', 'key-one')).toMatchObject({ status: 429, retryAfter: '300' });
  });

  it('keeps a block made elsewhere, and a newer copy from elsewhere never shortens it', async () => {
    const one = sharedInstance();
    one.poll(pair({ blocks: 1, blockedUntil: NOW + 300, version: v(1) }));
    expect(await one.call('m1', 'key-one')).toMatchObject({ status: 429, retryAfter: '300' });
    one.poll(pair({ blocks: 1, blockedUntil: NOW + 20, version: v(2) }), pair({ blocks: 0, blockedUntil: 0, version: v(3) }));
    expect(await one.call('m1', 'key-one')).toMatchObject({ status: 429, retryAfter: '300' });
    // Another merchant from the address is not blocked.
    expect((await one.call('m2', 'key-two')).status).toBe(200);
  });

  it('drops a block, even one counted here, when an operator lifted it', async () => {
    const one = sharedInstance();
    for (let i = 0; i < 10; i++) await one.call('m1', 'nope');
    expect((await one.call('m1', 'key-one')).status).toBe(429);
    one.poll(pair({ failures: 0, blocks: 1, blockedUntil: 0, lifted: true, version: v(5) }));
    expect((await one.call('m1', 'key-one')).status).toBe(200);
  });

  it('never lifts a block counted here by the answer to a report older than the block (a burst, the store far away)', async () => {
    const one = sharedInstance();
    one.hold();
    const burst = Array.from({ length: 10 }, () => one.call('m1', 'nope'));
    await vi.waitFor(() => expect(one.held.length).toBeGreaterThanOrEqual(1));
    await vi.waitFor(async () => expect((await one.call('m1', 'key-one')).status).toBe(429));
    // The store's answer to the first failure, written before the nine others: one failure, no block.
    one.held.shift()!.resolve([pair({ failures: 1, version: v(1) })]);
    await vi.waitFor(() => expect(one.writes.filter((w) => w.startsWith('failure')).length).toBeGreaterThanOrEqual(5));
    expect(await one.call('m1', 'key-one')).toMatchObject({ status: 429, retryAfter: '300' });
    one.hold(false);
    for (const held of one.held.splice(0)) held.resolve([]);
    await Promise.all(burst);
  });

  it('takes the answer to its own report as it is, shorter block included', async () => {
    const one = sharedInstance();
    one.poll(pair({ failures: 9, version: v(1) }));
    // The store, which has seen a reset elsewhere, counts this failure as the first since, then blocked
    // for 30 s by an operator's shorter rule: the answer replaces what was counted here.
    one.answerNext([pair({ failures: 1, blockedUntil: NOW + 30, version: v(2) })]);
    expect((await one.call('m1', 'nope')).status).toBe(401);
    expect(await one.call('m1', 'key-one')).toMatchObject({ status: 429, retryAfter: '30' });
  });
});

describe('the shared throttle learns address records', () => {
  it('refuses every merchant from an address another instance blocked, for the time left', async () => {
    const one = sharedInstance();
    one.poll(address({ blockedUntil: NOW + 3000 }));
    expect(await one.call('m2', 'key-two')).toMatchObject({ status: 429, retryAfter: '3000' });
    expect((await one.call('m1', 'key-one')).body).toContain('from this address');
  });

  it('takes a record about an address it has counted alone', async () => {
    const one = sharedInstance();
    await one.call('ghost', 'x');
    one.poll(address({ failures: 99 }));
    await one.call('ghost', 'x');
    expect((await one.call('m2', 'key-two')).status).toBe(429);
  });

  it('keeps the version it learned when its own window starts again: an older copy stays ignored', async () => {
    const one = sharedInstance();
    one.poll(address({ failures: 0, version: v(5) }));
    one.advance(3600);
    expect((await one.call('ghost', 'x')).status).toBe(401); // a new window here
    one.poll(address({ failures: 99, windowStart: NOW + 3600, version: v(3) }));
    expect((await one.call('ghost', 'x')).status).toBe(401);
    expect((await one.call('m2', 'key-two')).status).toBe(200);
  });

  it('takes a newer count: 99 failures elsewhere and one here block the address', async () => {
    const one = sharedInstance();
    one.poll(address({ failures: 99 }));
    expect((await one.call('ghost', 'x')).status).toBe(401);
    expect(await one.call('m2', 'key-two')).toMatchObject({ status: 429, retryAfter: '3600' });
  });

  it('takes the window\'s start: 99 failures in a window that has ended count for nothing', async () => {
    const one = sharedInstance();
    one.poll(address({ failures: 99, windowStart: NOW - 3600 }));
    expect((await one.call('ghost', 'x')).status).toBe(401);
    expect((await one.call('m2', 'key-two')).status).toBe(200);
  });

  it('ignores an older copy that arrives after a newer one', async () => {
    const one = sharedInstance();
    one.poll(address({ failures: 0, version: v(2) }));
    one.poll(address({ failures: 99, version: v(1) }));
    expect((await one.call('ghost', 'x')).status).toBe(401);
    expect((await one.call('m2', 'key-two')).status).toBe(200);
  });

  it('keeps the failures counted here when a poll reads the same version again', async () => {
    const one = sharedInstance();
    const ninetyEight = address({ failures: 98, version: v(1) });
    one.poll(ninetyEight);
    expect((await one.call('ghost', 'x')).status).toBe(401); // 99 here
    one.poll(ninetyEight);
    expect((await one.call('ghost', 'x')).status).toBe(401); // the 100th
    expect((await one.call('m2', 'key-two')).status).toBe(429);
  });

  it('never shortens a block from another instance\'s newer copy; an operator\'s lift drops it', async () => {
    const one = sharedInstance();
    one.poll(address({ blockedUntil: NOW + 3000, version: v(1) }));
    one.poll(address({ blockedUntil: NOW + 10, version: v(2) }));
    expect(await one.call('m2', 'key-two')).toMatchObject({ status: 429, retryAfter: '3000' });
    one.poll(address({ blockedUntil: 0, lifted: true, version: v(3) }));
    expect((await one.call('m2', 'key-two')).status).toBe(200);
  });

  it('keeps a block counted here against a newer copy from elsewhere that has none', async () => {
    const one = sharedInstance();
    one.poll(address({ failures: 99, version: v(1) }));
    await one.call('ghost', 'x');
    expect((await one.call('m2', 'key-two')).status).toBe(429);
    one.poll(address({ failures: 3, version: v(2) }));
    expect(await one.call('m2', 'key-two')).toMatchObject({ status: 429, retryAfter: '3600' });
  });

  it('lifts a block counted here alone when the answer to its own report has none', async () => {
    const one = sharedInstance();
    one.poll(address({ failures: 99, version: v(1) }));
    // Elsewhere the window started again: the store counts this failure as its first.
    one.answerNext([address({ failures: 1, version: v(2) })]);
    expect((await one.call('ghost', 'x')).status).toBe(401);
    expect((await one.call('m2', 'key-two')).status).toBe(200);
  });
});

describe('the shared throttle tells the store of a success only when there is a count to forget', () => {
  it('after a failure here: one reset, and none for the next success', async () => {
    const one = sharedInstance();
    await one.call('m1', 'nope');
    await one.call('m1', 'key-one');
    await one.call('m1', 'key-one');
    expect(one.writes).toEqual(['failure m1', 'reset m1']);
  });

  it('after a record with a block behind it (the doubling to forget), not after one with nothing', async () => {
    const one = sharedInstance();
    one.poll(pair({ merchantId: 'm1', failures: 0, blocks: 1, blockedUntil: 0 }), pair({ merchantId: 'm2', failures: 0, blocks: 0, blockedUntil: 0 }));
    await one.call('m1', 'key-one');
    await one.call('m2', 'key-two');
    expect(one.writes).toEqual(['reset m1']);
  });

  it('starts its own count again on a success: nine failures, a success, nine more do not block', async () => {
    const one = sharedInstance();
    for (let i = 0; i < 9; i++) await one.call('m1', 'nope');
    expect((await one.call('m1', 'key-one')).status).toBe(200);
    for (let i = 0; i < 9; i++) expect((await one.call('m1', 'nope')).status).toBe(401);
    expect((await one.call('m1', 'key-one')).status).toBe(200);
  });
});

describe('the sharing layer', () => {
  it('asks the store for the blocks in force at start, in seconds, and takes them as another instance\'s (never shortening its own)', async () => {
    let release: ((records: ThrottleRecord[]) => void) | undefined;
    const seconds: number[] = [];
    const one = sharedInstance({
      activeBlocks: (at) => (seconds.push(at), new Promise<ThrottleRecord[]>((resolve) => (release = resolve))),
    });
    expect(seconds).toEqual([NOW]);
    for (let i = 0; i < 10; i++) await one.call('m1', 'nope');
    // The start's read answers late, with a shorter block of the same pair made elsewhere.
    release!([pair({ blocks: 1, blockedUntil: NOW + 60 })]);
    await sleep(10);
    expect(await one.call('m1', 'key-one')).toMatchObject({ status: 429, retryAfter: '300' });
  });

  it('tells the store the time of a failure and of a reset in seconds', async () => {
    const one = sharedInstance();
    one.advance(7);
    await one.call('m1', 'nope');
    await one.call('m1', 'key-one');
    expect(one.asked).toEqual([
      { method: 'activeBlocks', now: NOW },
      { method: 'recordFailure', now: NOW + 7 },
      { method: 'resetPair', now: NOW + 7 },
    ]);
  });

  it('logs nothing while the store answers; a failing poll once, with its message, and the recovery once', async () => {
    const one = sharedInstance();
    await one.call('m1', 'nope');
    await one.call('m1', 'key-one');
    one.poll();
    expect(one.events()).toEqual([]);
    one.pollFailed(new Error('connection refused'));
    one.pollFailed(new Error('connection refused'));
    expect(one.events()).toMatchObject([
      { level: 'error', event: 'throttle_store_unavailable', msg: 'failed authentications are counted in this instance only until the store answers' },
    ]);
    one.poll();
    one.poll();
    expect(one.events().slice(1)).toMatchObject([{ level: 'info', event: 'throttle_store_recovered', msg: 'failed authentications are shared again' }]);
  });

  it('logs a store that fails from the start once', async () => {
    const one = sharedInstance({ activeBlocks: async () => Promise.reject(new Error('no route to host')) });
    await vi.waitFor(() => expect(one.events()).toHaveLength(1));
    expect(one.events()).toMatchObject([{ level: 'error', event: 'throttle_store_unavailable' }]);
    // The first report the store answers ends the outage.
    await one.call('m1', 'nope');
    expect(one.events().map((line) => line.event)).toEqual(['throttle_store_unavailable', 'throttle_store_recovered']);
  });

  it('goes on answering when the store throws at once instead of rejecting', async () => {
    const one = sharedInstance({
      recordFailure: () => {
        throw new Error('pool closed');
      },
    });
    for (let i = 0; i < 10; i++) expect((await one.call('m1', 'nope')).status).toBe(401);
    expect((await one.call('m1', 'key-one')).status).toBe(429);
    expect(one.events()).toMatchObject([{ level: 'error', event: 'throttle_store_unavailable' }]);
  });

  it('takes the answer to a report it did not wait for (the store failing) as its own: it lifts a block counted here alone', async () => {
    const one = sharedInstance();
    one.poll(pair({ failures: 9, version: v(1) }));
    one.hold();
    const ghost = one.call('ghost', 'x');
    await vi.waitFor(() => expect(one.held).toHaveLength(1));
    one.held.shift()!.reject(new Error('connection refused'));
    await ghost;
    one.hold(false);
    // The store is failing: this report is not waited for. Its answer (one failure since a reset elsewhere) lifts the block.
    one.answerNext([pair({ failures: 1, version: v(2) })]);
    expect((await one.call('m1', 'nope')).status).toBe(401);
    await vi.waitFor(async () => expect((await one.call('m1', 'key-one')).status).toBe(200), { timeout: 2000 });
  });

  it(`holds at most ${MAX_REPORTS_QUEUED} reports behind those in flight, writes them when the store answers, and says so once, even when the store never answered at start`, async () => {
    let releaseStart: ((records: ThrottleRecord[]) => void) | undefined;
    const one = sharedInstance({ activeBlocks: () => new Promise<ThrottleRecord[]>((resolve) => (releaseStart = resolve)) });
    one.hold();
    const total = MAX_REPORTS_IN_FLIGHT + MAX_REPORTS_QUEUED + 20;
    const answers = [];
    for (let i = 0; i < total; i++) answers.push(one.call('ghost', 'x', `10.2.${i >> 8}.${i & 255}`));
    await vi.waitFor(() => expect(one.events()).toHaveLength(1));
    expect(one.events()).toMatchObject([
      { level: 'warn', event: 'throttle_store_behind', msg: 'failures are counted in this instance only until the store catches up', queued: MAX_REPORTS_QUEUED },
    ]);
    // The start's read holds one of the slots.
    expect(one.writes).toHaveLength(MAX_REPORTS_IN_FLIGHT - 1);
    releaseStart!([]);
    while (one.held.length > 0) {
      one.held.shift()!.resolve([]);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(answers);
    expect(one.writes).toHaveLength(MAX_REPORTS_IN_FLIGHT - 1 + MAX_REPORTS_QUEUED);
  });
});

describe('FailureThrottle, the instance\'s own state', () => {
  const T = 1_700_000_000;
  const learned = (fields: Partial<ThrottleRecord>): ThrottleRecord => ({ ...pair({}), ...fields });

  it('never lifts a block by a failure counted after its window ended (a block longer than the window)', () => {
    const throttle = new FailureThrottle({ addressFailures: 2, addressBlockSeconds: 7200, addressWindowSeconds: 3600 });
    throttle.failed('192.0.2.1', undefined, T);
    throttle.failed('192.0.2.1', undefined, T);
    // A request checked before the block, failing an hour later.
    throttle.failed('192.0.2.1', undefined, T + 3600);
    expect(throttle.blocked('192.0.2.1', () => undefined, T + 3601)).toMatchObject({ scope: 'address', retryAfter: 3599 });
  });

  it('when full, forgets a pair block learned already ended before one in force (failures told the time)', () => {
    const throttle = new FailureThrottle({ maxEntries: 2, pairFailures: 1 });
    throttle.failed('192.0.2.1', 'm1', T);
    throttle.learn(learned({ address: '192.0.2.2', blocks: 1, blockedUntil: T - 10 }));
    throttle.failed('192.0.2.3', 'm1', T);
    expect(throttle.blocked('192.0.2.1', () => 'm1', T + 1)).toMatchObject({ scope: 'pair', retryAfter: 299 });
  });

  it('when full, forgets a pair block learned already ended before one in force (checks told the time)', () => {
    const throttle = new FailureThrottle({ maxEntries: 2 });
    expect(throttle.blocked('192.0.2.9', () => undefined, T)).toBeUndefined();
    throttle.learn(learned({ address: '192.0.2.1', blocks: 1, blockedUntil: T + 300 }));
    throttle.learn(learned({ address: '192.0.2.2', blocks: 1, blockedUntil: T - 10 }));
    throttle.learn(learned({ address: '192.0.2.3', blocks: 1, blockedUntil: T + 300 }));
    expect(throttle.blocked('192.0.2.1', () => 'm1', T + 1)).toMatchObject({ scope: 'pair', retryAfter: 299 });
  });
});

describe('a full shared store (docs/scaling.md#the-throttles-keys)', () => {
  it('logs throttle_full at most once a minute, with the failures since, and the instance still blocks alone', async () => {
    let told: ThrottleStoreListener | undefined;
    const one = sharedInstance({
      // The store could not count these failures: it says so, and answers no record.
      recordFailure: async () => (told!.full!(1000), []),
      subscribe(given) {
        told = given;
        return () => undefined;
      },
    });
    for (let i = 0; i < 3; i++) expect((await one.call('m1', 'nope')).status).toBe(401);
    expect(one.events()).toEqual([expect.objectContaining({ level: 'warn', event: 'throttle_full', cap: 1000, failures: 1 })]);
    one.advance(61);
    for (let i = 0; i < 7; i++) expect((await one.call('m1', 'nope')).status).toBe(401);
    expect(one.events().map((line) => [line.event, line.failures])).toEqual([['throttle_full', 1], ['throttle_full', 3]]);
    // Ten failures counted here alone: the pair is blocked on this instance.
    expect((await one.call('m1', 'key-one')).status).toBe(429);
  });
});
