/** `GET /merchant/keys` (docs/protocol.md#keys): the merchant's own keys' metadata, never a secret. */
import type { RequestContext } from '../http/context.js';
import { MerchantApiError } from '../errors.js';
import { printable } from '../listing/printable.js';
import { parseQuery } from '../http/query.js';
import { reply, type Reply } from '../http/responses.js';
import { MALFORMED_QUERY, response, schemaRef } from '../openapi/fragments.js';
import type { OperationDoc } from '../openapi/operation.js';
import type { KeyInfo } from '../storage/contract.js';
import type { HandlerDeps, RouteInput } from './route.js';

export async function listKeys(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  const pairs = parseQuery(input.search);
  if (pairs.length > 0) {
    const details = pairs.map(([key]) => ({ code: 'unknown_parameter' as const, message: `Unknown parameter: ${printable(key)}. This endpoint takes none.`, param: key }));
    throw new MerchantApiError('unknown_parameter', details[0]!.message, { details });
  }
  const keys = await deps.storage(ctx).listKeys(input.merchant!.id);
  return reply(200, `{"status":"ok","data":[${keys.map(keyJson).join(',')}],"errors":[]}`);
}

/** The 8 fields in their documented order, whatever order the storage built them in. */
export function keyJson(key: KeyInfo): string {
  return JSON.stringify({
    key_id: key.key_id,
    name: key.name,
    scopes: key.scopes,
    created_at: key.created_at,
    expires_at: key.expires_at,
    last_used_at: key.last_used_at,
    allow_from: key.allow_from,
    mode: key.mode,
  });
}

/** The OpenAPI operation of `GET /merchant/keys`, besides what the route table and every route share. */
export const listKeysDoc: OperationDoc = {
  tag: 'Keys',
  description:
    "The authenticated merchant's keys that still work (not revoked, not expired), oldest first: each key's public id, name, scopes, " +
    'creation, end, last use (to within about a minute), the networks it may be used from and its mode (`live`, or `test`: ' +
    'it reaches the test dataset only, docs/test-mode.md). Never a secret. Needs a key with the scope ' +
    '`users:read`. Takes no query parameters.',
  readsQuery: true,
  parameters: [],
  badRequest: `A query parameter (this endpoint takes none; \`unknown_parameter\` per name), or ${MALFORMED_QUERY}`,
  badRequestCodes: ['unknown_parameter', 'malformed_request'],
  responses: {
    '200': response('The keys.', schemaRef('KeyList')),
  },
};
