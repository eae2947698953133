/** `GET /openapi.json`: the OpenAPI document of every route (built in src/openapi/document.ts, serialised once). */
import { reply, type Reply } from '../http/responses.js';
import { response, schemaRef } from '../openapi/fragments.js';
import type { OperationDoc } from '../openapi/operation.js';
import type { HandlerDeps, RouteInput } from './route.js';
import type { RequestContext } from '../http/context.js';

export function openApiDocumentRoute(_ctx: RequestContext, _input: RouteInput, deps: HandlerDeps): Reply {
  return reply(200, deps.openApiBody);
}

/** The OpenAPI operation of `GET /openapi.json`, besides what the route table and every route share. */
export const openApiDocumentDoc: OperationDoc = {
  tag: 'Service',
  description: 'This document. Ignores the query string.',
  readsQuery: false,
  responses: { '200': response('The OpenAPI 3.1 document.', schemaRef('OpenApiDocument')) },
};
