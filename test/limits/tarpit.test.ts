/**
 * Late refusals for connections that ignore Retry-After (src/limits/tarpit.ts,
 * docs/security.md#clients-that-ignore-retry-after): a connection refused
 * with 429 that sends again before its Retry-After has passed is answered
 * when the time is up (at most maxDelayMs); one that waited, and any other
 * connection, is answered at once. Against the Tarpit itself, through
 * api.fetch with connections the test names, and through the standalone
 * server on Node, Bun and Deno with a keep-alive connection.
 */
import { Agent } from 'node:http';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Tarpit } from '../../src/limits/tarpit.js';
import { createMetrics } from '../../src/observe/metrics.js';
import { basic, call, ORIGIN, testApi } from '../support/api.js';
import { send } from '../support/http-client.js';
import { RUNTIMES, useCliServer } from '../support/processes.js';
import { conformanceSeed, MERCHANTS } from '../support/seeds.js';

describe('Tarpit', () => {
  it('holds back a refusal by what is left of the last Retry-After on that connection, at most maxDelayMs', () => {
    const tarpit = new Tarpit({ maxDelayMs: 5000 });
    expect(tarpit.delay('a 1', 2, 0)).toBe(0);
    expect(tarpit.delay('a 1', 2, 500)).toBe(1500);
    // Due at 500 + 1500 + 2000 = 4000; it came back at 4000: on time.
    expect(tarpit.delay('a 1', 30, 4000)).toBe(0);
    expect(tarpit.delay('a 1', 30, 4001)).toBe(5000);
    // Another connection of the same address is its own.
    expect(tarpit.delay('a 2', 30, 4001)).toBe(0);
  });

  it('allows a client that waited as told a moment early by our clock', () => {
    const tarpit = new Tarpit();
    tarpit.delay('a 1', 1, 0);
    expect(tarpit.delay('a 1', 1, 950)).toBe(0);
  });

  it('remembers at most maxEntries connections, forgetting the one refused longest ago', () => {
    const tarpit = new Tarpit({ maxEntries: 2 });
    tarpit.delay('a', 10, 0);
    tarpit.delay('b', 10, 1);
    tarpit.delay('a', 10, 2); // refused again: now the newest
    tarpit.delay('c', 10, 3); // forgets b
    expect(tarpit.size).toBe(2);
    expect(tarpit.delay('b', 10, 4)).toBe(0);
    expect(tarpit.delay('c', 10, 5)).toBeGreaterThan(0);
  });

  /** Refusals of several connections, interleaved: which connection, its Retry-After, and what the client adds to the wait it was told (or takes off it). */
  const refusals = fc.array(fc.record({ connection: fc.integer({ min: 0, max: 3 }), retryAfter: fc.integer({ min: 1, max: 8 }), extraMs: fc.integer({ min: 0, max: 3000 }) }), { minLength: 1, maxLength: 200 });

  it('never holds back a client that waits its Retry-After after each answer, whatever the others do (property)', () => {
    fc.assert(
      fc.property(refusals, fc.integer({ min: 0, max: 60_000 }), (steps, maxDelayMs) => {
        const tarpit = new Tarpit({ maxDelayMs });
        // When each connection may send again: its last answer plus its Retry-After plus what it adds.
        const nextSend = new Map<number, number>();
        let now = 0;
        for (const { connection, retryAfter, extraMs } of steps) {
          now = Math.max(now, nextSend.get(connection) ?? 0);
          expect(tarpit.delay(`c${connection}`, retryAfter, now)).toBe(0);
          nextSend.set(connection, now + retryAfter * 1000 + extraMs);
        }
      }),
    );
  });

  it('answers a client that resends at once about once per Retry-After, and never later than maxDelayMs (property)', () => {
    fc.assert(
      fc.property(refusals, fc.integer({ min: 1, max: 10_000 }), (steps, maxDelayMs) => {
        const tarpit = new Tarpit({ maxDelayMs });
        // Each connection resends the moment its answer arrives: answeredAt is when that was, and what it was told.
        const last = new Map<number, { answeredAt: number; retryAfter: number }>();
        for (const { connection, retryAfter } of steps) {
          const previous = last.get(connection);
          const sentAt = previous?.answeredAt ?? 0;
          const wait = tarpit.delay(`c${connection}`, retryAfter, sentAt);
          expect(wait).toBeGreaterThanOrEqual(0);
          expect(wait).toBeLessThanOrEqual(maxDelayMs);
          if (previous) expect(wait).toBe(Math.min(previous.retryAfter * 1000, maxDelayMs));
          last.set(connection, { answeredAt: sentAt + wait, retryAfter });
        }
      }),
    );
  });

  it('checks its options', () => {
    expect(() => new Tarpit({ maxDelayMs: -1 })).toThrow(/maxDelayMs/);
    expect(() => new Tarpit({ maxEntries: 0 })).toThrow(/maxEntries/);
  });
});

