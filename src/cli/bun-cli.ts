/** The `merchant-api` command line on Bun, loaded by main-bun.ts: the same commands as on Node, served by `Bun.serve`. */
import process from 'node:process';
import { serve } from '../../adapters/bun.js';
import { mysqlCommands, openMysqlStorage, startWebhookDispatcher } from './commands/mysql-lazy.js';
import { processIo } from './process-io.js';
import { runCli } from './run.js';
import { WORKER_ARGUMENT } from './workers/channel.js';
import { spawnedWorkers } from './workers/runtimes.js';

// A worker is this Bun with its flags (--smol, ...) on this script.
const workers = spawnedWorkers(() => [process.execPath, [...process.execArgv, process.argv[1]!, 'serve', WORKER_ARGUMENT]]);

process.exitCode = await runCli(process.argv.slice(2), processIo(), { name: 'bun', serve, openMysqlStorage, startWebhookDispatcher, commands: mysqlCommands, workers });
// Pools, timers and signal handlers may remain; the command has finished.
process.exit();
