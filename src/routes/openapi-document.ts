/** `GET /openapi.json`: the OpenAPI document of every route (built in src/openapi/document.ts, serialised once). */
import { reply, type Reply } from '../http/responses.js';
import type { HandlerDeps, RouteInput } from './route.js';
import type { RequestContext } from '../http/context.js';

export function openApiDocumentRoute(_ctx: RequestContext, _input: RouteInput, deps: HandlerDeps): Reply {
  return reply(200, deps.openApiBody);
}
