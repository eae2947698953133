/**
 * `timestampFutureTolerance` (docs/protocol.md#replay-and-timestamps): how far ahead of the clock a
 * `ts` may be. Its default is the tolerance, so nothing changes unasked (the same window, the same
 * message); set shorter, a `ts` past it is refused at step 5 as a timestamp failure, with a message
 * naming both sides, and the past side keeps the whole tolerance.
 */
import { describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { call, NOW, NOW_MS, signedUrl, testApi } from '../support/api.js';
import { contractSeed } from '../support/seeds.js';

const OK = '{"status":"ok","is_valid":true}';

describe('timestampFutureTolerance', () => {
  it('defaults to the tolerance: a ts 300 s ahead passes, 301 s is refused with the message of before', async () => {
    const { api } = testApi();
    expect((await call(api, signedUrl({ ts: NOW + 300 }))).text).toBe(OK);
    expect((await call(api, signedUrl({ ts: NOW + 301 }))).text).toBe(
      '{"status":"error","message":"Invalid timestamp: ts is outside the accepted window of 300 seconds from the server\'s time.","is_valid":false}',
    );
  });

  it('set to 30: a ts 30 s ahead passes, 31 s ahead is a timestamp failure, and 300 s behind still passes', async () => {
    const finished: { authFailure?: string }[] = [];
    const api = createMerchantApi({
      storage: new MemoryStorage(contractSeed(), { startedAt: NOW - 1000 }),
      now: () => NOW_MS,
      logger: silentLogger,
      timestampFutureTolerance: 30,
      hooks: [{ onFinish: (ctx) => void finished.push({ authFailure: ctx.authFailure }) }],
    });
    expect((await call(api, signedUrl({ ts: NOW + 30 }))).text).toBe(OK);
    const ahead = await call(api, signedUrl({ ts: NOW + 31 }));
    expect(ahead.status).toBe(400);
    expect(ahead.text).toBe(
      '{"status":"error","message":"Invalid timestamp: ts is outside the accepted window of 300 seconds before and 30 seconds after the server\'s time.","is_valid":false}',
    );
    expect(finished.at(-1)).toEqual({ authFailure: 'bad_timestamp' });
    expect((await call(api, signedUrl({ ts: NOW - 300 }))).text).toBe(OK);
    expect((await call(api, signedUrl({ ts: NOW - 301 }))).status).toBe(400);
  });

  it('is a whole number from 0 to timestampTolerance', () => {
    const storage = new MemoryStorage(contractSeed());
    for (const bad of [-1, 1.5, 301]) expect(() => createMerchantApi({ storage, timestampFutureTolerance: bad })).toThrow(/timestampFutureTolerance must be a whole number of seconds, from 0 to timestampTolerance/);
    expect(() => createMerchantApi({ storage, timestampTolerance: 60, timestampFutureTolerance: 0 })).not.toThrow();
  });
});
