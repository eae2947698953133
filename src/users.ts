/**
 * `GET|HEAD /merchant/users` and `/merchant/users/{shared_user_id}` (docs/protocol.md#users): one page by keyset with a sealed cursor, or every user as one
 * JSON document streamed in batches so memory stays flat.
 */
import { authenticate } from './basic-auth.js';
import type { CursorCodec } from './cursor.js';
import { MerchantApiError } from './errors.js';
import type { StorageCall } from './guarded-storage.js';
import type { Logger } from './logger.js';
import { parseListParams, type ListParams } from './list-params.js';
import { json, streamedHead } from './responses.js';
import { printable } from './printable.js';
import { pct } from './signing.js';
import type { Merchant, UserFilter } from './storage.js';
import { userJson, usersJson } from './user-json.js';

export interface UsersContext {
  request: Request;
  head: boolean;
  pairs: [string, string][];
  storage: StorageCall;
  cursors: CursorCodec;
  logger: Logger;
  /** Absolute URL of the list endpoint, for the `Link` header. */
  listUrl: string;
  /** Users per storage call while streaming the whole list. */
  streamBatchSize: number;
}

const NOT_FOUND = new MerchantApiError('not_found', 'No user with this shared_user_id is shared with this merchant.');

export async function getUser(ctx: UsersContext, sharedUserId: string): Promise<Response> {
  const merchant = await authenticate(ctx.request, (id) => ctx.storage('getMerchant', (s) => s.getMerchant(id)));
  if (ctx.pairs.length > 0) {
    const details = ctx.pairs.map(([key]) => ({ code: 'unknown_parameter' as const, message: `Unknown parameter: ${printable(key)}. This endpoint takes none.`, param: key }));
    throw new MerchantApiError('unknown_parameter', details[0]!.message, { details });
  }
  const user = await ctx.storage('getUser', (s) => s.getUser(merchant.id, sharedUserId));
  if (!user) throw NOT_FOUND;
  return json(200, `{"status":"ok","data":[${userJson(user)}],"errors":[]}`, ctx.head);
}

export async function listUsers(ctx: UsersContext): Promise<Response> {
  const merchant = await authenticate(ctx.request, (id) => ctx.storage('getMerchant', (s) => s.getMerchant(id)));
  const params = parseListParams(ctx.pairs);
  if (params.limit === undefined && params.cursor === undefined) return streamAll(ctx, merchant, params.filter);
  return page(ctx, merchant, params);
}

async function page(ctx: UsersContext, merchant: Merchant, params: ListParams): Promise<Response> {
  const position = params.cursor === undefined ? undefined : await ctx.cursors.open(params.cursor, merchant.id, params.filter);
  // A cursor without `limit` keeps the page size of the listing it came from.
  const limit = params.limit ?? position!.limit;
  const query = { merchantId: merchant.id, filter: params.filter, after: position?.after, limit: limit + 1 };
  const users = await ctx.storage('listUsers', (s) => s.listUsers(query));
  const more = users.length > limit;
  if (more) users.length = limit;
  let nextCursor = 'null';
  const headers: Record<string, string> = {};
  if (more) {
    const cursor = await ctx.cursors.seal(merchant.id, params.filter, { after: users.at(-1)!.shared_user_id, limit });
    nextCursor = JSON.stringify(cursor);
    const query = [['limit', String(limit)], ...params.filterParams, ['cursor', cursor]].map(([k, v]) => `${k}=${pct(v!)}`).join('&');
    headers.link = `<${ctx.listUrl}?${query}>; rel="next"`;
  }
  return json(200, `{"status":"ok","data":[${usersJson(users)}],"next_cursor":${nextCursor},"errors":[]}`, ctx.head, headers);
}

/**
 * The first batch is read before answering, so a storage that is down gets
 * its 503 rather than a broken 200. A failure after that can no longer change
 * the status: the stream is aborted, so the client sees a truncated body
 * instead of a valid-looking short list.
 */
async function streamAll(ctx: UsersContext, merchant: Merchant, filter: UserFilter): Promise<Response> {
  const batchSize = ctx.streamBatchSize;
  const read = (after: string | undefined) =>
    ctx.storage('listUsers', (s) => s.listUsers({ merchantId: merchant.id, filter, after, limit: batchSize }));
  let batch = await read(undefined);
  if (ctx.head) return streamedHead();

  const encoder = new TextEncoder();
  let first = true;
  let done = false;
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (done) return;
        if (first) {
          first = false;
          controller.enqueue(encoder.encode(`{"status":"ok","data":[${usersJson(batch)}`));
        } else {
          try {
            batch = await read(batch.at(-1)!.shared_user_id);
          } catch (error) {
            ctx.logger.error('stream_aborted', { merchant_listing: 'all' });
            controller.error(error);
            return;
          }
          if (batch.length > 0) controller.enqueue(encoder.encode(`,${usersJson(batch)}`));
        }
        if (batch.length < batchSize) {
          done = true;
          controller.enqueue(encoder.encode('],"errors":[]}'));
          controller.close();
        }
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'no-store' } });
}
