/**
 * The throttle's memory, bounded by count (docs/security.md#throttling):
 * when full, it forgets the oldest block if it has ended, else the plain
 * counter used longest ago, and the oldest block, in force or not, only when
 * every other entry is a block (blocks end in about the order they were set,
 * so the oldest is the one to look at, and one look keeps a set O(1)).
 * Without this, an attacker's failures from fresh addresses would push
 * their own blocked address out of a plain least-recently-used map and lift
 * its block early.
 */
export class BoundedStates<V> {
  readonly #max: number;
  readonly #blockedUntil: (value: V) => number;
  /** Entries without a block in force, least recently set first. */
  readonly #counting = new Map<string, V>();
  /** Entries blocked when last set, least recently set first. */
  readonly #blocked = new Map<string, V>();

  constructor(max: number, blockedUntil: (value: V) => number) {
    this.#max = max;
    this.#blockedUntil = blockedUntil;
  }

  get(key: string): V | undefined {
    return this.#blocked.get(key) ?? this.#counting.get(key);
  }

  /** Sets `key` as the most recent entry, then forgets one other entry if over the cap. */
  set(key: string, value: V, nowSeconds: number): void {
    this.#counting.delete(key);
    this.#blocked.delete(key);
    (this.#blockedUntil(value) > nowSeconds ? this.#blocked : this.#counting).set(key, value);
    if (this.size > this.#max) this.#forgetOne(key, nowSeconds);
  }

  delete(key: string): void {
    this.#counting.delete(key);
    this.#blocked.delete(key);
  }

  get size(): number {
    return this.#counting.size + this.#blocked.size;
  }

  #forgetOne(justSet: string, nowSeconds: number): void {
    const oldestBlocked = this.#blocked.keys().next().value;
    if (oldestBlocked !== undefined && this.#blockedUntil(this.#blocked.get(oldestBlocked)!) <= nowSeconds) return void this.#blocked.delete(oldestBlocked);
    const oldestCounting = this.#counting.keys().next().value;
    if (oldestCounting !== undefined && oldestCounting !== justSet) return void this.#counting.delete(oldestCounting);
    // Last resort: every other entry is a block in force.
    if (oldestBlocked !== undefined) this.#blocked.delete(oldestBlocked);
  }
}
