/**
 * vi.waitFor gives up after 1 s unless told otherwise: a tight timeout on a busy machine, where a
 * condition that holds in 50 ms on a quiet one (a log line written, a row replicated) can take
 * seconds. A wait that names no timeout of its own gets WAIT_TIMEOUT_MS instead; one that names
 * it keeps it. Loaded for every file by vitest.config.ts (setupFiles).
 */
import { vi } from 'vitest';

export const WAIT_TIMEOUT_MS = 20_000;

type WaitOptions = Parameters<typeof vi.waitFor>[1];

const waitFor = vi.waitFor;
vi.waitFor = ((callback: Parameters<typeof vi.waitFor>[0], options?: WaitOptions) =>
  waitFor(callback, typeof options === 'number' ? options : { timeout: WAIT_TIMEOUT_MS, ...options })) as typeof vi.waitFor;
