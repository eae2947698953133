/** `GET /healthz` (the process answers) and `GET /readyz` (the storage answers too), docs/protocol.md#endpoints. */
import type { RequestContext } from '../http/context.js';
import { reply, type Reply } from '../http/responses.js';
import { response, schemaRef } from '../openapi/fragments.js';
import type { OperationDoc } from '../openapi/operation.js';
import type { HandlerDeps, RouteInput } from './route.js';

const OK = '{"status":"ok"}';
const HEALTHY = reply(200, OK);

export function healthz(): Reply {
  return HEALTHY;
}

export async function readyz(ctx: RequestContext, _input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  await deps.storage('ping', ctx, (s) => s.ping());
  return HEALTHY;
}
