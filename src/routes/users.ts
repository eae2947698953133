/**
 * `GET /merchant/users` (docs/protocol.md#users): one page by keyset with a
 * sealed cursor (docs/protocol.md#pagination-and-cursors), or every user as
 * one JSON document streamed in batches so memory stays flat.
 */
import type { RequestContext } from '../http/context.js';
import { MAX_PAGE_SIZE, parseListParams, type ListParams } from '../listing/list-params.js';
import { parseQuery } from '../http/query.js';
import { reply, type Reply } from '../http/responses.js';
import { pageReply } from './page-reply.js';
import { pct } from '../signing/index.js';
import type { ChangedUserRecord, Merchant, UserFilter, UserOrder, UserRecord, UserRecordPage } from '../storage/contract.js';
import { usersJson } from '../listing/user-json.js';
import type { CursorPosition } from '../listing/cursor.js';
import { MALFORMED_QUERY, queryParameter, ref, response, schemaRef } from '../openapi/fragments.js';
import type { Json, OperationDoc } from '../openapi/operation.js';
import { envelopeError } from '../openapi/error-codes.js';
import type { HandlerDeps, RouteInput } from './route.js';
import { changeFeed } from './change-feed.js';

export async function listUsers(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  const merchant = input.merchant!;
  const params = parseListParams(parseQuery(input.search));
  if (params.includeRemoved) return changeFeed(ctx, input, merchant, params, deps);
  if (params.limit === undefined && params.cursor === undefined) return streamAll(ctx, merchant, params.filter, params.order, deps);
  return page(ctx, input, merchant, params, deps);
}

async function page(ctx: RequestContext, input: RouteInput, merchant: Merchant, params: ListParams, deps: HandlerDeps): Promise<Reply> {
  const position = params.cursor === undefined ? undefined : await deps.cursors.open(params.cursor, merchant.id, params.filter, params.order);
  // A cursor without `limit` keeps the page size of the listing it came from.
  const limit = params.limit ?? position!.limit;
  const query = { merchantId: merchant.id, filter: params.filter, order: params.order, after: position?.after, afterJoined: position?.afterJoined, afterUpdated: position?.afterUpdated, limit: limit + 1 };
  const users = await deps.storage(ctx).listUsers(query);
  // More follows when the storage found a user past the page, or stopped early (a bounded scan).
  const resume = users.length > limit ? undefined : users.resumeAfter;
  const more = users.length > limit || resume !== undefined;
  if (users.length > limit) users.length = limit;
  let nextCursor = 'null';
  let headers: Record<string, string> | undefined;
  let nextPosition: CursorPosition | undefined;
  if (more) {
    nextPosition = { ...(resume !== undefined ? resumePosition(users) : positionOf(users.at(-1)!)), limit };
    const cursor = await deps.cursors.seal(merchant.id, params.filter, nextPosition, params.order);
    nextCursor = JSON.stringify(cursor);
    const listUrl = `${deps.resolveBases(ctx, input.origin)[0]}${deps.basePath}/merchant/users`;
    const next = [['limit', String(limit)], ...params.filterParams, ['cursor', cursor]].map(([k, v]) => `${k}=${pct(v!)}`).join('&');
    headers = { link: `<${listUrl}?${next}>; rel="next"` };
  }
  return pageReply(usersJson(users, params.order === 'updated_at'), nextCursor, headers, nextPosition);
}

/**
 * The first batch is read before answering, so a storage that is down gets
 * its 503 rather than a broken 200. A failure after that can no longer
 * change the status: the stream is cut (see `toResponse`).
 */
async function streamAll(ctx: RequestContext, merchant: Merchant, filter: UserFilter, order: UserOrder, deps: HandlerDeps): Promise<Reply> {
  const batchSize = deps.streamBatchSize;
  const withUpdatedAt = order === 'updated_at';
  // One object for the whole stream: a storage on a replica reads every batch from one source.
  const listing = {};
  const read = (position: Partial<Position>) => deps.storage(ctx).listUsers({ merchantId: merchant.id, filter, order, ...position, limit: batchSize, listing });
  // Where the next batch starts: past a full batch, or where a bounded scan stopped; undefined at the end.
  const nextPosition = (batch: UserRecordPage) =>
    batch.length === batchSize ? positionOf(batch.at(-1)!) : batch.resumeAfter === undefined ? undefined : resumePosition(batch);
  const first = await read({});
  async function* pieces(): AsyncGenerator<string> {
    let batch = first;
    let written = false;
    let piece = '{"status":"ok","data":[';
    for (;;) {
      for (let start = 0; start < batch.length; start += STREAM_PIECE_USERS) {
        piece += `${written ? ',' : ''}${usersJson(batch.slice(start, start + STREAM_PIECE_USERS), withUpdatedAt)}`;
        written = true;
        if (start + STREAM_PIECE_USERS < batch.length) {
          yield piece;
          piece = '';
        }
      }
      const position = nextPosition(batch);
      if (position === undefined) break;
      if (piece !== '') yield piece;
      piece = '';
      batch = await read(position);
    }
    yield `${piece}],"errors":[]}`;
  }
  return reply(200, pieces());
}

/**
 * Records per piece of the streamed list, whatever the storage batch. A piece
 * of a whole batch (1000 records, about 650 KB as a two-byte string) is a
 * large object to V8, promoted as soon as it outlives one young collection
 * while the socket drains, so old space grew by tens of MB per stream; pieces
 * of 100 stay young and die there (docs/benchmarks.md#streaming-memory).
 */
const STREAM_PIECE_USERS = 100;

type Position = { after: string; afterJoined?: string; afterUpdated?: string };

