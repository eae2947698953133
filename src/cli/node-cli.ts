/** The `merchant-api` command line on Node, loaded by main.ts. */
import cluster from 'node:cluster';
import process from 'node:process';
import { serve } from '../../adapters/node.js';
import { mysqlCommands, openMysqlStorage, startWebhookDispatcher } from './commands/mysql-lazy.js';
import { processIo } from './process-io.js';
import { runCli } from './run.js';
import { clusterWorkers } from './workers/runtimes.js';

process.exitCode = await runCli(process.argv.slice(2), processIo(), { name: 'node', serve, commands: mysqlCommands, openMysqlStorage, startWebhookDispatcher, workers: clusterWorkers(cluster) });
// Pools, timers and signal handlers may remain; the command has finished.
process.exit();
