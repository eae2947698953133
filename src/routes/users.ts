/**
 * `GET /merchant/users` (docs/protocol.md#users): one page by keyset with a
 * sealed cursor (docs/protocol.md#pagination-and-cursors), or every user as
 * one JSON document streamed in batches so memory stays flat.
 */
import type { RequestContext } from '../context.js';
import { parseListParams, type ListParams } from '../list-params.js';
import { parseQuery } from '../query.js';
import { reply, type Reply } from '../responses.js';
import { pct } from '../signing.js';
import type { Merchant, UserFilter } from '../storage.js';
import { usersJson } from '../user-json.js';
import type { HandlerDeps, RouteInput } from './route.js';

export async function listUsers(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  const merchant = input.merchant!;
  const params = parseListParams(parseQuery(input.search));
  if (params.limit === undefined && params.cursor === undefined) return streamAll(ctx, merchant, params.filter, deps);
  return page(ctx, input, merchant, params, deps);
}

async function page(ctx: RequestContext, input: RouteInput, merchant: Merchant, params: ListParams, deps: HandlerDeps): Promise<Reply> {
  const position = params.cursor === undefined ? undefined : await deps.cursors.open(params.cursor, merchant.id, params.filter);
  // A cursor without `limit` keeps the page size of the listing it came from.
  const limit = params.limit ?? position!.limit;
  const query = { merchantId: merchant.id, filter: params.filter, after: position?.after, limit: limit + 1 };
  const users = await deps.storage('listUsers', ctx, (s) => s.listUsers(query));
  const more = users.length > limit;
  if (more) users.length = limit;
  let nextCursor = 'null';
  let headers: Record<string, string> | undefined;
  if (more) {
    const cursor = await deps.cursors.seal(merchant.id, params.filter, { after: users.at(-1)!.shared_user_id, limit });
    nextCursor = JSON.stringify(cursor);
    const listUrl = `${deps.resolveBases(ctx.request, input.origin)[0]}${deps.basePath}/merchant/users`;
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
async function streamAll(ctx: RequestContext, merchant: Merchant, filter: UserFilter, deps: HandlerDeps): Promise<Reply> {
  const batchSize = deps.streamBatchSize;
  const read = (after: string | undefined) =>
    deps.storage('listUsers', ctx, (s) => s.listUsers({ merchantId: merchant.id, filter, after, limit: batchSize }));
  const first = await read(undefined);
  async function* pieces(): AsyncGenerator<string> {
    let batch = first;
    let piece = `{"status":"ok","data":[${usersJson(batch)}`;
    while (batch.length === batchSize) {
      yield piece;
      batch = await read(batch.at(-1)!.shared_user_id);
      piece = batch.length > 0 ? `,${usersJson(batch)}` : '';
    }
    yield `${piece}],"errors":[]}`;
  }
  return reply(200, pieces());
}
