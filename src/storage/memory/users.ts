/**
 * The memory storage's users (docs/protocol.md#users): per merchant, the records by id with the
 * time each last changed, and five sorted lists of the same records that serve every listing in
 * bounded work, following the plan of `../user-pages.ts` (the MySQL storage follows it too, with
 * the same constants):
 * - by `shared_user_id` in code-point order, one list per activity (`deactivated_at` null or
 *   not): id order, with or without `active`, is a merge of at most two lists from the position;
 * - by `(date_joined, shared_user_id)`, one list per activity: date ranges are counted by binary
 *   search, small ones read, and `order=date_joined` merges at most two lists from the position;
 * - by `(updated_at, shared_user_id)`, one list: `order=updated_at` reads it from the position,
 *   checking the other filters, at most `scanBudget` entries a page.
 * Every write keeps the lists in step (`put`); a bulk load appends and sorts once (`add`, `seal`).
 * `updated_at` comes from the seed, else it is the load time; `put` stamps a changed record with
 * a clock that never goes back (docs/protocol.md#changed-since).
 */
import type { ChangedUserRecord, UserPageQuery, UserRecord, UserRecordPage } from '../contract.js';
import { USER_RECORD_KEYS } from '../contract.js';
import { formatEpochSeconds } from '../timestamps.js';
import { compareCodePoints } from '../order.js';
import type { SeedUser } from '../seed/seed.js';
import { DEFAULT_PAGE_PLAN, hasDateFilter, type PagePlan } from '../user-pages.js';
import { examined, insert, isSorted, merge, next, remove, search } from './sorted-lists.js';

/** Index 0: deactivated users; 1: active users. */
type ByActivity = [UserRecord[], UserRecord[]];

/** A user's record with the time it last changed (canonical). */
interface Change {
  record: UserRecord;
  updatedAt: string;
}

// UTF-16 order equals code-point order unless a surrogate meets U+E000-U+FFFF: ids without any
// unit from U+D800 up compare with the native `<`, which needs no per-character loop as compareCodePoints does.
const NOT_CODE_UNIT_ORDERED = /[\uD800-\uFFFF]/;

const nativeCompare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

class MerchantUsers {
  readonly records = new Map<string, Change>();
  readonly byId: ByActivity = [[], []];
  readonly byJoined: ByActivity = [[], []];
  byUpdated: Change[] = [];
  /** Until an id needs it, ids compare with the native `<`. */
  compareIds: (a: string, b: string) => number = nativeCompare;
  /** Records were appended by `add` and the lists are not sorted yet. */
  unsorted = false;

  readonly compareById = (x: UserRecord, y: UserRecord): number => this.compareIds(x.shared_user_id, y.shared_user_id);
  readonly compareByJoined = (x: UserRecord, y: UserRecord): number =>
    x.date_joined < y.date_joined ? -1 : x.date_joined > y.date_joined ? 1 : this.compareIds(x.shared_user_id, y.shared_user_id);
  readonly compareByUpdated = (x: Change, y: Change): number =>
    x.updatedAt < y.updatedAt ? -1 : x.updatedAt > y.updatedAt ? 1 : this.compareIds(x.record.shared_user_id, y.record.shared_user_id);

  noteId(id: string): void {
    if (this.compareIds === nativeCompare && NOT_CODE_UNIT_ORDERED.test(id)) this.compareIds = compareCodePoints;
  }

  sort(): void {
    if (!this.unsorted) return;
    for (const a of [0, 1] as const) {
      this.byId[a] = this.#sortById(this.byId[a]);
      this.byJoined[a] = this.#sortByJoined(this.byJoined[a]);
    }
    this.byUpdated = this.#sortByUpdated(this.byUpdated);
    this.unsorted = false;
  }

