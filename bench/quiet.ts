/**
 * On a shared machine other work lands on the server's core too. Before each
 * measurement, wait (up to a limit) until that core is nearly idle, so fewer
 * runs are disturbed; the server's own CPU share per run shows what remained.
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

function coreTimes(core: number): { busy: number; total: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n').find((l) => l.startsWith(`cpu${core} `));
    if (!line) return undefined;
    const [user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number) as number[];
    const busy = user! + nice! + system! + irq! + softirq! + steal!;
    return { busy, total: busy + idle! + iowait! };
  } catch {
    return undefined;
  }
}

/** Busy share of `core` over `ms` milliseconds (0-1), or undefined without /proc. */
export async function coreBusy(core: number, ms = 500): Promise<number | undefined> {
  const a = coreTimes(core);
  await sleep(ms);
  const b = coreTimes(core);
  if (!a || !b || b.total === a.total) return undefined;
  return (b.busy - a.busy) / (b.total - a.total);
}

/** Waits until `core` is below `threshold` busy, at most `maxMs`; returns the last reading. */
export async function waitForQuietCore(core: number, threshold = 0.15, maxMs = 10_000): Promise<number | undefined> {
  const deadline = Date.now() + maxMs;
  let busy = await coreBusy(core);
  while (busy !== undefined && busy > threshold && Date.now() < deadline) busy = await coreBusy(core);
  return busy;
}
