/**
 * The memory storage's users (docs/protocol.md#users): per merchant, the records by id, and four
 * sorted lists of the same records that serve every listing in bounded work, following the plan
 * of `./user-pages.ts` (the MySQL storage follows it too, with the same constants):
 * - by `shared_user_id` in code-point order, one list per activity (`deactivated_at` null or
 *   not): id order, with or without `active`, is a merge of at most two lists from the position;
 * - by `(date_joined, shared_user_id)`, one list per activity: date ranges are counted by binary
 *   search, small ones read, and `order=date_joined` merges at most two lists from the position.
 * Every write keeps the lists in step (`put`); a bulk load appends and sorts once (`add`, `seal`).
 */
import type { UserPageQuery, UserRecord, UserRecordPage } from '../contract.js';
import { compareCodePoints } from '../order.js';
import type { SeedUser } from '../seed/seed.js';
import { DEFAULT_PAGE_PLAN, hasDateFilter, type PagePlan } from '../user-pages.js';

/** Records looked at by the running `page` call (reset at its start). */
let examined = 0;

/** Index 0: deactivated users; 1: active users. */
type ByActivity = [UserRecord[], UserRecord[]];

// UTF-16 order equals code-point order unless a surrogate meets U+E000-U+FFFF: ids without any
// unit from U+D800 up compare with the native `<`, which needs no per-character loop as compareCodePoints does.
const NOT_CODE_UNIT_ORDERED = /[\uD800-\uFFFF]/;

const nativeCompare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

class MerchantUsers {
  readonly records = new Map<string, UserRecord>();
  readonly byId: ByActivity = [[], []];
  readonly byJoined: ByActivity = [[], []];
  /** Until an id needs it, ids compare with the native `<`. */
  compareIds: (a: string, b: string) => number = nativeCompare;
  /** Records were appended by `add` and the lists are not sorted yet. */
  unsorted = false;

  readonly compareById = (x: UserRecord, y: UserRecord): number => this.compareIds(x.shared_user_id, y.shared_user_id);
  readonly compareByJoined = (x: UserRecord, y: UserRecord): number =>
    x.date_joined < y.date_joined ? -1 : x.date_joined > y.date_joined ? 1 : this.compareIds(x.shared_user_id, y.shared_user_id);

  noteId(id: string): void {
    if (this.compareIds === nativeCompare && NOT_CODE_UNIT_ORDERED.test(id)) this.compareIds = compareCodePoints;
  }

  sort(): void {
    if (!this.unsorted) return;
    for (const a of [0, 1] as const) {
      this.byId[a] = this.#sortById(this.byId[a]);
      this.byJoined[a] = this.#sortByJoined(this.byJoined[a]);
    }
    this.unsorted = false;
  }

  // Sorting a large seed with a comparator of strings held up its loading
  // (docs/benchmarks.md#figures-behind-choices-in-the-code); instead an export in key order is
  // checked in one pass, and otherwise native ids sort natively, timestamps as numbers.

  #sortById(list: UserRecord[]): UserRecord[] {
    if (isSorted(list, this.compareById)) return list;
    if (this.compareIds !== nativeCompare) return list.sort(this.compareById);
    const ids = list.map((record) => record.shared_user_id).sort();
    return ids.map((id) => this.records.get(id)!);
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

function isSorted(list: UserRecord[], compare: (x: UserRecord, y: UserRecord) => number): boolean {
  for (let i = 1; i < list.length; i++) if (compare(list[i - 1]!, list[i]!) > 0) return false;
  return true;
}

/** Users per merchant with the sorted lists every listing reads. */
export class MemoryUserIndex {
  readonly #merchants = new Map<string, MerchantUsers>();
  readonly #plan: PagePlan;
  #count = 0;

  /** `plan`: the bounds of `./user-pages.ts` (tests only; the defaults are what MySQL uses). */
  constructor(plan: PagePlan = DEFAULT_PAGE_PLAN) {
    this.#plan = { ...plan };
  }

  /** An index of seed users (`merchant_id` plus the record); a repeated id keeps its last record. */
  static fromSeedUsers(users: Iterable<SeedUser>, plan?: PagePlan): MemoryUserIndex {
    const index = new MemoryUserIndex(plan);
    const repeated: SeedUser[] = [];
    for (const { merchant_id, ...record } of users) {
      if (!index.add(merchant_id, record)) repeated.push({ merchant_id, ...record });
    }
    index.seal();
    for (const { merchant_id, ...record } of repeated) index.put(merchant_id, record);
    return index;
  }

  /** How many users are held, over all merchants. */
  get size(): number {
    return this.#count;
  }

