/**
 * Preloaded into a bench server (`node --import ./bench/alloc-probe.mjs`) by
 * bench/alloc.ts: the first SIGUSR2 starts V8's sampling heap profiler with
 * the samples of collected objects kept (so it counts every byte allocated,
 * not only what survives), the second stops it and writes the profile to
 * BENCH_ALLOC_OUT. Plain JavaScript, so no TypeScript loader sits in the
 * measured process.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

const out = process.env.BENCH_ALLOC_OUT;
const interval = Number(process.env.BENCH_ALLOC_INTERVAL ?? 512);
const session = new Session();
session.connect();
let sampling = false;
process.on('SIGUSR2', async () => {
  if (!sampling) {
    sampling = true;
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', { samplingInterval: interval, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    console.error('ALLOC STARTED');
    return;
  }
  sampling = false;
  const { profile } = await session.post('HeapProfiler.stopSampling');
  writeFileSync(out, JSON.stringify(profile));
  console.error('ALLOC WRITTEN');
});
