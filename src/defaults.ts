/**
 * Every default of the library and the standalone server, in one table:
 * `createMerchantApi`, the storages, the limits, the adapters' `serve` and
 * the CLI's configuration all read their defaults here, so a default is typed once
 * (docs/configuration.md lists them).
 */
export const DEFAULTS = {
  /** Seconds `ts` may be away from the server's time, either way. */
  timestampTolerance: 300,
  /** Milliseconds before a storage call is a 503. */
  storageTimeout: 5000,
  /** Users per storage read while streaming the whole list. */
  streamBatchSize: 1000,
  /** Listings one merchant may run at once. */
  merchantConcurrency: 4,
  /** The failed-authentication throttle (docs/security.md#throttling). */
  throttle: {
    pairFailures: 10,
    pairBlockSeconds: 300,
    pairMaxBlockSeconds: 3600,
    addressFailures: 100,
    addressWindowSeconds: 3600,
    addressBlockSeconds: 3600,
    maxEntries: 100_000,
  },
  /** IPv6 clients count as one per network of this prefix length in every per-address limit (docs/security.md#ipv6-clients). */
  ipv6Prefix: 64,
  /** Late refusals of connections that ignore Retry-After. */
  tarpit: { maxDelayMs: 5000, maxEntries: 100_000 },
  /** Fair sharing: the process CPU, in percent of a core, from which the instance counts as busy. */
  fairShareBusyPercent: 50,
  /** The memory storage's replay store: most salts held. */
  maxSalts: 1_000_000,
  /** The MySQL storage: seconds a revoked key may keep working per instance. */
  keyCacheTtlSeconds: 10,
  /**
   * The MySQL storage's background prune of expired salts: how often a salt write may start one
   * (ms), rows per DELETE and DELETEs per run.
   */
  saltPrune: { intervalMs: 1000, batchSize: 5000, maxBatches: 20 },
  /** Reads on a MySQL replica: most seconds it may be behind, and how often its lag is read (ms). */
  replicaReads: { maxLagSeconds: 5, checkIntervalMs: 1000 },
  /** The standalone server's port, and every adapter's `serve`. */
  port: 8787,
  /** The interface `serve` and the standalone server listen on: this machine only, until told otherwise. */
  hostname: '127.0.0.1',
  /** Milliseconds in-flight requests may take on `close()` (SIGTERM) before their connections are cut. */
  shutdownTimeoutMs: 8000,
  /** The runtime adapters' connection limits (docs/runtimes.md#connection-limits): milliseconds, and connections. */
  connectionLimits: { headersTimeout: 10_000, requestTimeout: 30_000, keepAliveTimeout: 5_000, maxConnections: 10_000, maxConnectionsPerAddress: 256 },
  /** Webhooks (docs/webhooks.md): attempts, retention, bounds. */
  webhooks: {
    /** Delays before each retry, in ms (Standard Webhooks: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h); the first attempt is immediate. */
    retryScheduleMs: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, 72_000_000, 86_400_000],
    /** Milliseconds one attempt may take, resolving the name to the last byte read (`WEBHOOK_TIMEOUT`). */
    timeoutMs: 15_000,
    /** Bytes of a receiver's answer read, and kept with the delivery. */
    responseReadBytes: 1024,
    responseKeptBytes: 256,
    /** Longest `Retry-After` honoured on 429/503, in ms. */
    maxRetryAfterMs: 3_600_000,
    /** An endpoint whose every attempt failed for this long is disabled (ms: 5 days). */
    disableAfterFailingMs: 432_000_000,
    /** Deliveries and events are pruned this long after they were created (ms: 7 days). */
    retentionMs: 604_800_000,
    /** Endpoints one merchant may have. */
    maxEndpointsPerMerchant: 10,
    /** Attempts in flight to one endpoint at once: a slow receiver holds only its own. */
    maxInFlightPerEndpoint: 4,
    /** Deliveries one dispatcher claims per round, and how long its claim holds (ms) before another instance may take them. */
    claimBatch: 100,
    leaseMs: 60_000,
    /** Milliseconds between rounds of an idle dispatcher. */
    pollIntervalMs: 1000,
  },
} as const;
