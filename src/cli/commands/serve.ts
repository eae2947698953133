/**
 * `merchant-api serve`: the standalone server on the embedded default (memory
 * storage from a seed file) or on MySQL when DATABASE_URL is set, on
 * whichever runtime's adapter it is given. Shuts down gracefully on
 * SIGTERM/SIGINT: stop accepting, finish in-flight requests, close storage.
 * With WORKERS above 1 this process is the primary of that many workers
 * (workers/supervisor.ts), each of which runs this same command as `serve --worker`.
 */
import { readFile } from 'node:fs/promises';
import process from 'node:process';
import { createJsonLogger, createMerchantApi, type HealthPart, type Logger, type MerchantApi, type Storage } from '../../index.js';
import { createMetrics, type WebhookMetrics } from '../../observe/metrics.js';
import { throttleFullCount, writeConflictCounts } from '../../cli-internal.js';
import { loadMemoryStorage, MemoryStorage, SeedError, SeedSyntaxError } from '../../storage/memory/index.js';
import type { Served, ServeOptions } from '../../../adapters/node.js';
import { readServerConfig, type MysqlConfig, type ServerConfig } from '../config.js';
import type { CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';
import { parseCommandArgs } from './parse-args.js';
import { withRedisConfig } from '../redis-state.js';
import { runWebhookDispatcher } from '../webhook-dispatch.js';
import { WORKER_ARGUMENT, workerChannel, type WorkerChannel } from '../workers/channel.js';
import { stampPid, wholeLineWriter } from '../workers/line-writer.js';
import { isLoopback, logStartEvents, printBanner, startBanner, type StartFacts } from '../start-lines.js';
import type { WorkerRuntime } from '../workers/runtimes.js';
import { runWorkers } from '../workers/supervisor.js';

/** An adapter's `serve`, the only runtime-specific piece the command needs. */
export type ServeFunction = (api: MerchantApi, options: ServeOptions) => Promise<Served>;

/** Opens the MySQL storage for DATABASE_URL (provided by the MySQL CLI module). */
export type OpenMysqlStorage = (config: MysqlConfig, io: CliIo, logger: Logger) => Promise<Storage>;

export interface ServeRuntime {
  name: string;
  serve: ServeFunction;
  openMysqlStorage?: OpenMysqlStorage;
  /** Starts the webhook dispatcher on MySQL (docs/webhooks.md#delivery); undefined where MySQL is not available. */
  startWebhookDispatcher?: (config: MysqlConfig, io: CliIo, logger: Logger, metrics?: WebhookMetrics) => Promise<{ stop(): Promise<void>; healthPart(): HealthPart } | undefined>;
  /** How this runtime runs WORKERS; undefined: only one process. */
  workers?: WorkerRuntime;
}

type JsonLogger = ReturnType<typeof createJsonLogger>;

const DEMO_SEED = new URL('../examples/seed.json', import.meta.url);

export const SERVE_USAGE = 'Usage: merchant-api serve   (the default command; it takes no arguments: every setting is an environment variable, see docs/configuration.md)';

export async function serveCommand(runtime: ServeRuntime, io: CliIo, args: string[] = []): Promise<number> {
  const asWorker = readServeArguments(args);
  if (asWorker === 'help') {
    io.out(SERVE_USAGE);
    return 0;
  }
  const config = readServerConfig(io.env);
  refuseDemoOnNetwork(config);
  // Asked for before anything else, so that the primary's stop message finds its listener.
  const worker = asWorker ? workerChannel(runtime.workers) : undefined;
  if (!worker && config.workers > 1) {
    // Unreadable TLS files: one message here rather than one from each worker.
    if (config.tls) await readTlsFiles(config.tls);
    return runWorkers(runtime.name, runtime.workers, io, config, (fetch) => runtime.serve({ fetch }, { port: config.metricsPort, hostname: config.metricsHost }));
  }
  // Log lines (JSON) go where the CLI writes, gathered per event-loop turn; a worker's in writes no other worker's can cut.
  // The gathered lines go out as they are (io.write): as one line for io.out they were copied twice more, every write of a busy access log.
  const logger = createJsonLogger({ level: config.logLevel, write: worker ? stampPid(process.pid, wholeLineWriter(io.out)) : (io.write ?? ((lines) => io.out(lines.slice(0, -1)))) });
  const opened = await openStorage(config, runtime, io, logger);
  const { storage, description, demo } = await withRedisConfig(opened, config.redis, config.storageTimeout, logger, config.timestampTolerance, config.timestampFutureTolerance);
  // The memory replay store, and Redis life markers first written now, refuse a ts of the second they
  // started in (a process before may have accepted it then): listening from the next second on, no
  // request signed once the server is up meets that. MySQL keeps its salts across restarts.
  if (!config.databaseUrl) await new Promise((resolve) => setTimeout(resolve, 1000 - (Date.now() % 1000)));
  // Started once the API listens (its metrics come from there); until then /healthz has no `webhooks` part.
  let webhooks: Awaited<ReturnType<NonNullable<ServeRuntime['startWebhookDispatcher']>>>;
  const healthParts = () => (webhooks === undefined ? undefined : { webhooks: webhooks.healthPart() });
  const { served, metricsServer, webhookMetrics } = await listen(runtime, config, storage, logger, worker, healthParts);
  // Every instance on MySQL sends what the outbox holds; instances share the work by claims (docs/webhooks.md#delivery).
  // On the memory storage, the instance sends its own in-process queue (docs/webhooks.md#on-the-memory-storage).
  if (config.databaseUrl) webhooks = runtime.startWebhookDispatcher ? await runtime.startWebhookDispatcher(config.mysql, io, logger, webhookMetrics) : undefined;
  else if (opened.storage instanceof MemoryStorage && config.mysql.webhooks.dispatch) webhooks = runWebhookDispatcher(opened.storage.webhookOutbox, config.mysql.webhooks, io, logger, webhookMetrics);

  const facts: StartFacts = {
    url: served.url,
    runtime: runtime.name,
    description,
    metricsUrl: metricsServer && `${metricsServer.url}/metrics`,
    docsUrl: config.docsPage ? `${config.publicUrl?.[0] ?? served.url}/docs` : undefined,
    cursorSecret: Boolean(config.cursorSecret),
    publicUrl: config.publicUrl,
    allowedHosts: config.allowedHosts,
    hostname: config.hostname,
    demo,
  };
  // JSON events for the log on stdout; the banner for people apart (start-lines.ts).
  logStartEvents(logger, facts);
  logger.flush();
  // A worker's banner is the primary's to print, once for all workers.
  if (worker) worker.ready(startBanner(facts));
  else printBanner(io, startBanner(facts));

  // A worker stops when the primary says so, or on a signal of its own (Ctrl-C reaches every process of the terminal).
  const never = new Promise<string>(() => {});
  const signal = await Promise.race([io.stopSignal ?? never, worker?.stopRequested ?? never]);
  logger.info({ event: 'shutdown', signal }, 'finishing in-flight requests');
  logger.flush();
  await Promise.all([served.close(), metricsServer?.close(), webhooks?.stop()]);
  await storage.close();
  logger.info({ event: 'stopped' });
  logger.flush();
  return 0;
}

/** Whether this process is a worker (`--worker`), or `'help'`; serve takes no other argument. */
function readServeArguments(args: string[]): boolean | 'help' {
  // --worker is no option to document: only a primary passes it, to the workers it starts.
  const parsed = parseCommandArgs(args, { [WORKER_ARGUMENT.slice(2)]: { type: 'boolean' } }, SERVE_USAGE);
  if (parsed === 'help') return 'help';
  const [unknown] = parsed.positionals;
  if (unknown !== undefined) throw new CliUsageError(`serve takes no arguments (got "${unknown}"); it is configured by environment variables, see docs/configuration.md.`);
  return Boolean(parsed.values[WORKER_ARGUMENT.slice(2)]);
}

/** The demo merchant and its key are published in the docs: never serve them to a network. */
function refuseDemoOnNetwork(config: ServerConfig): void {
  if (config.databaseUrl || config.seedFile !== undefined || isLoopback(config.hostname)) return;
  throw new CliUsageError(
    `HOST ${config.hostname} is reachable from other machines, and without DATABASE_URL or SEED_FILE the server would serve the demo merchant, whose key is public. ` +
      'Set DATABASE_URL (MySQL) or SEED_FILE (a seed with your merchants), or HOST=127.0.0.1 to try the demo on this machine.',
  );
}

/**
 * The handler on the storage, listening, and the metrics on their own listener (or handed to the
 * primary); on a failure, whatever was opened is closed again before the error goes on.
 */
async function listen(runtime: ServeRuntime, config: ServerConfig, storage: Storage, logger: JsonLogger, worker: WorkerChannel | undefined, healthParts: () => Record<string, HealthPart> | undefined): Promise<{ served: Served; metricsServer: Served | undefined; webhookMetrics: WebhookMetrics | undefined }> {
  let served: Served | undefined;
  try {
    const memory = storage instanceof MemoryStorage ? storage : undefined;
    const metrics = config.metricsPort === undefined ? undefined : createMetrics({ saltCount: memory && (() => memory.saltCount), saltCapacity: memory?.maxSalts, writeConflicts: config.databaseUrl ? writeConflictCounts : undefined, throttleFull: throttleFullCount, webhookDropped: memory && (() => memory.webhookOutbox.dropped), webhookOutboxPerProcess: memory !== undefined });
    const api = createMerchantApi({
      storage,
      publicUrl: config.publicUrl,
      allowedHosts: config.allowedHosts,
      trustProxy: config.trustProxy,
      ipv6Prefix: config.ipv6Prefix,
      timestampTolerance: config.timestampTolerance,
      timestampFutureTolerance: config.timestampFutureTolerance,
      storageTimeout: config.storageTimeout,
      cursorSecret: config.cursorSecret,
      logger,
      accessLog: config.accessLog,
      docsPage: config.docsPage,
      hooks: metrics ? [metrics.hooks] : [],
      throttle: config.throttle,
      merchantConcurrency: config.merchantConcurrency,
      fairShare: config.fairShare,
      testMode: config.testMode,
      // `/merchant/webhooks` checks a URL with the rules `webhook add` and the dispatcher apply.
      healthParts,
      webhooks: { allowPrivate: config.mysql.webhooks.allowPrivate, allowHttp: config.mysql.webhooks.allowHttp, maxEndpointsPerMerchant: config.mysql.webhooks.maxEndpointsPerMerchant, retentionMs: config.mysql.webhooks.retentionMs },
    });
    const tls = config.tls && (await readTlsFiles(config.tls));
    served = await runtime.serve(api, {
      port: config.port,
      hostname: config.hostname,
      tls,
      limits: config.limits,
      shutdownTimeout: config.shutdownTimeout,
      reusePort: worker?.reusePort,
      ipv6Prefix: config.ipv6Prefix,
      onConnectionsCapped: (clientAddress, limit) => logger.warn({ event: 'connections_per_address_reached', client_address: clientAddress, limit }),
    });
    // Metrics on a listener of their own (METRICS_HOST, by default HOST), so they are never public by accident; a worker's go to the primary, which serves them all.
    let metricsServer: Served | undefined;
    if (metrics && worker) worker.answerMetrics(() => metrics.registry.getMetricsAsJSON());
    else if (metrics) metricsServer = await runtime.serve(metrics, { port: config.metricsPort, hostname: config.metricsHost });
    return { served, metricsServer, webhookMetrics: metrics?.webhooks };
  } catch (error) {
    await served?.close();
    await storage.close();
    throw error;
  }
}

async function readTlsFiles(files: { certFile: string; keyFile: string }): Promise<{ cert: string; key: string }> {
  return { cert: await readTlsFile('TLS_CERT_FILE', files.certFile), key: await readTlsFile('TLS_KEY_FILE', files.keyFile) };
}

async function readTlsFile(variable: string, file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    throw new CliUsageError(`Cannot read ${variable} ${file}: ${(error as NodeJS.ErrnoException).code ?? 'error'}.`);
  }
}

