/**
 * `merchant-api/storage/redis`: salts and the failed-authentication throttle
 * on Redis, in front of any storage (docs/scaling.md), so that several
 * instances or workers share them: a signed URL is accepted once in all, and
 * a block made on one instance applies on every one at once.
 *
 * @example
 * import { createRedisConnection, withRedisState } from 'merchant-api/storage/redis';
 * const redis = createRedisConnection(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
 * const storage = withRedisState(createMemoryStorage({ seed }), redis, { closeConnection: true });
 */
export { createRedisConnection, parseRedisUrl, redisConnectionFromClient, ScriptNotLoadedError } from './connection.js';
export type { RedisConnection, RedisConnectionOptions, RedisScript, RedisSubscriber } from './connection.js';
export { withRedisState } from './redis-state.js';
export type { RedisHealth, RedisStateOptions, RedisStateStorage } from './redis-state.js';
export { RedisSetupError } from './eviction-policy.js';
/** For `createMetrics({ throttleFull })`: failures a full census could not count in Redis (docs/scaling.md#the-throttles-keys). */
export { throttleFullCount } from '../throttle-store.js';
