/** The `merchant-api` command on Bun: the same commands as `main.ts`, served by `Bun.serve`. */
import process from 'node:process';
import { serve } from '../../adapters/bun.js';
import { mysqlCommands, openMysqlStorage } from './commands/mysql.js';
import { processIo } from './process-io.js';
import { runCli } from './run.js';
import { spawnedWorkers, WORKER_ARGUMENT } from './workers/workers.js';

// A worker is this Bun with its flags (--smol, ...) on this script.
const workers = spawnedWorkers(() => [process.execPath, [...process.execArgv, process.argv[1]!, 'serve', WORKER_ARGUMENT]]);

process.exitCode = await runCli(process.argv.slice(2), processIo(), { name: 'bun', serve, openMysqlStorage, commands: mysqlCommands, workers });
// Pools, timers and signal handlers may remain; the command has finished.
process.exit();
