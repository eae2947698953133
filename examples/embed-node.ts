/**
 * Embedding merchant-api in an existing Node server, under /merchant-api,
 * beside the server's own routes.
 *
 *   npm run build && npx tsx examples/embed-node.ts
 *   curl http://127.0.0.1:3000/                      # the host application
 *   curl http://127.0.0.1:3000/merchant-api/healthz  # merchant-api
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createMerchantApi } from 'merchant-api';
import { answerClientErrors, createRequestListener } from 'merchant-api/node';
import { createMemoryStorage } from 'merchant-api/storage/memory';

const seed = JSON.parse(readFileSync(new URL('./seed.json', import.meta.url), 'utf8'));
const storage = createMemoryStorage({ seed });
const api = createMerchantApi({ storage, basePath: '/merchant-api' });
const merchantApi = createRequestListener(api);

const server = createServer((req, res) => {
  if (req.url === '/merchant-api' || req.url?.startsWith('/merchant-api/')) return merchantApi(req, res);
  // The host application's own routes.
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end('Hello from the host application\n');
});
// Optional: malformed requests that Node rejects before any route get JSON too.
answerClientErrors(server, api);

// The memory storage refuses a ts of the second it started in (a process before it may have
// accepted that URL then): listening from the next second, every request signed from now on works.
await new Promise((resolve) => setTimeout(resolve, 1000 - (Date.now() % 1000)));
server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 3000;
  console.log(`listening on http://127.0.0.1:${port} (merchant-api under /merchant-api)`);
});

process.on('SIGTERM', () => server.close(() => storage.close()));
