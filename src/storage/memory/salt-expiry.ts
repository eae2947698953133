/**
 * The replay store's live-salt counts (docs/protocol.md#a-bounded-replay-store): how many salts
 * are live, overall and per merchant, kept by expiry second rather than per salt, so the store's
 * caps are checked in constant time and Retry-After is the time until the oldest salt expires.
 * Apart from the store because it knows nothing of the table or the hash.
 */

/**
 * How many salts expire at each second, oldest second first: a sorted queue of (second, count)
 * in typed arrays, one entry per second that has salts (at most the window's length), never one
 * per salt.
 */
export class ExpiryCounts {
  #seconds = new Int32Array(4);
  #counts = new Uint32Array(4);
  #head = 0;
  #tail = 0;
  total = 0;

  add(second: number): this {
    this.total++;
    const seconds = this.#seconds;
    let i = this.#tail;
    // Nearly always the newest second, or close to it.
    if (i > this.#head && seconds[i - 1] === second) {
      this.#counts[i - 1]!++;
      return this;
    }
    if (i > this.#head && seconds[i - 1]! > second) {
      let lo = this.#head;
      let hi = i - 1;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (seconds[mid]! < second) lo = mid + 1;
        else hi = mid;
      }
      if (seconds[lo] === second) {
        this.#counts[lo]!++;
        return this;
      }
      i = lo;
    }
    const offset = i - this.#head;
    if (this.#tail === this.#seconds.length) this.#makeRoom();
    i = this.#head + offset;
    this.#seconds.copyWithin(i + 1, i, this.#tail);
    this.#counts.copyWithin(i + 1, i, this.#tail);
    this.#seconds[i] = second;
    this.#counts[i] = 1;
    this.#tail++;
    return this;
  }

  /** Drops the seconds before `now`; returns how many salts are left. */
  expire(now: number): number {
    while (this.#head < this.#tail && this.#seconds[this.#head]! < now) this.total -= this.#counts[this.#head++]!;
    if (this.#head === this.#tail) this.#head = this.#tail = 0;
    return this.total;
  }

  /** The earliest second with salts (only meaningful while `total` > 0). */
  oldest(): number {
    return this.#seconds[this.#head]!;
  }

  clear(): void {
    this.#head = this.#tail = 0;
    this.total = 0;
  }

  #makeRoom(): void {
    const used = this.#tail - this.#head;
    if (used <= this.#seconds.length >> 1) {
      this.#seconds.copyWithin(0, this.#head, this.#tail);
      this.#counts.copyWithin(0, this.#head, this.#tail);
    } else {
      const seconds = new Int32Array(this.#seconds.length * 2);
      const counts = new Uint32Array(this.#counts.length * 2);
      seconds.set(this.#seconds.subarray(this.#head, this.#tail));
      counts.set(this.#counts.subarray(this.#head, this.#tail));
      this.#seconds = seconds;
      this.#counts = counts;
    }
    this.#head = 0;
    this.#tail = used;
  }
}
