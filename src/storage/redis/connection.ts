/**
 * The few things the Redis state needs of a Redis server or cluster
 * (docs/scaling.md), behind an interface of our own so that the scripts and
 * the stores never see the client library. `createRedisConnection` makes one
 * on ioredis, which runs on Node, Bun and Deno.
 *
 * Every call is bounded: nothing queues while the connection is down (a call
 * fails at once, and the caller answers 503), and each command has a
 * timeout. The password of a URL is never part of an error message.
 */
import { createHash } from 'node:crypto';
import { Cluster, Redis, type ClusterNode, type RedisOptions } from 'ioredis';
import { StorageUnavailableError } from '../../errors.js';

/** A Lua script, run by its SHA-1 and loaded by the server the first time. */
export interface RedisScript {
  readonly source: string;
  readonly sha: string;
}

/** What is told about a subscription: messages, and when it (re)starts or breaks. */
export interface RedisSubscriber {
  message(text: string): void;
  /** Subscribed, at first or again after a break: messages sent meanwhile are lost. */
  ready(): void;
  failed(error: unknown): void;
}

/** The server does not hold the script (NOSCRIPT) and `run` was told not to load it: its script cache was emptied. */
export class ScriptNotLoadedError extends Error {
  constructor() {
    super('The Redis server does not hold the script: it restarted, failed over, or flushed its scripts.');
    this.name = 'ScriptNotLoadedError';
  }
}

export interface RedisConnection {
  /**
   * Runs `script` on the node that holds `keys` (all in one hash slot), loading it when the node
   * lacks it; with `ifLoaded`, throws `ScriptNotLoadedError` instead (the salts use it to notice a
   * restart at no cost: a connection that cannot tell must throw it on every NOSCRIPT).
   */
  run(script: RedisScript, keys: readonly string[], args: readonly (string | number)[], options?: { ifLoaded?: boolean }): Promise<unknown>;
  /** The database number (`SELECT`) the connection uses; Pub/Sub ignores it, so channel names carry it. Undefined: 0. */
  readonly database?: number;
  /** `INFO server` from every master of the server or cluster. */
  infoOfEveryMaster(): Promise<string[]>;
  /**
   * `INFO replication` from every master. Optional: with it and `waitForReplicas`, a failover to a
   * replica can be told from a loss (durability.ts); without, every failover counts as a loss.
   */
  replicationOfEveryMaster?(): Promise<string[]>;
  /**
   * `WAIT replicas timeoutMs` on the connection to the node that holds `key`, after the writes sent
   * there: how many replicas acknowledged them. Optional, as `replicationOfEveryMaster`.
   */
  waitForReplicas?(key: string, replicas: number, timeoutMs: number): Promise<number>;
  /** `CONFIG GET parameter` from every master: its values; throws the server's refusal where CONFIG is not allowed. */
  configOfEveryMaster(parameter: string): Promise<string[]>;
  ping(): Promise<void>;
  /**
   * `PUBSUB NUMSUB channel` summed over every master: how many clients listen. Optional (a connection
   * of your own may lack it): the salts use it to tell a Redis that lost its data while instances
   * ran from a new one (salt-script.ts), and without it they rely on the running instances alone.
   */
  subscribersOfEveryMaster?(channel: string): Promise<number>;
  /** Listens to `channel` on a connection of its own, until the returned function is called. */
  subscribe(channel: string, subscriber: RedisSubscriber): () => void;
  /** Closes every connection. */
  close(): Promise<void>;
}

export interface RedisConnectionOptions {
  /** A Redis Cluster: the URLs are seed nodes, and keys go to the node of their hash slot. */
  cluster?: boolean;
  /** ms to connect (default 5000). */
  connectTimeout?: number;
  /** ms a command may take before it fails (default 5000); `merchant-api serve` derives it from STORAGE_TIMEOUT. */
  commandTimeout?: number;
}

