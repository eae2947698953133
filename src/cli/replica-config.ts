/**
 * The read-replica variables of `merchant-api serve` (docs/mysql.md#read-replicas):
 * DATABASE_READ_URL sends user reads to a MySQL replica while it is at most
 * DATABASE_READ_MAX_LAG seconds behind; merchants, keys and every write stay
 * on DATABASE_URL.
 */
import { DEFAULT_MAX_LAG_SECONDS, parseMysqlUrl } from '../storage/mysql/index.js';
import type { SettingsReader } from './redis-config.js';

export interface ReplicaConfig {
  /** DATABASE_READ_URL. */
  url: string;
  /** DATABASE_READ_MAX_LAG, seconds. */
  maxLagSeconds: number;
}

/** The replica settings, or undefined without DATABASE_READ_URL; a bad URL is a problem that never shows its password. */
export function replicaSettings(r: SettingsReader): ReplicaConfig | undefined {
  const url = r.text('DATABASE_READ_URL');
  const maxLagSeconds = r.int('DATABASE_READ_MAX_LAG', DEFAULT_MAX_LAG_SECONDS, 0, 86_400);
  if (url === undefined) return undefined;
  if (r.text('DATABASE_URL') === undefined) r.problems.push('DATABASE_READ_URL needs DATABASE_URL, the primary every write goes to');
  try {
    parseMysqlUrl(url);
  } catch (error) {
    r.problems.push(`DATABASE_READ_URL: ${(error as Error).message.replace(/^DATABASE_URL/, 'it').replace(/\.$/, '')}`);
  }
  return { url, maxLagSeconds };
}
