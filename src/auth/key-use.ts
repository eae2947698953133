/**
 * When each key was last used (`last_used_at`), written off the request path: a request only
 * notes its key in a map (one lookup), at most once a minute per key a use is queued, and the
 * queue goes to the storage in one call (`Storage.recordKeyUse`) a second after its first entry.
 * So a key used a thousand times a second costs the storage one write a minute per instance,
 * and `merchant keys` tells whether a key is still in use to within about a minute.
 */
import type { KeyUse } from '../storage/contract.js';
import { formatEpochSeconds } from '../storage/timestamps.js';

/** A key's use is written at most once per this long (per instance). */
export const KEY_USE_INTERVAL_MS = 60_000;
/** How long the first queued use waits for others to join its batch. */
export const KEY_USE_BATCH_DELAY_MS = 1000;
/** The most keys remembered at once; beyond, the oldest notes are forgotten (a use is then written again). */
const MAX_NOTED_KEYS = 100_000;

export interface KeyUseRecorderOptions {
  /** Where the batches go (the storage's `recordKeyUse`). */
  write(uses: readonly KeyUse[]): Promise<void>;
  /** Told of a batch that could not be written (it is dropped: the next use a minute later is written). */
  onError?(error: unknown): void;
  /** Batch delay in ms (default `KEY_USE_BATCH_DELAY_MS`; tests shorten it). */
  batchDelayMs?: number;
}

export class KeyUseRecorder {
  /** When each key's use was last queued, in the handler's clock (ms), by key id. */
  readonly #noted = new Map<string, number>();
  #pending: KeyUse[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #flushing: Promise<void> | undefined;

  constructor(private readonly options: KeyUseRecorderOptions) {}

  /** Notes that `keyId` of `merchantId` was used at `nowMs`; queues a write when its last is a minute old. */
  note(merchantId: string, keyId: string, nowMs: number): void {
    const last = this.#noted.get(keyId);
    if (last !== undefined && nowMs - last < KEY_USE_INTERVAL_MS && nowMs >= last) return;
    if (last !== undefined) this.#noted.delete(keyId);
    else if (this.#noted.size >= MAX_NOTED_KEYS) this.#noted.delete(this.#noted.keys().next().value!);
    this.#noted.set(keyId, nowMs);
    this.#pending.push({ merchantId, keyId, at: formatEpochSeconds(Math.floor(nowMs / 1000), String((Math.floor(nowMs) % 1000) * 1000).padStart(6, "0")) });
    this.#timer ??= unref(setTimeout(() => void this.flush(), this.options.batchDelayMs ?? KEY_USE_BATCH_DELAY_MS));
  }

  /** Writes what is queued now (also what a shutdown may call); resolves once written or dropped. */
  async flush(): Promise<void> {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#flushing;
    const batch = this.#pending;
    if (batch.length === 0) return;
    this.#pending = [];
    this.#flushing = this.options.write(batch).then(
      () => undefined,
      (error: unknown) => this.options.onError?.(error),
    );
    await this.#flushing;
    this.#flushing = undefined;
  }
}

/** The batch timer alone must not keep a process alive (Node and Bun: `unref()`, Deno: `Deno.unrefTimer`). */
function unref(timer: ReturnType<typeof setTimeout>): ReturnType<typeof setTimeout> {
  if (typeof timer === 'object' && timer !== null && 'unref' in timer) (timer as { unref(): void }).unref();
  else (globalThis as { Deno?: { unrefTimer?(id: number): void } }).Deno?.unrefTimer?.(timer as unknown as number);
  return timer;
}
