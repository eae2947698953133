/**
 * `serve` with REDIS_URL: the opened storage wrapped so that its salts and
 * throttle counters live on Redis (docs/scaling.md). A Redis that answers
 * but could evict salts (`maxmemory-policy` other than noeviction, or CONFIG
 * refused without REDIS_ASSUME_NOEVICTION=true) stops the start with exit 2:
 * an evicted salt is a replay accepted. A Redis that does not answer yet does
 * not stop it, as MySQL does not: signed requests get 503 until it answers
 * (and its policy is read then), and one warning says why.
 */
import type { Logger, Storage } from '../index.js';
import { createRedisConnection, RedisSetupError, withRedisState } from '../storage/redis/index.js';
import type { RedisConfig } from './redis-config.js';
import { CliUsageError } from './usage-error.js';

export interface OpenedStorage {
  storage: Storage;
  description: string;
  demo: boolean;
}

/**
 * The Redis client's own command timeout, from STORAGE_TIMEOUT: half of it, so that a hung Redis
 * fails the command (and frees what it holds) before the storage call's deadline answers 503.
 */
export function redisCommandTimeout(storageTimeout: number): number {
  return Math.max(1, Math.floor(storageTimeout / 2));
}

export async function withRedisConfig(opened: OpenedStorage, redis: RedisConfig | undefined, storageTimeout: number, logger: Logger, timestampTolerance?: number, timestampFutureTolerance?: number): Promise<OpenedStorage> {
  if (redis === undefined) return opened;
  const connection = createRedisConnection(redis.urls, { cluster: redis.cluster, connectTimeout: storageTimeout, commandTimeout: redisCommandTimeout(storageTimeout) });
  const storage = withRedisState(opened.storage, connection, { prefix: redis.prefix, assumeNoEviction: redis.assumeNoEviction, closeConnection: true, timestampTolerance, timestampFutureTolerance });
  try {
    await storage.redisReady();
  } catch (error) {
    if (error instanceof RedisSetupError) {
      await storage.close().catch(() => undefined);
      throw new CliUsageError(`Refusing to start: ${error.message.replace(/^Salts are not recorded on Redis: /, 'REDIS_URL: ')}`);
    }
    logger.warn({ event: 'redis_not_ready', message: error instanceof Error ? error.message : String(error) }, 'signed requests get 503 until Redis answers and may hold salts');
  }
  return { ...opened, storage, description: `${opened.description}; salts and throttle on Redis${redis.cluster ? ' Cluster' : ''}` };
}