  // A seed without `updated_at` stamps every user with the load time: then id order is the order,
  // merged from the two sorted id lists in linear time.
  #sortByUpdated(list: Change[]): Change[] {
    if (isSorted(list, this.compareByUpdated)) return list;
    if (list.some((change) => change.updatedAt !== list[0]!.updatedAt)) return list.sort(this.compareByUpdated);
    const cursors = this.byId.map((ids) => ({ list: ids, at: 0, end: ids.length }));
    const merged: Change[] = [];
    for (let record = next(cursors, this.compareById); record !== undefined; record = next(cursors, this.compareById)) merged.push(this.records.get(record.shared_user_id)!);
    return merged;
  }

  // Sorting a large seed with a comparator of strings held up its loading
  // (docs/benchmarks.md#figures-behind-choices-in-the-code); instead an export in key order is
  // checked in one pass, and otherwise native ids sort natively, timestamps as numbers.

  #sortById(list: UserRecord[]): UserRecord[] {
    if (isSorted(list, this.compareById)) return list;
    if (this.compareIds !== nativeCompare) return list.sort(this.compareById);
    const ids = list.map((record) => record.shared_user_id).sort();
    return ids.map((id) => this.records.get(id)!.record);
  }

  #sortByJoined(list: UserRecord[]): UserRecord[] {
    if (isSorted(list, this.compareByJoined)) return list;
    const n = list.length;
    // YYYYMMDDhhmmss and the microseconds of each canonical date_joined, as numbers.
    const seconds = new Float64Array(n);
    const micros = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      const text = list[i]!.date_joined;
      if (text.length !== 32) return list.sort(this.compareByJoined);
      let whole = 0;
      for (const at of SECOND_DIGITS) whole = whole * 10 + text.charCodeAt(at) - 48;
      let fraction = 0;
      for (let at = 20; at < 26; at++) fraction = fraction * 10 + text.charCodeAt(at) - 48;
      seconds[i] = whole;
      micros[i] = fraction;
    }
    const order = new Uint32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    order.sort((x, y) => seconds[x]! - seconds[y]! || micros[x]! - micros[y]! || this.compareById(list[x]!, list[y]!));
    return Array.from(order, (i) => list[i]!);
  }
}

const SECOND_DIGITS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];

/** Users per merchant with the sorted lists every listing reads. */
export class MemoryUserIndex {
  readonly #merchants = new Map<string, MerchantUsers>();
  readonly #plan: PagePlan;
  #count = 0;
  /** The latest `updated_at` held or handed out (canonical, so string order is time order): the clock never goes below it. */
  #latest = '';
  /**
   * The stamp of users loaded without `updated_at`: given (a seed file's modification time, the
   * same in every process loading it, so a cursor of `order=updated_at` from one worker goes on
   * in another), else the load time, taken once.
   */
  #loadStamp: string | undefined;

  /**
   * `plan`: the bounds of `./user-pages.ts` (tests only; the defaults are what MySQL uses).
   * `loadStamp`: the `updated_at` of users added without one (canonical); default the load time.
   */
  constructor(plan: PagePlan = DEFAULT_PAGE_PLAN, loadStamp?: string) {
    this.#plan = { ...plan };
    this.#loadStamp = loadStamp;
  }

  /** Unix microseconds as a canonical timestamp, for `loadStamp`. */
  static stampOf(micros: number): string {
    return formatMicros(micros);
  }

  /** An index of seed users (`merchant_id` plus the record); a repeated id keeps its last record. */
  static fromSeedUsers(users: Iterable<SeedUser>, plan?: PagePlan): MemoryUserIndex {
    const index = new MemoryUserIndex(plan);
    const repeated: SeedUser[] = [];
    for (const { merchant_id, updated_at, ...record } of users) {
      if (!index.add(merchant_id, record, updated_at)) repeated.push({ merchant_id, updated_at, ...record });
    }
    index.seal();
    for (const { merchant_id, updated_at, ...record } of repeated) index.put(merchant_id, record, updated_at);
    return index;
  }

  /** How many users are held, over all merchants. */
  get size(): number {
    return this.#count;
  }

  /** How many records the last `page` call of any index looked at, binary searches included (for the benches). */
  static get lastExamined(): number {
    return examined.count;
  }

  /** The user `sharedUserId` of `merchantId`, or undefined. */
  get(merchantId: string, sharedUserId: string): UserRecord | undefined {
    return this.#merchants.get(merchantId)?.records.get(sharedUserId)?.record;
  }

  /** When the user `sharedUserId` of `merchantId` last changed (canonical), or undefined. */
  updatedAt(merchantId: string, sharedUserId: string): string | undefined {
    return this.#merchants.get(merchantId)?.records.get(sharedUserId)?.updatedAt;
  }

