/**
 * Everything the command line reads from the environment, read and
 * validated here and nowhere else (docs/configuration.md), then passed
 * down. Every bad value is named in one error.
 */
import { availableParallelism } from 'node:os';
import { DEFAULT_TEST_USERS, DEFAULTS, LOG_LEVELS, MAX_TEST_USERS, MAX_IPV6_PREFIX, MAX_MAX_SALTS, MIN_IPV6_PREFIX, normaliseAllowedHost, normalisePublicUrl, type ThrottleOptions } from '../cli-internal.js';
import type { ServeOptions } from '../../adapters/node.js';
import { MasterKeyError, parseMasterKey, type MasterKey } from '../storage/mysql/index.js';
import { CliUsageError } from './usage-error.js';
import { redisSettings, type RedisConfig } from './redis-config.js';
import { replicaSettings, type ReplicaConfig } from './replica-config.js';
import { webhookSettings, type WebhookConfig } from './webhook-config.js';

type Env = Record<string, string | undefined>;

/** What the MySQL commands and the MySQL storage need. */
export interface MysqlConfig {
  /** DATABASE_URL, when set. */
  databaseUrl?: string;
  /** MASTER_KEY, parsed on first use (only some commands need it). */
  masterKey(): MasterKey;
  /** KEY_CACHE_TTL in milliseconds (default 10 s; 0 disables the cache). */
  keyCacheTtlMs: number;
  /** STORAGE_TIMEOUT in milliseconds: every storage call, and every query of the server. */
  storageTimeout: number;
  /** DATABASE_READ_URL and DATABASE_READ_MAX_LAG: user reads from a replica (docs/mysql.md#read-replicas), or undefined. */
  replica?: ReplicaConfig;
  /** IPV6_PREFIX, for `throttle unblock` to find an IPv6 client's row under its network as the servers count it. */
  ipv6Prefix: number;
  /** REDIS_URL and the other REDIS_* variables, for `throttle list|unblock` to act where the servers keep the blocks. */
  redis?: RedisConfig;
  /** The WEBHOOK_* variables (docs/webhooks.md#configuration). */
  webhooks: WebhookConfig;
}

export interface ServerConfig {
  port: number;
  hostname: string;
  /** Explicit SEED_FILE, or undefined for the bundled demo seed. */
  seedFile?: string;
  publicUrl?: string[];
  /** ALLOWED_HOSTS: without PUBLIC_URL, the host names a request may name (the `allowedHosts` option). */
  allowedHosts?: string[];
  trustProxy: boolean;
  /** IPV6_PREFIX: IPv6 clients count per network of this prefix length in every per-address limit. */
  ipv6Prefix: number;
  timestampTolerance: number;
  /** TIMESTAMP_FUTURE_TOLERANCE: how far ahead of the clock a ts may be (default TIMESTAMP_TOLERANCE). */
  timestampFutureTolerance: number;
  storageTimeout: number;
  cursorSecret?: string;
  tls?: { certFile: string; keyFile: string };
  databaseUrl?: string;
  mysql: MysqlConfig;
  logLevel: (typeof LOG_LEVELS)[number];
  accessLog: boolean;
  /** DOCS_PAGE: `GET /docs`, the API reference page. */
  docsPage: boolean;
  /** METRICS_PORT: serve Prometheus metrics on their own listener. */
  metricsPort?: number;
  /** METRICS_HOST: the interface of that listener; default HOST. */
  metricsHost: string;
  /** SHUTDOWN_TIMEOUT: ms in-flight requests may take after SIGTERM before their connections are cut. */
  shutdownTimeout: number;
  /** Throttling of failed authentication (AUTH_* variables), or false (THROTTLE_AUTH=false). */
  throttle: ThrottleOptions | false;
  /** MERCHANT_CONCURRENCY: listings one merchant may run at once. */
  merchantConcurrency: number;
  /** FAIR_SHARE and FAIR_SHARE_CPU: fair sharing of a busy instance between merchants, or false. */
  fairShare: { busyPercent: number } | false;
  /** TEST_MODE and TEST_MODE_USERS: test keys and the size of each merchant's generated test dataset (docs/test-mode.md), or false. */
  testMode: { users: number } | false;
  /** MAX_SALTS: salts the memory storage holds at most (one merchant: half). */
  maxSalts: number;
  /** HEADERS_TIMEOUT, REQUEST_TIMEOUT, KEEP_ALIVE_TIMEOUT (ms), MAX_CONNECTIONS and MAX_CONNECTIONS_PER_ADDRESS (IPv6: per IPV6_PREFIX network). */
  limits: Required<NonNullable<ServeOptions['limits']>>;
  /** WORKERS: processes serving the same port (`auto`: one per core); above 1 only with MySQL; with METRICS_PORT the primary serves every worker's metrics. */
  workers: number;
  /** REDIS_URL and the other REDIS_* variables: salts and throttle counters on Redis (docs/scaling.md), or undefined. */
  redis: RedisConfig | undefined;
}

