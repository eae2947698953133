/**
 * The route table: every endpoint once. Dispatch, 404, 405 with `Allow`,
 * HEAD (answered from GET by the pipeline) and the OpenAPI `paths` all come
 * from it, so adding an endpoint is one entry here and one handler file.
 */
import { healthz, readyz } from './health.js';
import { openApiDocumentRoute } from './openapi-document.js';
import type { Route } from './route.js';
import { getUser } from './user.js';
import { listUsers } from './users.js';
import { validateSignature } from './validate-signature.js';

export const ROUTES: readonly Route[] = [
  {
    id: 'validateSignature',
    method: 'GET',
    pattern: '/validatesignature',
    auth: 'signature',
    errorShape: 'signature',
    summary: 'Check a signed request',
    handle: validateSignature,
  },
  {
    id: 'listUsers',
    method: 'GET',
    pattern: '/merchant/users',
    trailingSlash: true,
    auth: 'basic',
    errorShape: 'envelope',
    summary: "List the merchant's users",
    handle: listUsers,
  },
  {
    id: 'getUser',
    method: 'GET',
    pattern: '/merchant/users/{shared_user_id}',
    auth: 'basic',
    errorShape: 'envelope',
    summary: 'Read one user',
    handle: getUser,
  },
  { id: 'health', method: 'GET', pattern: '/healthz', auth: 'none', errorShape: 'envelope', summary: 'Liveness: the process answers', handle: healthz },
  { id: 'ready', method: 'GET', pattern: '/readyz', auth: 'none', errorShape: 'envelope', summary: 'Readiness: the storage answers', handle: readyz },
  { id: 'openApi', method: 'GET', pattern: '/openapi.json', auth: 'none', errorShape: 'envelope', summary: 'This OpenAPI document', handle: openApiDocumentRoute },
];

/** The methods a route answers: each of its own, and HEAD wherever GET is. */
export function allowedMethods(route: Route): string {
  return route.method === 'GET' ? 'GET, HEAD' : route.method;
}