async function openStorage(config: ServerConfig, runtime: ServeRuntime, io: CliIo, logger: Logger): Promise<{ storage: Storage; description: string; demo: boolean }> {
  if (config.databaseUrl) {
    if (!runtime.openMysqlStorage) throw new CliUsageError(`DATABASE_URL is set, but MySQL storage is not available on ${runtime.name}.`);
    return { storage: await runtime.openMysqlStorage(config.mysql, io, logger), description: 'storage: MySQL', demo: false };
  }
  const file = config.seedFile ?? DEMO_SEED;
  const name = config.seedFile ?? 'the bundled examples/seed.json';
  // Streamed (JSON, or NDJSON for .ndjson/.jsonl): millions of users never become one string.
  let loaded: Awaited<ReturnType<typeof loadMemoryStorage>>;
  try {
    loaded = await loadMemoryStorage(file, {
      maxSalts: config.maxSalts,
      // A delivery that found the queue full (docs/webhooks.md#on-the-memory-storage): by ids, never the event.
      webhooks: { onDropped: (merchantId, endpointId) => logger.warn({ event: 'webhook_delivery_dropped', merchant_id: merchantId, endpoint_id: endpointId }, 'webhook queue full: a delivery was dropped') },
    });
  } catch (error) {
    if (error instanceof SeedSyntaxError) throw new CliUsageError(`SEED_FILE ${name} is not valid JSON: ${error.message}`);
    if (error instanceof SeedError) throw new CliUsageError(`SEED_FILE ${name}: ${error.message}`);
    if ((error as NodeJS.ErrnoException).syscall !== undefined) throw new CliUsageError(`Cannot read SEED_FILE ${name}: ${(error as NodeJS.ErrnoException).code ?? 'error'}.`);
    throw error;
  }
  // Counted from what was loaded: "users" may be absent from the file.
  return {
    storage: loaded.storage,
    description: `storage: in memory, loaded from ${name}: ${loaded.merchants} merchants, ${loaded.users} users; changes are lost on exit`,
    demo: config.seedFile === undefined,
  };
}

