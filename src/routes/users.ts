/**
 * `GET /merchant/users` (docs/protocol.md#users): one page by keyset with a
 * sealed cursor (docs/protocol.md#pagination-and-cursors), or every user as
 * one JSON document streamed in batches so memory stays flat.
 */
import type { RequestContext } from '../http/context.js';
import { MAX_PAGE_SIZE, parseListParams, type ListParams } from '../listing/list-params.js';
import { parseQuery } from '../http/query.js';
import { reply, type Reply } from '../http/responses.js';
import { pct } from '../signing/index.js';
import type { Merchant, UserFilter, UserOrder, UserRecord, UserRecordPage } from '../storage/contract.js';
import { usersJson } from '../listing/user-json.js';
import { MALFORMED_QUERY, queryParameter, response, schemaRef } from '../openapi/fragments.js';
import type { Json, OperationDoc } from '../openapi/operation.js';
import type { HandlerDeps, RouteInput } from './route.js';

export async function listUsers(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  const merchant = input.merchant!;
  const params = parseListParams(parseQuery(input.search));
  if (params.limit === undefined && params.cursor === undefined) return streamAll(ctx, merchant, params.filter, params.order, deps);
  return page(ctx, input, merchant, params, deps);
}

async function page(ctx: RequestContext, input: RouteInput, merchant: Merchant, params: ListParams, deps: HandlerDeps): Promise<Reply> {
  const position = params.cursor === undefined ? undefined : await deps.cursors.open(params.cursor, merchant.id, params.filter, params.order);
  // A cursor without `limit` keeps the page size of the listing it came from.
  const limit = params.limit ?? position!.limit;
  const query = { merchantId: merchant.id, filter: params.filter, order: params.order, after: position?.after, afterJoined: position?.afterJoined, limit: limit + 1 };
  const users = await deps.storage(ctx).listUsers(query);
  // More follows when the storage found a user past the page, or stopped early (a bounded scan).
  const resume = users.length > limit ? undefined : users.resumeAfter;
  const more = users.length > limit || resume !== undefined;
  if (users.length > limit) users.length = limit;
  let nextCursor = 'null';
  let headers: Record<string, string> | undefined;
  if (more) {
    const cursor = await deps.cursors.seal(merchant.id, params.filter, resume !== undefined ? { after: resume, limit } : { ...positionOf(users.at(-1)!), limit }, params.order);
    nextCursor = JSON.stringify(cursor);
    const listUrl = `${deps.resolveBases(ctx, input.origin)[0]}${deps.basePath}/merchant/users`;
    const next = [['limit', String(limit)], ...params.filterParams, ['cursor', cursor]].map(([k, v]) => `${k}=${pct(v!)}`).join('&');
    headers = { link: `<${listUrl}?${next}>; rel="next"` };
  }
  return reply(200, `{"status":"ok","data":[${usersJson(users)}],"next_cursor":${nextCursor},"errors":[]}`, headers);
}

/**
 * The first batch is read before answering, so a storage that is down gets
 * its 503 rather than a broken 200. A failure after that can no longer
 * change the status: the stream is cut (see `toResponse`).
 */
async function streamAll(ctx: RequestContext, merchant: Merchant, filter: UserFilter, order: UserOrder, deps: HandlerDeps): Promise<Reply> {
  const batchSize = deps.streamBatchSize;
  const read = (position: { after?: string; afterJoined?: string }) =>
    deps.storage(ctx).listUsers({ merchantId: merchant.id, filter, order, ...position, limit: batchSize });
  // Where the next batch starts: past a full batch, or where a bounded scan stopped; undefined at the end.
  const nextPosition = (batch: UserRecordPage) =>
    batch.length === batchSize ? positionOf(batch.at(-1)!) : batch.resumeAfter === undefined ? undefined : { after: batch.resumeAfter };
  const first = await read({});
  async function* pieces(): AsyncGenerator<string> {
    let batch = first;
    let piece = `{"status":"ok","data":[${usersJson(batch)}`;
    let written = batch.length > 0;
    for (let position = nextPosition(batch); position !== undefined; position = nextPosition(batch)) {
      yield piece;
      batch = await read(position);
      piece = batch.length > 0 ? `${written ? ',' : ''}${usersJson(batch)}` : '';
      written ||= batch.length > 0;
    }
    yield `${piece}],"errors":[]}`;
  }
  return reply(200, pieces());
}

/** The keyset position of a user: its id, and its date_joined for `order=date_joined`. */
function positionOf(user: UserRecord): { after: string; afterJoined: string } {
  return { after: user.shared_user_id, afterJoined: user.date_joined };
}
