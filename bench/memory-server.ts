/**
 * The memory-storage server `bench:seed` times, in its own process: what `merchant-api serve`
 * does with SEED_FILE (the streamed loader, `createMerchantApi`, the Node adapter). Prints
 * `listening <url>` once ready; stops on SIGTERM.
 */
import process from 'node:process';
import { serve } from '../adapters/node.js';
import { createMerchantApi } from '../src/api.js';
import { silentLogger } from '../src/observe/logger.js';
import { loadMemoryStorage } from '../src/storage/memory/index.js';

const { storage } = await loadMemoryStorage(process.env.SEED_FILE!);
const served = await serve(createMerchantApi({ storage, logger: silentLogger, cursorSecret: process.env.CURSOR_SECRET, throttle: false }), { port: 0, hostname: '127.0.0.1' });
console.log(`listening ${served.url}`);
process.once('SIGTERM', async () => {
  await served.close();
  await storage.close();
  process.exit(0);
});