  /**
   * Adds or replaces a user (the record is kept as given), keeping every list sorted. A record
   * equal to the one held changes nothing; otherwise it is stamped `updatedAt`, by default now.
   * Returns whether anything changed.
   */
  put(merchantId: string, record: UserRecord, updatedAt?: string): boolean {
    const users = this.#usersOf(merchantId);
    users.sort();
    users.noteId(record.shared_user_id);
    const old = users.records.get(record.shared_user_id);
    if (old) {
      if (updatedAt === undefined && sameRecord(old.record, record)) return false;
      remove(users.byId[activity(old.record)], old.record, users.compareById);
      remove(users.byJoined[activity(old.record)], old.record, users.compareByJoined);
      remove(users.byUpdated, old, users.compareByUpdated);
    } else {
      this.#count++;
    }
    const change: Change = { record, updatedAt: updatedAt === undefined ? this.#now() : this.#held(updatedAt) };
    insert(users.byId[activity(record)], record, users.compareById);
    insert(users.byJoined[activity(record)], record, users.compareByJoined);
    insert(users.byUpdated, change, users.compareByUpdated);
    users.records.set(record.shared_user_id, change);
    return true;
  }

  /**
   * Bulk load: appends a user without sorting (call `seal` when done). Returns false, adding
   * nothing, when the merchant already has a user with this id.
   */
  add(merchantId: string, record: UserRecord, updatedAt?: string): boolean {
    const users = this.#usersOf(merchantId);
    if (users.records.has(record.shared_user_id)) return false;
    // The load time as it is, even before a seed's stamps from the future: only changes must come after them.
    const change: Change = { record, updatedAt: this.#held(updatedAt ?? (this.#loadStamp ??= formatMicros(Date.now() * 1000))) };
    users.records.set(record.shared_user_id, change);
    users.noteId(record.shared_user_id);
    users.byId[activity(record)].push(record);
    users.byJoined[activity(record)].push(record);
    users.byUpdated.push(change);
    users.unsorted = true;
    this.#count++;
    return true;
  }

  /** Sorts what `add` appended (sorted input sorts in linear time). */
  seal(): void {
    for (const users of this.#merchants.values()) users.sort();
  }

  /** A stamp for a change made now: the wall clock in microseconds, never below one already held. */
  #now(): string {
    const wall = formatMicros(Date.now() * 1000);
    this.#latest = wall > this.#latest ? wall : nextMicrosecond(this.#latest);
    return this.#latest;
  }

  /** A stamp given by the seed or the caller (canonical), remembered so that later stamps come after it. */
  #held(updatedAt: string): string {
    if (updatedAt > this.#latest) this.#latest = updatedAt;
    return updatedAt;
  }

  /** One page (see `UserPageQuery`, `UserRecordPage` and `../user-pages.ts`). */
  page({ merchantId, filter, order, after, afterJoined, afterUpdated, limit: requested }: UserPageQuery): UserRecordPage {
    const users = this.#merchants.get(merchantId);
    const limit = Math.floor(requested);
    examined.count = 0;
    if (!users || !(limit >= 1)) return [];
    users.sort();
    examined.count = 0;
    const lists = (byActivity: ByActivity) => (filter.active === undefined ? byActivity : [byActivity[filter.active ? 1 : 0]]);
    const { joinedAfter, joinedBefore } = filter;
    // Where each date-ordered list enters and leaves the range [joinedAfter, joinedBefore] (exclusive bounds).
    const dateRange = (list: UserRecord[]): [number, number] => [
      joinedAfter === undefined ? 0 : search(list, (r) => r.date_joined <= joinedAfter),
      joinedBefore === undefined ? list.length : search(list, (r) => r.date_joined < joinedBefore),
    ];

    if (order === 'updated_at') return this.#changedPage(users, { merchantId, filter, after, afterUpdated, limit });

    if (order === 'date_joined') {
      const ranges = lists(users.byJoined).map((list) => {
        const [start, end] = dateRange(list);
        if (afterJoined === undefined) return { list, at: start, end };
        // The empty id sorts before every id: without `after`, the timestamp itself is included.
        const position = { date_joined: afterJoined, shared_user_id: after ?? '' } as UserRecord;
        const past = search(list, (r) => users.compareByJoined(r, position) <= 0);
        return { list, at: Math.max(start, past), end };
      });
      return merge(ranges, users.compareByJoined, limit);
    }

    const fromPosition = (list: UserRecord[]) => (after === undefined ? 0 : search(list, (r) => users.compareIds(r.shared_user_id, after) <= 0));
    if (!hasDateFilter(filter)) {
      return merge(lists(users.byId).map((list) => ({ list, at: fromPosition(list), end: list.length })), users.compareById, limit);
    }

    const joinedLists = lists(users.byJoined);
    const ranges = joinedLists.map(dateRange);
    const inRange = ranges.reduce((sum, [start, end]) => sum + (end - start), 0);
    if (inRange <= this.#plan.seekLimit) {
      // A small range: its users after the position, the first `limit` of them by id.
      const candidates: UserRecord[] = [];
      joinedLists.forEach((list, i) => {
        const [start, end] = ranges[i]!;
        examined.count += end - start;
        for (let j = start; j < end; j++) {
          const record = list[j]!;
          if (after === undefined || users.compareIds(record.shared_user_id, after) > 0) candidates.push(record);
        }
      });
      candidates.sort(users.compareById);
      if (candidates.length > limit) candidates.length = limit;
      return candidates;
    }

    // A large range: examine at most scanBudget users in id order, keeping those in the range.
    const cursors = lists(users.byId).map((list) => ({ list, at: fromPosition(list), end: list.length }));
    const page: UserRecordPage = [];
    let scanned = 0;
    for (let record = next(cursors, users.compareById); record !== undefined; record = next(cursors, users.compareById)) {
      if ((joinedAfter === undefined || record.date_joined > joinedAfter) && (joinedBefore === undefined || record.date_joined < joinedBefore)) {
        page.push(record);
        if (page.length === limit) break;
      }
      if (++scanned === this.#plan.scanBudget) {
        page.resumeAfter = record.shared_user_id;
        break;
      }
    }
    return page;
  }

  /** `order=updated_at`: from the later of `updatedSince` and the position, at most `scanBudget` entries examined. */
  #changedPage(users: MerchantUsers, { filter, after, afterUpdated, limit }: UserPageQuery): UserRecordPage {
    const list = users.byUpdated;
    const { active, joinedAfter, joinedBefore, updatedSince } = filter;
    let at = updatedSince === undefined ? 0 : search(list, (c) => c.updatedAt < updatedSince);
    if (afterUpdated !== undefined) {
      // The empty id sorts before every id: without `after`, the timestamp itself is included.
      const position = { updatedAt: afterUpdated, record: { shared_user_id: after ?? '' } } as Change;
      at = Math.max(at, search(list, (c) => users.compareByUpdated(c, position) <= 0));
    }
    const page: UserRecordPage = [];
    for (let scanned = 0; at < list.length; at++) {
      const { record, updatedAt } = list[at]!;
      examined.count++;
      if (
        (active === undefined || (record.deactivated_at === null) === active) &&
        (joinedAfter === undefined || record.date_joined > joinedAfter) &&
        (joinedBefore === undefined || record.date_joined < joinedBefore)
      ) {
        const changed: ChangedUserRecord = { ...record, updated_at: updatedAt };
        page.push(changed);
        if (page.length === limit) break;
      }
      if (++scanned === this.#plan.scanBudget) {
        page.resumeAfter = record.shared_user_id;
        page.resumeAfterUpdated = updatedAt;
        break;
      }
    }
    return page;
  }

  #usersOf(merchantId: string): MerchantUsers {
    let users = this.#merchants.get(merchantId);
    if (!users) this.#merchants.set(merchantId, (users = new MerchantUsers()));
    return users;
  }
}

function activity(record: UserRecord): 0 | 1 {
  return record.deactivated_at === null ? 1 : 0;
}

/** The canonical timestamp 1 µs after `stamp` (the same at the very end of year 9999). */
function nextMicrosecond(stamp: string): string {
  const micros = Number(stamp.slice(20, 26)) + 1;
  if (micros < 1_000_000) return `${stamp.slice(0, 20)}${String(micros).padStart(6, '0')}${stamp.slice(26)}`;
  const seconds = Date.parse(`${stamp.slice(0, 19)}Z`) / 1000 + 1;
  return new Date(seconds * 1000).getUTCFullYear() > 9999 ? stamp : formatEpochSeconds(seconds);
}

/** Unix microseconds as a canonical timestamp. */
function formatMicros(micros: number): string {
  return formatEpochSeconds(Math.floor(micros / 1e6), String(micros % 1e6).padStart(6, '0'));
}

function sameRecord(x: UserRecord, y: UserRecord): boolean {
  return USER_RECORD_KEYS.every((key) => x[key] === y[key]);
}
