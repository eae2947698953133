/**
 * The command line's entry point into the Redis throttle's administration
 * (`throttle list|unblock` with REDIS_URL). Apart from src/cli-internal.ts
 * because it loads `ioredis`: only the commands that need Redis import it,
 * so `help` and `check` run without the optional packages installed.
 * Not a package export; only src/cli/ may import it.
 */
export { liftRedisThrottleBlocks, listRedisThrottleBlocks } from './storage/redis/throttle-admin.js';