describe('late refusals through api.fetch', () => {
  /**
   * m1's pair blocked for 1 s after 10 wrong keys from one address; then the
   * right key again on the refused connection and, right after it, on another.
   * Answers the order in which the two were answered and how long the first took.
   */
  async function blockedThenRetry(options: Parameters<typeof testApi>[0], address = '192.0.2.7', retryAddress = address) {
    const { api } = testApi({ tracing: false, throttle: { pairBlockSeconds: 1 }, ...options });
    const from = (clientPort: number, clientAddress: string) => ({ fetch: (request: Request) => api.fetch(request, { clientAddress, clientPort }) });
    const list = (port: number, key: string, sender = address) => call(from(port, sender), `${ORIGIN}/merchant/users?limit=1`, { headers: basic('m1', key) });
    for (let i = 0; i < 10; i++) expect((await list(1, `wrong-${i}`)).status).toBe(401);
    const first = await list(1, 'wrong-again');
    expect(first.status).toBe(429);
    expect(first.response.headers.get('retry-after')).toBe('1');
    const order: string[] = [];
    const started = performance.now();
    let samePortMs = 0;
    const answered = (name: string) => (answer: { status: number }) => {
      expect(answer.status).toBe(429);
      order.push(name);
      if (name === 'same port') samePortMs = performance.now() - started;
    };
    await Promise.all([list(1, 'key-one', retryAddress).then(answered('same port')), list(2, 'key-one').then(answered('other port'))]);
    return { order, samePortMs };
  }

  it('answers a connection that comes back at once only when its Retry-After is up, and another connection before it', async () => {
    const { order, samePortMs } = await blockedThenRetry({});
    expect(order).toEqual(['other port', 'same port']);
    expect(samePortMs).toBeGreaterThanOrEqual(850);
  });

  it('takes the same port from another address of the IPv6 /64 as the same connection', async () => {
    const { order, samePortMs } = await blockedThenRetry({}, '2001:db8:5:5::1', '2001:db8:5:5:beef::2');
    expect(order).toEqual(['other port', 'same port']);
    expect(samePortMs).toBeGreaterThanOrEqual(850);
  });

  it('answers at once with tarpit: false: in the order asked', async () => {
    const { order } = await blockedThenRetry({ tarpit: false });
    expect(order).toEqual(['same port', 'other port']);
  });

  it('keeps a held refusal out of merchant_api_request_duration_seconds, in a histogram of its own', async () => {
    const metrics = createMetrics({ processMetrics: false });
    await blockedThenRetry({ hooks: metrics.hooks, accessLog: false });
    const count = async (name: string) =>
      (await metrics.registry.getSingleMetric(name)!.get()).values.find((v) => (v as { metricName?: string }).metricName === `${name}_count` && v.labels.route === '/merchant/users')?.value;
    // 10 wrong keys, the first 429, the other port's 429: answered at once. The same port's 429: held.
    expect(await count('merchant_api_request_duration_seconds')).toBe(12);
    expect(await count('merchant_api_held_refusal_duration_seconds')).toBe(1);
  });

  it('checks its option when the handler is created', () => {
    expect(() => testApi({ tarpit: { maxDelayMs: 120_000 } })).toThrow(/maxDelayMs/);
  });
});

const { main } = MERCHANTS;

for (const runtime of RUNTIMES) {
  describe(`late refusals on ${runtime}`, () => {
    const server = useCliServer(runtime, conformanceSeed(), { AUTH_BLOCK_SECONDS: '2' });

    it('holds back the refusal of a keep-alive connection that resends at once, not that of a new connection', async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const list = (key: string, viaAgent = true) => send(`${server.url}/merchant/users?limit=1`, { headers: basic(main.id, key), agent: viaAgent ? agent : undefined });
        for (let i = 0; i < 10; i++) expect((await list(`wrong-${i}`)).status).toBe(401);
        const refused = await list('wrong-again');
        expect(refused.status).toBe(429);
        expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
        // Both at once, while the 2 s block lasts: the held one answers when it is up, the new connection before it.
        const started = performance.now();
        const order: string[] = [];
        const took = (name: string) => (answer: { status: number }) => (order.push(name), { status: answer.status, ms: performance.now() - started });
        const [again, fresh] = await Promise.all([list(main.keys[0]!).then(took('held')), list(main.keys[0]!, false).then(took('new connection'))]);
        expect(again.status).toBe(429);
        expect(again.ms).toBeGreaterThanOrEqual(900);
        expect(fresh.status).toBe(429);
        expect(order).toEqual(['new connection', 'held']);
      } finally {
        agent.destroy();
      }
    });
  });
}
