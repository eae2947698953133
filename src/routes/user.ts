/** `GET /merchant/users/{shared_user_id}` (docs/protocol.md#users): one user, as shared with this merchant. */
import type { RequestContext } from '../http/context.js';
import { MerchantApiError } from '../errors.js';
import { printable } from '../listing/printable.js';
import { parseQuery } from '../http/query.js';
import { reply, type Reply } from '../http/responses.js';
import { userJson } from '../listing/user-json.js';
import type { HandlerDeps, RouteInput } from './route.js';

const NOT_FOUND = new MerchantApiError('not_found', 'No user with this shared_user_id is shared with this merchant.');

export async function getUser(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  const pairs = parseQuery(input.search);
  if (pairs.length > 0) {
    const details = pairs.map(([key]) => ({ code: 'unknown_parameter' as const, message: `Unknown parameter: ${printable(key)}. This endpoint takes none.`, param: key }));
    throw new MerchantApiError('unknown_parameter', details[0]!.message, { details });
  }
  const merchantId = input.merchant!.id;
  const sharedUserId = input.params.shared_user_id!;
  const user = await deps.storage('getUser', ctx, (s) => s.getUser(merchantId, sharedUserId));
  if (!user) throw NOT_FOUND;
  return reply(200, `{"status":"ok","data":[${userJson(user)}],"errors":[]}`);
}