export function redisScript(source: string): RedisScript {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * Connects to `urls` (`redis://` or `rediss://`, with user, password and, outside a cluster, a
 * database number). Connecting goes on in the background, and again after every break. Calls made
 * before the first connection wait for it, at most `connectTimeout`; after a break they fail at once.
 */
export function createRedisConnection(urls: string | readonly string[], options: RedisConnectionOptions = {}): RedisConnection {
  const list = typeof urls === 'string' ? [urls] : [...urls];
  if (list.length === 0) throw new TypeError('createRedisConnection needs at least one URL.');
  const parsed = list.map(parseRedisUrl);
  const base: RedisOptions = {
    connectTimeout: options.connectTimeout ?? 5000,
    commandTimeout: options.commandTimeout ?? 5000,
    // Queued commands would wait unbounded while Redis is away; failing at once is a 503 now.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // Each command is written at once, not gathered for the end of the event-loop turn: a failure's
    // script is on its way to Redis (and to the other instances) before the 401 that counted it is sent.
    enableAutoPipelining: false,
    // A reconnection every 2 s at most: never a tight loop against a server that is down.
    retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
    // A master made a replica (a failover behind a name that now points elsewhere) answers READONLY:
    // connect again, without sending the command again (it failed: the request got 503).
    reconnectOnError: (error) => (error.message.startsWith('READONLY') ? 1 : false),
  };
  if (options.cluster) {
    const first = parsed[0]!;
    const cluster = new Cluster(
      parsed.map(({ host, port }): ClusterNode => ({ host, port })),
      {
        enableOfflineQueue: false,
        enableAutoPipelining: false,
        clusterRetryStrategy: (attempt) => Math.min(attempt * 100, 2000),
        slotsRefreshTimeout: base.connectTimeout,
        redisOptions: { ...base, username: first.username, password: first.password, tls: first.tls },
      },
    );
    cluster.on('error', () => undefined);
    const firstReady = new Promise<void>((resolve) => cluster.once('ready', resolve));
    return new IoredisConnection(cluster, firstReady, base.connectTimeout!, () => cluster.nodes('master'), () => cluster.duplicate());
  }
  if (parsed.length > 1) throw new TypeError('Several Redis URLs are seed nodes of a cluster: set cluster (REDIS_CLUSTER=true).');
  const single = parsed[0]!;
  const options_ = { ...base, host: single.host, port: single.port, username: single.username, password: single.password, db: single.db, tls: single.tls };
  const redis = new Redis(options_);
  // Errors reach the callers of each command; the event alone would be an unhandled 'error'.
  redis.on('error', () => undefined);
  const firstReady = new Promise<void>((resolve) => redis.once('ready', resolve));
  // The subscriber subscribes at each 'ready' itself (subscribe() below), so that it knows when it is subscribed again.
  return new IoredisConnection(redis, firstReady, base.connectTimeout!, () => [redis], () => new Redis({ ...options_, autoResubscribe: false }), single.db);
}

/**
 * A connection on an ioredis (or iovalkey, the same API) client or cluster you made yourself, for
 * options of your own (TLS, sentinels, NAT maps). Keep its `enableOfflineQueue: false` and a
 * `commandTimeout`, as `createRedisConnection` sets them: otherwise commands queue while Redis is
 * away. `close()` closes the client too.
 */
export function redisConnectionFromClient(client: Redis | Cluster, options: { connectTimeout?: number } = {}): RedisConnection {
  const ready = client.status === 'ready' ? Promise.resolve() : new Promise<void>((resolve) => client.once('ready', () => resolve()));
  const masters = client instanceof Cluster ? () => client.nodes('master') : () => [client];
  // The subscriber subscribes at each 'ready' itself (subscribe() below), so that it knows when it is subscribed again.
  const duplicate = client instanceof Cluster ? () => client.duplicate() : () => client.duplicate({ autoResubscribe: false });
  return new IoredisConnection(client, ready, options.connectTimeout ?? 5000, masters, duplicate, client instanceof Cluster ? 0 : client.options.db ?? 0);
}

interface ParsedRedisUrl {
  host: string;
  port: number;
  username: string | undefined;
  password: string | undefined;
  db: number;
  tls: object | undefined;
}

/** Reads a `redis://` or `rediss://` URL; the message of a bad one never holds its password. */
export function parseRedisUrl(text: string): ParsedRedisUrl {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new TypeError('A Redis URL must look like redis://[user:password@]host[:port][/db].');
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw new TypeError(`A Redis URL must start with redis:// or rediss:// (got ${url.protocol}//).`);
  const path = url.pathname.replace(/^\//, '');
  if (path !== '' && !/^\d{1,2}$/.test(path)) throw new TypeError('The path of a Redis URL is a database number, 0 to 99.');
  if (url.hostname === '') throw new TypeError('A Redis URL needs a host.');
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? 6379 : Number(url.port),
    username: url.username === '' ? undefined : decodeURIComponent(url.username),
    password: url.password === '' ? undefined : decodeURIComponent(url.password),
    db: path === '' ? 0 : Number(path),
    tls: url.protocol === 'rediss:' ? {} : undefined,
  };
}

type Client = Redis | Cluster;

class IoredisConnection implements RedisConnection {
  readonly #client: Client;
  readonly #masters: () => Redis[];
  readonly #duplicate: () => Client;
  readonly #subscribers = new Set<Client>();
  /** Until the first connection, calls wait for it (at most the connect timeout); after, a break fails them at once. */
  #starting: Promise<void> | undefined;
  readonly database: number;

  constructor(client: Client, firstReady: Promise<void>, connectTimeout: number, masters: () => Redis[], duplicate: () => Client, database = 0) {
    this.#client = client;
    this.database = database;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, connectTimeout);
      (timer as { unref?: () => void }).unref?.();
    });
    this.#starting = Promise.race([firstReady, timeout]).finally(() => {
      clearTimeout(timer);
      this.#starting = undefined;
    });
    this.#masters = masters;
    this.#duplicate = duplicate;
  }

  async run(script: RedisScript, keys: readonly string[], args: readonly (string | number)[], options: { ifLoaded?: boolean } = {}): Promise<unknown> {
    if (this.#starting) await this.#starting;
    try {
      return await this.#client.evalsha(script.sha, keys.length, ...keys, ...args);
    } catch (error) {
      // A server that restarted, or a node new to the cluster, has not seen the script yet.
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      if (options.ifLoaded) throw new ScriptNotLoadedError();
      return this.#client.eval(script.source, keys.length, ...keys, ...args);
    }
  }

  async infoOfEveryMaster(): Promise<string[]> {
    if (this.#starting) await this.#starting;
    const masters = this.#masters();
    if (masters.length === 0) throw new StorageUnavailableError('No Redis cluster master is known yet.');
    return Promise.all(masters.map((node) => node.info('server')));
  }

  async replicationOfEveryMaster(): Promise<string[]> {
    if (this.#starting) await this.#starting;
    const masters = this.#masters();
    if (masters.length === 0) throw new StorageUnavailableError('No Redis cluster master is known yet.');
    return Promise.all(masters.map((node) => node.info('replication')));
  }

  async waitForReplicas(key: string, replicas: number, timeoutMs: number): Promise<number> {
    // A pipeline goes to the node of its keys (on a cluster) over the connection the salt's script took.
    const replies = await this.#client.pipeline().exists(key).wait(replicas, timeoutMs).exec();
    const [error, acknowledged] = replies?.[1] ?? [new Error('WAIT had no answer')];
    if (error) throw error;
    return Number(acknowledged);
  }

  async configOfEveryMaster(parameter: string): Promise<string[]> {
    if (this.#starting) await this.#starting;
    const masters = this.#masters();
    if (masters.length === 0) throw new StorageUnavailableError('No Redis cluster master is known yet.');
    // CONFIG GET answers [name, value] pairs; a missing parameter answers none.
    return Promise.all(masters.map(async (node) => String(((await node.config('GET', parameter)) as unknown as string[])[1] ?? 'unknown')));
  }

  async subscribersOfEveryMaster(channel: string): Promise<number> {
    if (this.#starting) await this.#starting;
    const masters = this.#masters();
    if (masters.length === 0) throw new StorageUnavailableError('No Redis cluster master is known yet.');
    // A subscriber is counted by the node it is connected to alone, so the sum counts each once.
    const counts = await Promise.all(masters.map(async (node) => Number(((await node.pubsub('NUMSUB', channel)) as unknown[])[1] ?? 0)));
    return counts.reduce((sum, count) => sum + count, 0);
  }

  async ping(): Promise<void> {
    if (this.#starting) await this.#starting;
    await this.#client.ping();
  }

  subscribe(channel: string, subscriber: RedisSubscriber): () => void {
    const client = this.#duplicate();
    this.#subscribers.add(client);
    client.on('message', (received: string, text: string) => {
      if (received === channel) subscriber.message(text);
    });
    client.on('error', (error: unknown) => subscriber.failed(error));
    let open = true;
    // Subscribed at every (re)connection, and told only once the server confirms: from then on no message is missed.
    client.on('ready', () => {
      client.subscribe(channel).then(
        () => open && subscriber.ready(),
        (error: unknown) => open && subscriber.failed(error),
      );
    });
    return () => {
      open = false;
      this.#subscribers.delete(client);
      client.disconnect();
    };
  }

  async close(): Promise<void> {
    for (const client of this.#subscribers) client.disconnect();
    this.#subscribers.clear();
    await this.#client.quit().catch(() => this.#client.disconnect());
  }
}
