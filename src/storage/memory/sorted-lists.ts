/**
 * Sorted lists of the memory storage's users: binary search, inserting and removing in order, and
 * the merge of a few sorted lists from their positions, which every listing is made of. Each counts
 * the entries it looks at, so that the benches can see a page's work (`MemoryUserIndex.lastExamined`).
 */
import type { UserRecord, UserRecordPage } from '../contract.js';

/** Entries looked at by the running `page` call (reset at its start), binary searches included. */
export const examined = { count: 0 };

/** A sorted list read from `at` up to `end`. */
export interface Cursor {
  list: UserRecord[];
  at: number;
  end: number;
}

/** Whether `list` is in `compare` order already. */
export function isSorted<T>(list: T[], compare: (x: T, y: T) => number): boolean {
  for (let i = 1; i < list.length; i++) if (compare(list[i - 1]!, list[i]!) > 0) return false;
  return true;
}

/** The next record of the merged cursors in `compare` order (and moves past it), or undefined. */
export function next(cursors: Cursor[], compare: (x: UserRecord, y: UserRecord) => number): UserRecord | undefined {
  let best: Cursor | undefined;
  for (const cursor of cursors) {
    if (cursor.at < cursor.end && (!best || compare(cursor.list[cursor.at]!, best.list[best.at]!) < 0)) best = cursor;
  }
  if (!best) return undefined;
  examined.count++;
  return best.list[best.at++];
}

/** The first `limit` records of the merged cursors. */
export function merge(cursors: Cursor[], compare: (x: UserRecord, y: UserRecord) => number, limit: number): UserRecordPage {
  if (cursors.length === 1) {
    const [{ list, at, end }] = cursors as [Cursor];
    const page = list.slice(at, Math.min(end, at + limit));
    examined.count += page.length;
    return page;
  }
  const page: UserRecord[] = [];
  while (page.length < limit) {
    const record = next(cursors, compare);
    if (record === undefined) break;
    page.push(record);
  }
  return page;
}

/** The first index of the sorted `list` whose record is not `before` (a prefix predicate). */
export function search<T>(list: T[], before: (entry: T) => boolean): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    examined.count++;
    if (before(list[mid]!)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Puts `record` into the sorted `list` at its place. */
export function insert<T>(list: T[], record: T, compare: (x: T, y: T) => number): void {
  list.splice(search(list, (r) => compare(r, record) < 0), 0, record);
}

/** Takes `record` out of the sorted `list`, if it is there. */
export function remove<T>(list: T[], record: T, compare: (x: T, y: T) => number): void {
  const at = search(list, (r) => compare(r, record) < 0);
  if (list[at] === record) list.splice(at, 1);
}