/** Reads settings, collecting every problem rather than stopping at the first. */
function reader(env: Env) {
  const problems: string[] = [];
  const text = (name: string): string | undefined => (env[name] === undefined || env[name] === '' ? undefined : env[name]);
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = text(name);
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name} must be a whole number from ${min} to ${max} (got "${raw}")`);
      return fallback;
    }
    return Number(raw);
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const raw = (text(name) ?? String(fallback)).toLowerCase();
    if (!['true', 'false', '1', '0', 'yes', 'no'].includes(raw)) problems.push(`${name} must be true or false (got "${env[name]}")`);
    return ['true', '1', 'yes'].includes(raw);
  };
  const check = () => {
    if (problems.length) throw new CliUsageError(`Invalid configuration: ${problems.join('; ')}.`);
  };
  return { problems, text, int, bool, check };
}

export function readMysqlConfig(env: Env): MysqlConfig {
  const r = reader(env);
  const config = mysqlSettings(env, r);
  r.check();
  return config;
}

function mysqlSettings(env: Env, r: ReturnType<typeof reader>): MysqlConfig {
  let parsed: MasterKey | undefined;
  return {
    databaseUrl: r.text('DATABASE_URL'),
    masterKey() {
      try {
        return (parsed ??= parseMasterKey(env.MASTER_KEY));
      } catch (error) {
        if (error instanceof MasterKeyError) throw new CliUsageError(error.message);
        throw error;
      }
    },
    keyCacheTtlMs: r.int('KEY_CACHE_TTL', DEFAULTS.keyCacheTtlSeconds, 0, 3600) * 1000,
    storageTimeout: r.int('STORAGE_TIMEOUT', DEFAULTS.storageTimeout, 1, 600_000),
    replica: replicaSettings(r),
    ipv6Prefix: r.int('IPV6_PREFIX', DEFAULTS.ipv6Prefix, MIN_IPV6_PREFIX, MAX_IPV6_PREFIX),
    redis: redisSettings(r),
    webhooks: webhookSettings(r),
  };
}

export function readServerConfig(env: Env): ServerConfig {
  const r = reader(env);
  const trustProxy = r.bool('TRUST_PROXY', false);
  const cursorSecret = r.text('CURSOR_SECRET');
  if (cursorSecret !== undefined && new TextEncoder().encode(cursorSecret).length < 32) r.problems.push('CURSOR_SECRET must be at least 32 bytes long');
  const certFile = r.text('TLS_CERT_FILE');
  const keyFile = r.text('TLS_KEY_FILE');
  if ((certFile === undefined) !== (keyFile === undefined)) r.problems.push('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  const logLevel = (r.text('LOG_LEVEL') ?? 'info').toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) r.problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${env.LOG_LEVEL}")`);
  const metricsPort = r.text('METRICS_PORT') === undefined ? undefined : r.int('METRICS_PORT', 0, 0, 65535);
  const port = r.int('PORT', DEFAULTS.port, 0, 65535);
  const hostname = r.text('HOST') ?? DEFAULTS.hostname;
  const mysql = mysqlSettings(env, r);
  const timestampTolerance = r.int('TIMESTAMP_TOLERANCE', DEFAULTS.timestampTolerance, 1, 86_400);
  const timestampFutureTolerance = r.int('TIMESTAMP_FUTURE_TOLERANCE', timestampTolerance, 0, 86_400);
  if (timestampFutureTolerance > timestampTolerance) r.problems.push(`TIMESTAMP_FUTURE_TOLERANCE must be at most TIMESTAMP_TOLERANCE (${timestampTolerance})`);

  const config: ServerConfig = {
    port,
    hostname,
    seedFile: r.text('SEED_FILE'),
    publicUrl: publicUrls(r),
    allowedHosts: allowedHosts(r),
    trustProxy,
    ipv6Prefix: r.int('IPV6_PREFIX', DEFAULTS.ipv6Prefix, MIN_IPV6_PREFIX, MAX_IPV6_PREFIX),
    timestampTolerance,
    timestampFutureTolerance,
    storageTimeout: mysql.storageTimeout,
    cursorSecret,
    tls: certFile && keyFile ? { certFile, keyFile } : undefined,
    databaseUrl: mysql.databaseUrl,
    mysql,
    logLevel: logLevel as ServerConfig['logLevel'],
    accessLog: r.bool('ACCESS_LOG', true),
    docsPage: r.bool('DOCS_PAGE', true),
    metricsPort,
    metricsHost: r.text('METRICS_HOST') ?? hostname,
    shutdownTimeout: r.int('SHUTDOWN_TIMEOUT', DEFAULTS.shutdownTimeoutMs, 0, 3_600_000),
    throttle: r.bool('THROTTLE_AUTH', true)
      ? {
          pairFailures: r.int('AUTH_FAILURES_PER_MERCHANT', DEFAULTS.throttle.pairFailures, 1, 1_000_000),
          pairBlockSeconds: r.int('AUTH_BLOCK_SECONDS', DEFAULTS.throttle.pairBlockSeconds, 1, 86_400),
          pairMaxBlockSeconds: r.int('AUTH_MAX_BLOCK_SECONDS', DEFAULTS.throttle.pairMaxBlockSeconds, 1, 604_800),
          addressFailures: r.int('AUTH_FAILURES_PER_ADDRESS', DEFAULTS.throttle.addressFailures, 1, 1_000_000),
          addressWindowSeconds: r.int('AUTH_ADDRESS_WINDOW_SECONDS', DEFAULTS.throttle.addressWindowSeconds, 1, 86_400),
          addressBlockSeconds: r.int('AUTH_ADDRESS_BLOCK_SECONDS', DEFAULTS.throttle.addressBlockSeconds, 1, 604_800),
          maxEntries: r.int('AUTH_MAX_ENTRIES', DEFAULTS.throttle.maxEntries, 1, 10_000_000),
        }
      : false,
    merchantConcurrency: r.int('MERCHANT_CONCURRENCY', DEFAULTS.merchantConcurrency, 1, 10_000),
    fairShare: r.bool('FAIR_SHARE', true) ? { busyPercent: r.int('FAIR_SHARE_CPU', DEFAULTS.fairShareBusyPercent, 1, 1000) } : false,
    testMode: r.bool('TEST_MODE', true) ? { users: r.int('TEST_MODE_USERS', DEFAULT_TEST_USERS, 0, MAX_TEST_USERS) } : false,
    maxSalts: r.int('MAX_SALTS', DEFAULTS.maxSalts, 2, MAX_MAX_SALTS),
    limits: {
      headersTimeout: r.int('HEADERS_TIMEOUT', DEFAULTS.connectionLimits.headersTimeout, 100, 600_000),
      requestTimeout: r.int('REQUEST_TIMEOUT', DEFAULTS.connectionLimits.requestTimeout, 100, 3_600_000),
      keepAliveTimeout: r.int('KEEP_ALIVE_TIMEOUT', DEFAULTS.connectionLimits.keepAliveTimeout, 100, 600_000),
      maxConnections: r.int('MAX_CONNECTIONS', DEFAULTS.connectionLimits.maxConnections, 1, 1_000_000),
      // Behind a proxy every connection is the proxy's.
      maxConnectionsPerAddress: r.int('MAX_CONNECTIONS_PER_ADDRESS', trustProxy ? 1_000_000 : DEFAULTS.connectionLimits.maxConnectionsPerAddress, 1, 1_000_000),
    },
    workers: workerCount(r),
    redis: mysql.redis,
  };
  // Each worker is a process with its own memory: salts kept there would let a signed URL through once per worker.
  const workers = config.workers === 1 ? undefined : r.text('WORKERS')?.toLowerCase() === 'auto' ? `WORKERS=auto (${config.workers} cores)` : `WORKERS=${config.workers}`;
  if (workers && !config.databaseUrl && !config.redis) r.problems.push(`${workers} needs the MySQL storage (DATABASE_URL) or Redis (REDIS_URL): with the memory storage alone each worker would keep its own salts, and a signed URL would be accepted once by each worker`);
  r.check();
  return config;
}