  /** How many records the last `page` call of any index looked at, binary searches included (for the benches). */
  static get lastExamined(): number {
    return examined;
  }

  /** The user `sharedUserId` of `merchantId`, or undefined. */
  get(merchantId: string, sharedUserId: string): UserRecord | undefined {
    return this.#merchants.get(merchantId)?.records.get(sharedUserId);
  }

  /** Adds or replaces a user (the record is kept as given), keeping every list sorted. */
  put(merchantId: string, record: UserRecord): void {
    const users = this.#usersOf(merchantId);
    users.sort();
    users.noteId(record.shared_user_id);
    const old = users.records.get(record.shared_user_id);
    if (old) {
      remove(users.byId[activity(old)], old, users.compareById);
      remove(users.byJoined[activity(old)], old, users.compareByJoined);
    } else {
      this.#count++;
    }
    insert(users.byId[activity(record)], record, users.compareById);
    insert(users.byJoined[activity(record)], record, users.compareByJoined);
    users.records.set(record.shared_user_id, record);
  }

  /**
   * Bulk load: appends a user without sorting (call `seal` when done). Returns false, adding
   * nothing, when the merchant already has a user with this id.
   */
  add(merchantId: string, record: UserRecord): boolean {
    const users = this.#usersOf(merchantId);
    if (users.records.has(record.shared_user_id)) return false;
    users.records.set(record.shared_user_id, record);
    users.noteId(record.shared_user_id);
    users.byId[activity(record)].push(record);
    users.byJoined[activity(record)].push(record);
    users.unsorted = true;
    this.#count++;
    return true;
  }

  /** Sorts what `add` appended (sorted input sorts in linear time). */
  seal(): void {
    for (const users of this.#merchants.values()) users.sort();
  }

  /** One page (see `UserPageQuery`, `UserRecordPage` and `./user-pages.ts`). */
  page({ merchantId, filter, order, after, afterJoined, limit: requested }: UserPageQuery): UserRecordPage {
    const users = this.#merchants.get(merchantId);
    const limit = Math.floor(requested);
    examined = 0;
    if (!users || !(limit >= 1)) return [];
    users.sort();
    const lists = (byActivity: ByActivity) => (filter.active === undefined ? byActivity : [byActivity[filter.active ? 1 : 0]]);
    const { joinedAfter, joinedBefore } = filter;
    // Where each date-ordered list enters and leaves the range [joinedAfter, joinedBefore] (exclusive bounds).
    const dateRange = (list: UserRecord[]): [number, number] => [
      joinedAfter === undefined ? 0 : search(list, (r) => r.date_joined <= joinedAfter),
      joinedBefore === undefined ? list.length : search(list, (r) => r.date_joined < joinedBefore),
    ];

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
        examined += end - start;
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

  #usersOf(merchantId: string): MerchantUsers {
    let users = this.#merchants.get(merchantId);
    if (!users) this.#merchants.set(merchantId, (users = new MerchantUsers()));
    return users;
  }
}

interface Cursor {
  list: UserRecord[];
  at: number;
  end: number;
}

function activity(record: UserRecord): 0 | 1 {
  return record.deactivated_at === null ? 1 : 0;
}

/** The next record of the merged cursors in `compare` order (and moves past it), or undefined. */
function next(cursors: Cursor[], compare: (x: UserRecord, y: UserRecord) => number): UserRecord | undefined {
  let best: Cursor | undefined;
  for (const cursor of cursors) {
    if (cursor.at < cursor.end && (!best || compare(cursor.list[cursor.at]!, best.list[best.at]!) < 0)) best = cursor;
  }
  if (!best) return undefined;
  examined++;
  return best.list[best.at++];
}

/** The first `limit` records of the merged cursors. */
function merge(cursors: Cursor[], compare: (x: UserRecord, y: UserRecord) => number, limit: number): UserRecordPage {
  if (cursors.length === 1) {
    const [{ list, at, end }] = cursors as [Cursor];
    const page = list.slice(at, Math.min(end, at + limit));
    examined += page.length;
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
function search(list: UserRecord[], before: (record: UserRecord) => boolean): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    examined++;
    if (before(list[mid]!)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function insert(list: UserRecord[], record: UserRecord, compare: (x: UserRecord, y: UserRecord) => number): void {
  list.splice(search(list, (r) => compare(r, record) < 0), 0, record);
}

function remove(list: UserRecord[], record: UserRecord, compare: (x: UserRecord, y: UserRecord) => number): void {
  const at = search(list, (r) => compare(r, record) < 0);
  if (list[at] === record) list.splice(at, 1);
}
