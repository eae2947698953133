/** The `merchant-api` command line on Deno, loaded by main-deno.ts: the same commands as on Node, served by `Deno.serve`. */
import process from 'node:process';
import { serve } from '../../adapters/deno.js';
import { CliUsageError } from './usage-error.js';
import { mysqlCommands, openMysqlStorage, startWebhookDispatcher } from './commands/mysql-lazy.js';
import { processIo } from './process-io.js';
import { runCli } from './run.js';
import { WORKER_ARGUMENT } from './workers/channel.js';
import { spawnedWorkers } from './workers/runtimes.js';

/** The permissions a worker is given: what the server needs (docs/runtimes.md#deno), never more than the primary has. */
const WORKER_PERMISSIONS = ['net', 'read', 'env'] as const;

interface DenoPermissions {
  permissions: { querySync(descriptor: { name: string }): { state: string } };
}

/** `--allow-sys`, which https webhooks need (docs/webhooks.md#runtimes): passed on to the workers when the primary holds it. */
function sysGranted(): boolean {
  return (globalThis as unknown as { Deno: DenoPermissions }).Deno.permissions.querySync({ name: 'sys' }).state === 'granted';
}

/**
 * A worker is `deno run` with the server's permissions and --unstable-net
 * (Deno 2.9 allows `reusePort` only with it) on this script. Deno does not
 * tell a program its own flags, so the primary must hold every permission
 * it passes on, and --allow-run to start the workers.
 */
const workers = spawnedWorkers(
  () => [process.execPath, ['run', ...WORKER_PERMISSIONS.map((name) => `--allow-${name}`), ...(sysGranted() ? ['--allow-sys'] : []), '--unstable-net', process.argv[1]!, 'serve', WORKER_ARGUMENT]],
  () => {
    const { permissions } = (globalThis as unknown as { Deno: DenoPermissions }).Deno;
    const missing = ['run', ...WORKER_PERMISSIONS].filter((name) => permissions.querySync({ name }).state !== 'granted');
    if (missing.length > 0) {
      throw new CliUsageError(`WORKERS above 1 on Deno needs ${missing.map((name) => `--allow-${name}`).join(' ')}: the primary starts its workers (--allow-run) and gives them --allow-net --allow-read --allow-env, which it must hold itself.`);
    }
  },
);

process.exitCode = await runCli(process.argv.slice(2), processIo(), { name: 'deno', serve, openMysqlStorage, startWebhookDispatcher, commands: mysqlCommands, workers });
// Pools, timers and signal handlers may remain; the command has finished.
process.exit();