/** WORKERS: `auto` (any case) is one per core, else a whole number from 1 to 256. */
function workerCount(r: ReturnType<typeof reader>): number {
  const raw = r.text('WORKERS');
  if (raw === undefined) return 1;
  if (raw.toLowerCase() === 'auto') return availableParallelism();
  if (/^\d+$/.test(raw) && Number(raw) >= 1 && Number(raw) <= 256) return Number(raw);
  r.problems.push(`WORKERS must be auto or a whole number from 1 to 256 (got "${raw}")`);
  return 1;
}

/** PUBLIC_URL: one or more comma-separated http(s) URLs, each checked here so a typo is a configuration error. */
function publicUrls(r: ReturnType<typeof reader>): string[] | undefined {
  const urls = r.text('PUBLIC_URL')?.split(',').map((s) => s.trim()).filter(Boolean);
  for (const url of urls ?? []) {
    try {
      normalisePublicUrl(url);
    } catch (error) {
      r.problems.push(`PUBLIC_URL: ${(error as Error).message}`);
    }
  }
  return urls;
}

/** ALLOWED_HOSTS: comma-separated host names, each checked here; beside PUBLIC_URL it would do nothing, so it is refused. */
function allowedHosts(r: ReturnType<typeof reader>): string[] | undefined {
  const hosts = r.text('ALLOWED_HOSTS')?.split(',').map((s) => s.trim()).filter(Boolean);
  if (hosts === undefined || hosts.length === 0) return undefined;
  if (r.text('PUBLIC_URL') !== undefined) r.problems.push('ALLOWED_HOSTS has no effect with PUBLIC_URL (the Host is then never read): set one or the other');
  for (const host of hosts) {
    try {
      normaliseAllowedHost(host);
    } catch (error) {
      r.problems.push(`ALLOWED_HOSTS: ${(error as Error).message.replace(/^allowedHosts: /, '')}`);
    }
  }
  return hosts;
}
