/**
 * (0) The pure HTTP limit on Node: `node:http` answering a constant JSON body
 * with the same headers as the API, no parsing, no HMAC.
 */
import { createServer } from 'node:http';
import { announce, exitOnSignal, portFromEnv } from './data.mjs';

const BODY = '{"status":"ok","is_valid":true}';
const HEADERS = { 'content-type': 'application/json', 'cache-control': 'no-store', 'content-length': String(BODY.length) };

const server = createServer((_req, res) => {
  res.writeHead(200, HEADERS);
  res.end(BODY);
});
server.listen(portFromEnv(), '127.0.0.1', () => announce(server.address().port));
exitOnSignal(() => new Promise((resolve) => server.close(resolve) && server.closeAllConnections()));
