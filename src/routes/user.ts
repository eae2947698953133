/** `GET /merchant/users/{shared_user_id}` (docs/protocol.md#users): one user, as shared with this merchant. */
import type { RequestContext } from '../http/context.js';
import { MerchantApiError } from '../errors.js';
import { printable } from '../listing/printable.js';
import { parseQuery } from '../http/query.js';
import { reply, type Reply } from '../http/responses.js';
import { userJson } from '../listing/user-json.js';
import { MALFORMED_QUERY, ref, response, schemaRef } from '../openapi/fragments.js';
import type { OperationDoc } from '../openapi/operation.js';
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
  const user = await deps.storage(ctx).getUser(merchantId, sharedUserId);
  if (!user) throw NOT_FOUND;
  return reply(200, `{"status":"ok","data":[${userJson(user)}],"errors":[]}`);
}

/** The OpenAPI operation of `GET /merchant/users/{shared_user_id}`, besides what the route table and every route share. */
export const getUserDoc: OperationDoc = {
  tag: 'Users',
  description:
    'One user as shared with this merchant, as an array of one record. The id is one path segment, percent-decoded strictly. ' +
    'A user shared only with another merchant is 404, exactly like one that does not exist. Takes no query parameters.',
  readsQuery: true,
  parameters: [
    {
      name: 'shared_user_id',
      in: 'path',
      required: true,
      description: 'The id, percent-encoded (a `/` in it as `%2F`).',
      schema: { type: 'string', minLength: 1 },
    },
  ],
  badRequest: `A query parameter (this endpoint takes none; \`unknown_parameter\` per name), a path with bad percent-encoding, invalid UTF-8 or a NUL, or ${MALFORMED_QUERY}`,
  badRequestCodes: ['unknown_parameter', 'malformed_request'],
  responses: {
    '200': response('The user.', schemaRef('UserOne')),
    '404': ref('responses', 'NotFound'),
  },
};
