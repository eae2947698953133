/**
 * A Map whose entries, once cleared, stay behind with an idle value until
 * many have gathered, for state kept per client or per key only while
 * something is under way (a check in flight). V8 allocates a Map's table
 * anew when a delete leaves it nearly empty, and a few clients set and clear
 * the same keys on every request: the single-user read paid about a fifth
 * of its time for it (docs/benchmarks.md#tables-allocated-per-request-6-december-2026).
 * Bounded: at most `maxIdle` idle entries besides the live ones.
 */
export class IdleKeepingMap<V> {
  readonly #entries = new Map<string, V>();
  readonly #idleValue: V;
  readonly #maxIdle: number;
  #idle = 0;

  constructor(idleValue: V, maxIdle = 1024) {
    this.#idleValue = idleValue;
    this.#maxIdle = maxIdle;
  }

  /** The value of `key`; the idle value when it has none. */
  get(key: string): V {
    const value = this.#entries.get(key);
    return value === undefined ? this.#idleValue : value;
  }

  /** Gives `key` a value other than the idle one (`clear` gives it that). */
  set(key: string, value: V): void {
    if (this.#isIdle(key)) this.#idle--;
    this.#entries.set(key, value);
  }

  /** Leaves `key` idle: kept, until more than `maxIdle` are, then every idle entry goes at once. */
  clear(key: string): void {
    if (!this.#entries.has(key) || this.#isIdle(key)) return;
    this.#entries.set(key, this.#idleValue);
    if (++this.#idle <= this.#maxIdle) return;
    for (const [name, value] of this.#entries) if (value === this.#idleValue) this.#entries.delete(name);
    this.#idle = 0;
  }

  /** Entries held, idle ones included (for tests: the bound). */
  get size(): number {
    return this.#entries.size;
  }

  #isIdle(key: string): boolean {
    return this.#entries.get(key) === this.#idleValue && this.#entries.has(key);
  }
}
