/**
 * The Redis variables of `merchant-api serve` (docs/configuration.md,
 * docs/scaling.md): REDIS_URL puts the salts and the throttle's counters on
 * Redis, in front of the memory or the MySQL storage, so that WORKERS above 1
 * and several instances work on the memory storage too.
 */
import { DEFAULT_PREFIX } from '../cli-internal.js';
import { parseRedisUrl } from '../storage/redis/index.js';

export interface RedisConfig {
  /** REDIS_URL: one URL, or with REDIS_CLUSTER the cluster's seed nodes, comma-separated. */
  urls: string[];
  /** REDIS_CLUSTER: a Redis Cluster. */
  cluster: boolean;
  /** REDIS_PREFIX: of every key and of the channel. */
  prefix: string;
  /** REDIS_ASSUME_NOEVICTION: the operator checked maxmemory-policy where CONFIG is refused. */
  assumeNoEviction: boolean;
}

/** What config.ts's reader offers: reading a variable, and collecting problems. */
export interface SettingsReader {
  problems: string[];
  text(name: string): string | undefined;
  int(name: string, fallback: number, min: number, max: number): number;
  bool(name: string, fallback: boolean): boolean;
}

/** The Redis settings, or undefined without REDIS_URL; bad values become problems, never the URL's password. */
export function redisSettings(r: SettingsReader): RedisConfig | undefined {
  const raw = r.text('REDIS_URL');
  const cluster = r.bool('REDIS_CLUSTER', false);
  const prefix = r.text('REDIS_PREFIX') ?? DEFAULT_PREFIX;
  const assumeNoEviction = r.bool('REDIS_ASSUME_NOEVICTION', false);
  if (/[{}]/.test(prefix)) r.problems.push('REDIS_PREFIX must not contain { or } (they would change the hash tags)');
  if (prefix.length > 64) r.problems.push('REDIS_PREFIX must be at most 64 characters (it is part of every salt\'s key)');
  if (raw === undefined) {
    if (cluster) r.problems.push('REDIS_CLUSTER needs REDIS_URL');
    return undefined;
  }
  const urls = raw.split(',').map((url) => url.trim()).filter(Boolean);
  for (const url of urls) {
    try {
      const { db } = parseRedisUrl(url);
      if (cluster && db !== 0) r.problems.push('REDIS_URL: a Redis Cluster has only database 0');
    } catch (error) {
      r.problems.push(`REDIS_URL: ${(error as Error).message.replace(/\.$/, '')}`);
    }
  }
  if (urls.length > 1 && !cluster) r.problems.push('REDIS_URL has several URLs, which only a cluster takes: set REDIS_CLUSTER=true');
  return { urls, cluster, prefix, assumeNoEviction };
}
