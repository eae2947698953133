/**
 * (0b) The floor of a fetch handler on Node: `@hono/node-server` (what
 * merchant-api's Node adapter uses) answering a constant JSON Response, no
 * parsing, no HMAC. The gap between (0) and this is the Request/Response shim.
 */
import { getRequestListener } from '@hono/node-server';
import { createServer } from 'node:http';
import { announce, exitOnSignal, portFromEnv } from './data.mjs';

const BODY = '{"status":"ok","is_valid":true}';
const listener = getRequestListener(() => new Response(BODY, { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'no-store' } }));
const server = createServer(listener);
server.listen(portFromEnv(), '127.0.0.1', () => announce(server.address().port));
exitOnSignal(() => new Promise((resolve) => server.close(resolve) && server.closeAllConnections()));
