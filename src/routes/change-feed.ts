/**
 * The change feed (docs/protocol.md#removals): `GET /merchant/users?include_removed=true`, the
 * `order=updated_at` listing with the tombstones of removed shares merged in, in the same order
 * and under the same cursors, so a poll-only merchant learns of removals without a full listing.
 * Its own path, taken only with the parameter: every other listing runs exactly as before.
 *
 * Each read asks the storage for `size + 1` users and `size + 1` removals after the position and
 * keeps the first `size` of the two merged by `(updated_at | removed_at, shared_user_id)`: every
 * entry it keeps sorts before anything either read left out, so nothing is skipped or repeated.
 */
import type { RequestContext } from '../http/context.js';
import type { ListParams } from '../listing/list-params.js';
import { reply, type Reply } from '../http/responses.js';
import { pageReply } from './page-reply.js';
import { pct } from '../signing/index.js';
import { MerchantApiError } from '../errors.js';
import { changedUserJson } from '../listing/user-json.js';
import { compareCodePoints } from '../storage/order.js';
import type { ChangedUserRecord, Merchant, ShareRemoval } from '../storage/contract.js';
import type { HandlerDeps, RouteInput } from './route.js';

/** One entry of the feed: a user's record, or a share's tombstone. */
type FeedEntry = { record: ChangedUserRecord; at: string; id: string } | { removal: ShareRemoval; at: string; id: string };

interface FeedPosition {
  after?: string;
  afterUpdated?: string;
}

export async function changeFeed(ctx: RequestContext, input: RouteInput, merchant: Merchant, params: ListParams, deps: HandlerDeps): Promise<Reply> {
  const start = params.cursor === undefined ? undefined : await deps.cursors.open(params.cursor, merchant.id, params.filter, 'updated_at', true);
  const listing = {};
  const read = async (position: FeedPosition, size: number, streamed: boolean) => {
    const page = await deps.storage(ctx).listUsers({
      merchantId: merchant.id,
      filter: params.filter,
      order: 'updated_at',
      ...position,
      limit: size + 1,
      includeRemoved: true,
      ...(streamed ? { listing } : {}),
    });
    refuseIfPruned(page.removalsPrunedThrough, params.filter.updatedSince, position.afterUpdated);
    const entries = merge(page as ChangedUserRecord[], page.removals ?? []);
    const more = entries.length > size;
    if (more) entries.length = size;
    return { entries, more };
  };

  if (params.limit === undefined && start === undefined) return streamFeed(read, deps.streamBatchSize);
  const limit = params.limit ?? start!.limit;
  const { entries, more } = await read({ after: start?.after, afterUpdated: start?.afterUpdated }, limit, false);
  let nextCursor = 'null';
  let headers: Record<string, string> | undefined;
  let nextPosition: { after: string; afterUpdated: string; limit: number } | undefined;
  if (more) {
    const last = entries.at(-1)!;
    nextPosition = { after: last.id, afterUpdated: last.at, limit };
    const cursor = await deps.cursors.seal(merchant.id, params.filter, nextPosition, 'updated_at', true);
    nextCursor = JSON.stringify(cursor);
    const listUrl = `${deps.resolveBases(ctx, input.origin)[0]}${deps.basePath}/merchant/users`;
    const next = [['limit', String(limit)], ...params.filterParams, ['cursor', cursor]].map(([k, v]) => `${k}=${pct(v!)}`).join('&');
    headers = { link: `<${listUrl}?${next}>; rel="next"` };
  }
  return pageReply(entriesJson(entries), nextCursor, headers, nextPosition);
}

type Read = (position: FeedPosition, size: number, streamed: boolean) => Promise<{ entries: FeedEntry[]; more: boolean }>;

/** The whole feed as one document, read in batches; the first before the status, as for every listing. */
async function streamFeed(read: Read, batchSize: number): Promise<Reply> {
  const first = await read({}, batchSize, true);
  async function* pieces(): AsyncGenerator<string> {
    let batch = first;
    let written = false;
    yield '{"status":"ok","data":[';
    for (;;) {
      for (let i = 0; i < batch.entries.length; i += 100) {
        yield `${written ? ',' : ''}${entriesJson(batch.entries.slice(i, i + 100))}`;
        written = true;
      }
      if (!batch.more) break;
      const last = batch.entries.at(-1)!;
      batch = await read({ after: last.id, afterUpdated: last.at }, batchSize, true);
    }
    yield '],"errors":[]}';
  }
  return reply(200, pieces());
}

/**
 * Refuses a feed that would miss removals: the storage pruned one at or after where the feed
 * starts (`updated_since`, or the cursor's position when later). A feed without `updated_since`
 * is a fresh copy, which needs no removal from before it, and is never refused.
 */
function refuseIfPruned(prunedThrough: string | undefined, updatedSince: string | undefined, position: string | undefined): void {
  if (prunedThrough === undefined || updatedSince === undefined) return;
  const from = position !== undefined && position > updatedSince ? position : updatedSince;
  if (prunedThrough < from) return;
  throw new MerchantApiError(
    'gone',
    'Removals from before updated_since are no longer kept (REMOVAL_RETENTION, 30 days by default): list every user again without updated_since, then sync from there.',
    { param: 'updated_since', status: 410 },
  );
}

/** Users and removals, each already in order, merged by (time, shared_user_id). */
function merge(users: readonly ChangedUserRecord[], removals: readonly ShareRemoval[]): FeedEntry[] {
  const out: FeedEntry[] = [];
  let i = 0;
  let j = 0;
  while (i < users.length || j < removals.length) {
    const user = users[i];
    const removal = removals[j];
    if (removal === undefined || (user !== undefined && before(user.updated_at, user.shared_user_id, removal.removed_at, removal.shared_user_id))) {
      out.push({ record: user!, at: user!.updated_at, id: user!.shared_user_id });
      i++;
    } else {
      out.push({ removal, at: removal.removed_at, id: removal.shared_user_id });
      j++;
    }
  }
  return out;
}

function before(at: string, id: string, otherAt: string, otherId: string): boolean {
  return at < otherAt || (at === otherAt && compareCodePoints(id, otherId) < 0);
}

/** Records with their 15 keys; tombstones as `{"shared_user_id":…,"removed_at":…}`. */
function entriesJson(entries: readonly FeedEntry[]): string {
  let out = '';
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!;
    const json = 'record' in entry ? changedUserJson(entry.record) : `{"shared_user_id":${JSON.stringify(entry.removal.shared_user_id)},"removed_at":${JSON.stringify(entry.removal.removed_at)}}`;
    out += i ? `,${json}` : json;
  }
  return out;
}
