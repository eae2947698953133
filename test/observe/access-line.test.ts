/**
 * The access line of the built-in logger (src/observe/access-log.ts), written as text from cached
 * pieces, is byte for byte the line the same logger writes from the object of any other logger's
 * path (`logger.info(fields)`, JSON.stringify): for every request id, method, route, status,
 * duration, size, merchant, address, code and cut, repeated values included (the caches).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RequestContext } from '../../src/http/context.js';
import { accessLogHooks } from '../../src/observe/access-log.js';
import { createJsonLogger, isoAt, type Logger } from '../../src/observe/logger.js';

/** The lines of a built-in logger, and the same logger seen as a plain pino-shaped one (no fast path). */
function loggers() {
  const written: string[] = [];
  const logger = createJsonLogger({ write: (text) => written.push(text) });
  const plain: Logger = { debug: (f, m) => logger.debug(f, m), info: (f, m) => logger.info(f, m), warn: (f, m) => logger.warn(f, m), error: (f, m) => logger.error(f, m) };
  const take = () => {
    logger.flush();
    const text = written.join('');
    written.length = 0;
    // The time differs from one line to the next: compared apart.
    return text.replace(/^\{"time":"[^"]+"/gm, '{"time":"T"');
  };
  return { fast: accessLogHooks(logger).onFinish!, slow: accessLogHooks(plain).onFinish!, take };
}

const visibleAscii = fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 128 });
const line = fc.record({
  requestId: fc.oneof(fc.uuid(), visibleAscii, fc.constantFrom('quote"and\\back', 'x')),
  method: fc.constantFrom('GET', 'HEAD', 'POST', 'PURGE', 'M"E', 'DELETE'),
  route: fc.option(fc.oneof(fc.constantFrom('/validatesignature', '/merchant/users/{shared_user_id}'), fc.string()), { nil: undefined }),
  status: fc.oneof(fc.constantFrom(200, 400, 404, 429, 503), fc.integer({ min: 100, max: 599 }), fc.integer({ min: 0, max: 1000 })),
  durationMs: fc.oneof(fc.double({ min: 0, max: 1e6, noNaN: true }), fc.constantFrom(0, 0.0004, 0.1234567, 12.5)),
  bytes: fc.nat(),
  merchantId: fc.option(fc.oneof(fc.constantFrom('m1', 'bench-merchant'), fc.string()), { nil: undefined }),
  clientAddress: fc.option(fc.oneof(fc.constantFrom('127.0.0.1', '::1'), fc.string({ maxLength: 64 })), { nil: undefined }),
  errorCode: fc.option(fc.constantFrom('not_found', 'signature_mismatch', 'co"de'), { nil: undefined }),
  aborted: fc.boolean(),
});

describe('the access line of the built-in logger', () => {
  it('is byte for byte what JSON.stringify of its fields writes, for any request, values repeated or not', () => {
    const { fast, slow, take } = loggers();
    fc.assert(
      fc.property(fc.array(line, { minLength: 1, maxLength: 6 }), (requests) => {
        for (const r of requests) {
          const ctx = { requestId: r.requestId, method: r.method, route: r.route, merchantId: r.merchantId, clientAddress: r.clientAddress, errorCode: r.errorCode } as unknown as RequestContext;
          const summary = { status: r.status, bytes: r.bytes, durationMs: r.durationMs, aborted: r.aborted };
          fast(ctx, summary);
          const written = take();
          slow(ctx, summary);
          expect(written).toBe(take());
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('the time of a log line', () => {
  it('is new Date(now).toISOString() for any sequence of clock readings, within a second or across seconds, forwards or back', () => {
    // Clock readings from 1900 to 2100 (negative ones too), and walks of a few ms to a few seconds from them, as a busy log reads the clock.
    const start = fc.integer({ min: -2_208_988_800_000, max: 4_102_444_800_000 });
    const step = fc.oneof(fc.constantFrom(0, 1, -1, 999, 1000, -1000), fc.integer({ min: -3000, max: 3000 }));
    fc.assert(
      fc.property(start, fc.array(step, { minLength: 1, maxLength: 40 }), (first, steps) => {
        let now = first;
        for (const delta of [0, ...steps]) {
          now += delta;
          expect(isoAt(now)).toBe(new Date(now).toISOString());
        }
      }),
      { numRuns: 500 },
    );
  });
});
