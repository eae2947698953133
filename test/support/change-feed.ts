/**
 * A poll-only merchant running the documented sync loop with removals (docs/protocol.md#removals)
 * through `api.fetch`, one page per `step()`, so a test can change the storage between its pages.
 */
import { expect } from 'vitest';
import type { ChangedUserRecord } from '../../src/storage/contract.js';
import { call, ORIGIN } from './api.js';

export type FeedEntry = ChangedUserRecord | { shared_user_id: string; removed_at: string };

export class FeedClient {
  /** The merchant's copy, by shared_user_id. */
  readonly copy = new Map<string, ChangedUserRecord>();
  /** The updated_at (or removed_at) of the last entry seen: where the next round starts. */
  last: string | undefined;
  #next: string | undefined;
  #rounds = 0;

  constructor(
    private readonly api: { fetch(r: Request): Promise<Response> },
    private readonly headers: Record<string, string>,
    private readonly limit: number,
  ) {}

  /** True while a round is between pages. */
  get paging(): boolean {
    return this.#next !== undefined;
  }

  /** Fetches one page: the next of the round, or the first of a new one. */
  async step(): Promise<void> {
    const url =
      this.#next ??
      `${ORIGIN}/merchant/users?limit=${this.limit}&include_removed=true${this.last === undefined ? '' : `&updated_since=${encodeURIComponent(this.last)}`}`;
    const { status, body, response } = await call(this.api, url, { headers: this.headers });
    expect(status, JSON.stringify(body)).toBe(200);
    for (const entry of body.data as FeedEntry[]) {
      if ('removed_at' in entry) {
        this.copy.delete(entry.shared_user_id);
        this.last = entry.removed_at;
      } else {
        this.copy.set(entry.shared_user_id, entry);
        this.last = entry.updated_at;
      }
    }
    const link = response.headers.get('link');
    this.#next = link === null ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)![1];
    if (this.#next === undefined) this.#rounds++;
  }

  /** Finishes the round under way, then runs one whole round more. */
  async settle(): Promise<void> {
    let pages = 0;
    const rounds = this.#rounds + (this.paging ? 2 : 1);
    while (this.#rounds < rounds) {
      if (++pages > 10_000) throw new Error('the feed does not end');
      await this.step();
    }
  }
}
