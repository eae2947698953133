/**
 * The server the MySQL benchmark measures, in its own process (so its RSS is
 * its own): the same pieces as `merchant-api serve` with DATABASE_URL, i.e.
 * `openMysqlStorage` + `createMerchantApi` + the Node adapter. Prints
 * `listening <url>` once ready; stops on SIGTERM.
 */
import process from 'node:process';
import { serve } from '../adapters/node.js';
import { createMerchantApi } from '../src/api.js';
import { readMysqlConfig } from '../src/cli/config.js';
import { openMysqlStorage } from '../src/cli/commands/mysql.js';
import { silentLogger } from '../src/observe/logger.js';

const io = { env: process.env, out: (line: string) => console.log(line), err: (line: string) => console.error(line) };
const storage = await openMysqlStorage(readMysqlConfig(process.env), io);
const served = await serve(createMerchantApi({
    storage,
    logger: silentLogger,
    cursorSecret: process.env.CURSOR_SECRET,
    throttle: false,
    // The pre-signed validatesignature paths (bench/signed-paths.ts) are signed for this URL and window.
    publicUrl: process.env.PUBLIC_URL,
    timestampTolerance: process.env.TIMESTAMP_TOLERANCE ? Number(process.env.TIMESTAMP_TOLERANCE) : undefined,
  }), { port: 0, hostname: '127.0.0.1' });
console.log(`listening ${served.url}`);
process.once('SIGTERM', async () => {
  await served.close();
  await storage.close();
  process.exit(0);
});
