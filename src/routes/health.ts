/** `GET /healthz` (the process answers) and `GET /readyz` (the storage answers too), docs/protocol.md#endpoints. */
import type { RequestContext } from '../http/context.js';
import { reply, type Reply } from '../http/responses.js';
import { response, schemaRef } from '../openapi/fragments.js';
import type { OperationDoc } from '../openapi/operation.js';
import type { HandlerDeps, RouteInput } from './route.js';

const OK = '{"status":"ok"}';
const HEALTHY = reply(200, OK);

/** Live whatever the storage's parts do; a storage that reports them (`Storage.health`) has them listed in `details`. */
export function healthz(_ctx: RequestContext, _input: RouteInput, deps: HandlerDeps): Reply {
  const details = deps.storageHealth?.();
  return details === undefined ? HEALTHY : reply(200, `{"status":"ok","details":${JSON.stringify(details)}}`);
}

/**
 * Ready when the storage answers. Signing held after salts on Redis were lost (`details.signing`,
 * docs/scaling.md#health-and-metrics) does not make it unready: the users endpoints work meanwhile,
 * so the answer stays 200 and says so in `details`.
 */
export async function readyz(ctx: RequestContext, _input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  await deps.storage(ctx).ping();
  const signing = deps.storageHealth?.()?.signing;
  return signing === undefined ? HEALTHY : reply(200, `{"status":"ok","details":${JSON.stringify({ signing })}}`);
}

/** The OpenAPI operation of `GET /healthz`, besides what the route table and every route share. */
export const healthzDoc: OperationDoc = {
  tag: 'Service',
  description: 'Liveness: answers while the process runs. Ignores the query string.',
  readsQuery: false,
  responses: {
    '200': response(
      'The process is up: `{"status":"ok"}`. A storage that reports its parts (salts on Redis) adds `details`, each part with `ok` and, when not ok, a `problem`: still 200, since the users endpoints work without them.',
      schemaRef('Health'),
    ),
  },
};

/** The OpenAPI operation of `GET /readyz`, besides what the route table and every route share. */
export const readyzDoc: OperationDoc = {
  tag: 'Service',
  description: 'Readiness: answers 200 when the storage answers a ping, else 503. Ignores the query string.',
  readsQuery: false,
  usesStorage: true,
  responses: {
    '200': response(
      'The storage answers: `{"status":"ok"}`. While signed requests are held after salts on Redis were lost (every `ts` before a time is refused, docs/scaling.md#the-life-marker), ' +
        'still 200, since the users endpoints work, with `details.signing`: `{"status":"ok","details":{"signing":{"ok":false,"problem":"held: a ts before 1765000031 is refused, as Redis lost salts (or was first marked) then; 31 s left"}}}`.',
      schemaRef('Health'),
    ),
  },
};