/** The keyset position of a user: its id, its date_joined for `order=date_joined`, its updated_at for `order=updated_at`. */
function positionOf(user: UserRecord): Position {
  return { after: user.shared_user_id, afterJoined: user.date_joined, afterUpdated: (user as Partial<ChangedUserRecord>).updated_at };
}

/** Where a bounded scan stopped (`resumeAfter`, with `resumeAfterUpdated` in `order=updated_at`). */
function resumePosition(page: UserRecordPage): Position {
  return { after: page.resumeAfter!, afterUpdated: page.resumeAfterUpdated };
}

const STREAM_NOTE =
  'Without `limit` and `cursor`: every user, as one JSON document streamed in batches (no `Content-Length`, no `next_cursor`). ' +
  'The status is sent before the end is read: if the storage fails part-way, the connection is cut and the body is truncated, ' +
  'never a short list that looks complete.';

/** The OpenAPI operation of `GET /merchant/users`, besides what the route table and every route share. */
export const listUsersDoc: OperationDoc = {
  tag: 'Users',
  description:
    "The merchant's users, in the order of `shared_user_id` by Unicode code point (or `order`). " +
    `${STREAM_NOTE} With \`limit\` or \`cursor\`: one page, with \`next_cursor\` (null on the last page) and, when there is a next ` +
    'page, a `Link: <…>; rel="next"` header with its URL. Every parameter at most once. `/merchant/users/` is the same endpoint; ' +
    'a path sent with a `.` or `..` segment below it (`/merchant/users/.`, `/merchant/users/%2E`), which URL parsers resolve to this one, is a 404 (Node and Deno).',
  readsQuery: true,
  parameters: [
    queryParameter('limit', `Page size, 1 to ${MAX_PAGE_SIZE}.`, { type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE }),
    queryParameter('cursor', 'The `next_cursor` of the previous page, with the same filters. Without `limit` the page size stays what it was.', { type: 'string', minLength: 1 }),
    queryParameter('active', '`true`: users with `deactivated_at` null; `false`: deactivated users.', { type: 'string', enum: ['true', 'false'] }),
    timestampFilter('joined_after', 'later'),
    timestampFilter('joined_before', 'earlier'),
    queryParameter(
      'updated_since',
      'Keeps users whose record or share changed at or after this time (`updated_at >= updated_since`: inclusive, so a sync that asks again ' +
        'from the last `updated_at` it saw misses nothing at that microsecond; it sees that record again). Lists in `order=updated_at`, ' +
        'which may be left out; another `order` is refused. Same forms as `joined_after`.',
      { type: 'string', format: 'date-time', examples: ['2020-01-31T10:00:00.123456Z'] },
    ),
    queryParameter(
      'include_removed',
      '`true`: the change feed. Lists in `order=updated_at` (which may be left out) and adds, among the records, a tombstone ' +
        '`{"shared_user_id","removed_at"}` for each share removed (unshared or erased) at or after `updated_since`, by `removed_at`, under the ' +
        'same cursors; a user shared again is listed as its record instead. Does not combine with `active`, `joined_after` or `joined_before`. ' +
        'Removals are kept for `REMOVAL_RETENTION` (30 days by default): a feed asked from before one that is no longer kept is 410 `gone`. ' +
        '`false`, or absent: the listing without tombstones.',
      { type: 'string', enum: ['true', 'false'] },
    ),
    queryParameter(
      'order',
      '`shared_user_id` (the default): by id in code-point order. `date_joined`: oldest first, ties by `shared_user_id`. ' +
        '`updated_at`: least recently changed first, ties by `shared_user_id`; its records carry a 15th key, `updated_at`. ' +
        'Cursors keep the order they were issued for.',
      { type: 'string', enum: ['shared_user_id', 'date_joined', 'updated_at'], default: 'shared_user_id' },
    ),
  ],
  badRequest: `One error object per problem, \`param\` naming it: an unknown, repeated or invalid parameter, an invalid cursor, or ${MALFORMED_QUERY}`,
  badRequestCodes: ['unknown_parameter', 'invalid_parameter', 'invalid_cursor', 'malformed_request'],
  tooManyRequests: 'Also: the merchant already has as many listings running on this instance as `merchantConcurrency` allows (default 4).',
  responses: {
    '200': response(
      'The users: a page (`limit` or `cursor` given) or the whole list (streamed); with `include_removed=true` and a tombstone among them, a `ChangePage` or `ChangeList`.',
      // anyOf: a feed answer without a tombstone is a UserPage/UserList; `contains` keeps the Change… schemas to those with one.
      { anyOf: [schemaRef('UserPage'), schemaRef('UserList'), schemaRef('ChangePage'), schemaRef('ChangeList')] },
      ['Link'],
    ),
    '404': ref('responses', 'NotFound'),
    '410': response(
      'With `include_removed=true` and `updated_since`: removals from after `updated_since` are no longer kept (`REMOVAL_RETENTION`). List every user again, then sync from there.',
      envelopeError(['gone']),
    ),
  },
};

function timestampFilter(name: string, side: 'later' | 'earlier'): Json {
  return queryParameter(
    name,
    `Keeps users whose \`date_joined\` is ${side} than this (not equal). Any RFC 3339 date-time, including a leap second (\`:60\`, read as ` +
      '`:59.999999`), any number of fraction digits (cut to microseconds) and year 0000. Also accepted: a date alone (midnight UTC), ' +
      'no seconds, `,` as the decimal sign, `t` or a space for `T`, an offset without `:`, no offset (UTC). Send a `+` as `%2B`.',
    { type: 'string', format: 'date-time', examples: ['2020-01-31T10:00:00Z'] },
  );
}
