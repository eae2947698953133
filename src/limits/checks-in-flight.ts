/**
 * Key checks under way, per address and per (claimed merchant, address)
 * (docs/security.md#throttling). The throttle counts a failure once its
 * answer is decided, after the comparison; without this, every request of a
 * burst sent at once would find the count as it was before the burst, and
 * each would get its comparison. A check is therefore held here from before
 * its key is compared until its outcome is counted: the gate starts one only
 * while the checks under way still fit in the failures left before a block,
 * and the others wait for one to end (a merchant's own burst of right keys
 * waits a comparison, never a 429).
 * Bounded: an entry lives while its check runs (then idle, among at most
 * 1,024 kept for reuse: src/limits/idle-keeping-map.ts), and the waiters are capped.
 */
import { IdleKeepingMap } from './idle-keeping-map.js';

/** Requests waiting for a check to end, in all: beyond, a burst is refused at once. */
export const MAX_WAITING = 10_000;

export class ChecksInFlight {
  readonly #running = new IdleKeepingMap<number>(0);
  readonly #waiting = new Map<string, Set<() => void>>();
  #waiters = 0;

  running(key: string): number {
    return this.#running.get(key);
  }

  get waiters(): number {
    return this.#waiters;
  }

  start(keys: readonly string[]): void {
    for (const key of keys) this.#running.set(key, this.running(key) + 1);
  }

  /** Ends a check started under `keys`, and wakes whoever waits on them. */
  end(keys: readonly string[]): void {
    for (const key of keys) {
      const left = this.running(key) - 1;
      if (left > 0) this.#running.set(key, left);
      else this.#running.clear(key);
      const waiting = this.#waiting.get(key);
      if (waiting === undefined) continue;
      this.#waiting.delete(key);
      for (const wake of waiting) wake();
    }
  }

  /** Resolves true when a check under one of `keys` ends, false after `ms`. */
  nextEnd(keys: readonly string[], ms: number): Promise<boolean> {
    this.#waiters++;
    return new Promise<boolean>((resolve) => {
      const settle = (ended: boolean) => {
        clearTimeout(timer);
        this.#waiters--;
        for (const key of keys) {
          const waiting = this.#waiting.get(key);
          waiting?.delete(wake);
          if (waiting?.size === 0) this.#waiting.delete(key);
        }
        resolve(ended);
      };
      const wake = () => settle(true);
      const timer = setTimeout(() => settle(false), ms);
      for (const key of keys) {
        let waiting = this.#waiting.get(key);
        if (waiting === undefined) this.#waiting.set(key, (waiting = new Set()));
        waiting.add(wake);
      }
    });
  }
}
