/** The `merchant-api` command on Deno: the same commands as `main.ts`, served by `Deno.serve`. */
import process from 'node:process';
import { serve } from '../../adapters/deno.js';
import { mysqlCommands, openMysqlStorage } from './mysql.js';
import { processIo } from './process-io.js';
import { runCli } from './run.js';

process.exitCode = await runCli(process.argv.slice(2), processIo(), { name: 'deno', serve, openMysqlStorage, commands: mysqlCommands });
// Pools, timers and signal handlers may remain; the command has finished.
process.exit();
