/**
 * merchant-api on Deno: the demo data served by `Deno.serve`, shut down
 * gracefully on SIGTERM or Ctrl-C. Deno resolves the packages from
 * node_modules through package.json; no deno.json is needed.
 *
 *   npm run build && npx deno run --allow-net --allow-read --allow-env examples/deno.ts
 *   PORT=8802 npx deno run --allow-net --allow-read --allow-env examples/deno.ts   # beside examples/bun.ts
 *   curl -u demo-merchant:demo-secret 'http://127.0.0.1:8787/merchant/users?limit=2'
 */
import process from 'node:process';
import { createMerchantApi } from 'merchant-api';
import { signUrl } from 'merchant-api/signing';
import { serve } from 'merchant-api/deno';
import { createMemoryStorage } from 'merchant-api/storage/memory';
import seed from './seed.json' with { type: 'json' };

const storage = createMemoryStorage({ seed });
const api = createMerchantApi({ storage });
// PORT (default 8787; 0 picks a free port), so the Bun and Deno examples can run side by side.
const port = Number(process.env.PORT || 8787);
if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`PORT must be a whole number from 0 to 65535 (got "${process.env.PORT}")`);
// The memory storage refuses a ts of the second it started in (a process before it may have
// accepted that URL then): listening from the next second, every request signed from now on works.
await new Promise((resolve) => setTimeout(resolve, 1000 - (Date.now() % 1000)));
const server = await serve(api, { port });
console.log(`merchant-api listening on ${server.url} (Deno)`);
console.log(`Try: curl '${signUrl('demo-secret', `${server.url}/validatesignature`, { cp: 'demo-merchant' })}'`);

// node:process signals work on Deno too (Deno.addSignalListener is the native form).
async function stop(signal: string): Promise<void> {
  console.log(`${signal}: finishing in-flight requests`);
  await server.close();
  await storage.close();
  console.log('stopped');
  process.exit(0);
}
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
