/**
 * (2, 4, 5) merchant-api on the memory storage, served by the adapter of the
 * runtime running this file: `merchant-api/node`, `/bun` or `/deno`, loaded
 * from the built package (a snapshot of dist/, see bench/run.ts).
 */
import { announce, CURSOR_SECRET, exitOnSignal, makeUsers, MERCHANT_ID, MERCHANT_KEY, portFromEnv, PUBLIC_URL, TIMESTAMP_TOLERANCE } from './data.mjs';

const runtime = 'Bun' in globalThis ? 'bun' : 'Deno' in globalThis ? 'deno' : 'node';
// BENCH_DIST: another build to compare against (run.ts --baseline-dist).
const distDir = globalThis.process?.env?.BENCH_DIST;
const dist = distDir ? new URL(`file://${distDir.replace(/\/?$/, '/')}`) : new URL('../.dist/', import.meta.url);
const { createMerchantApi } = await import(new URL('index.js', dist).href);
const { MemoryStorage } = await import(new URL('storage/memory.js', dist).href);
const { serve } = await import(new URL(`${runtime}.js`, dist).href);

// BENCH_KEY_ALLOW_FROM=N (this build only, not a baseline): the key carries an allowlist of N
// networks whose last holds the load generator (127.0.0.0/8), so every request scans them all.
const allowCount = distDir ? 0 : Number(globalThis.process?.env?.BENCH_KEY_ALLOW_FROM ?? 0);
const allowFrom = allowCount > 0 ? [...Array.from({ length: allowCount - 1 }, (_, i) => `198.${18 + (i >> 8)}.${i & 255}.0/24`), '127.0.0.0/8'] : undefined;
const storage = new MemoryStorage({
  merchants: [{ id: MERCHANT_ID, status: 'active', keys: [MERCHANT_KEY], ...(allowFrom && { keyDetails: [{ limits: { allowFrom } }] }) }],
  users: makeUsers().map((user) => ({ merchant_id: MERCHANT_ID, ...user })),
});
// As deployed: the access log on standard output (which the bench reads and
// drops) and the tracing hooks (no SDK: no-op). BENCH_OBSERVABILITY=off turns
// both off, to measure what they cost.
// BENCH_OBSERVABILITY=log or =trace keeps only that one, to see what each costs.
const observability = globalThis.process?.env?.BENCH_OBSERVABILITY ?? 'on';
const api = createMerchantApi({
  storage,
  publicUrl: PUBLIC_URL,
  timestampTolerance: TIMESTAMP_TOLERANCE,
  cursorSecret: CURSOR_SECRET,
  accessLog: observability === 'on' || observability === 'log',
  tracing: observability === 'on' || observability === 'trace',
  // One merchant is the whole load here: capacity, not fairness, is measured
  // (bench/abuse-fairness.ts measures the limit), so its listings are not capped.
  merchantConcurrency: 100_000,
  // The standalone server's default (FAIR_SHARE=true), off with the rest of
  // the optional features in the quiet variant.
  fairShare: observability === 'off' ? false : {},
});
const served = await serve(api, { port: portFromEnv(), hostname: '127.0.0.1' });
announce(new URL(served.url).port);
exitOnSignal(() => served.close());
