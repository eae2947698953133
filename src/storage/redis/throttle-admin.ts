/**
 * `merchant-api throttle list|unblock` on Redis (docs/security.md#lifting-a-block): the blocks
 * in force as the blocks index holds them, and lifting them where the servers read them. A lift
 * rewrites the counters (count and doubling start again, no block) with a new version and
 * publishes them as `lifted` on the throttle channel: every server subscribed drops the block at
 * once, even one it counted itself (src/limits/throttle.ts `learn`). The lifted blocks leave the
 * index, so an instance that starts later does not take them back.
 */
import type { ThrottleRecord } from '../throttle-store.js';
import type { RedisConnection } from './connection.js';
import { RedisKeys } from './keys.js';
import { READ_BLOCKS, redisLiftScripts } from './throttle-scripts.js';
import { MAX_INDEXED_BLOCKS, parseIndexedBlock } from './throttle-store.js';

/** A block as `throttle list` shows it (the same shape as MySQL's). */
export interface RedisThrottleBlock {
  scope: 'address' | 'pair';
  address: string;
  merchant_id: string | null;
  /** Unix seconds (the servers' clock). */
  blocked_until: number;
  blocks: number;
}

/** The blocks in force at `now` (Unix seconds), the longest first, at most `limit`. */
export async function listRedisThrottleBlocks(connection: RedisConnection, prefix: string, now: number, limit: number): Promise<RedisThrottleBlock[]> {
  const records = await indexed(connection, new RedisKeys(prefix), now, limit);
  return records.map((r) => ({ scope: r.scope, address: r.address, merchant_id: r.merchantId ?? null, blocked_until: r.blockedUntil, blocks: r.blocks }));
}

/**
 * Lifts the blocks of an address: its own and every pair of it the index holds, or with
 * `merchantId` that pair only. Resolves to the counters changed (0: nothing counted there).
 */
export async function liftRedisThrottleBlocks(connection: RedisConnection, prefix: string, address: string, merchantId: string | undefined): Promise<number> {
  const keys = new RedisKeys(prefix);
  const now = Math.floor(Date.now() / 1000);
  const inIndex = (await indexed(connection, keys, now, MAX_INDEXED_BLOCKS, true)).filter((r) => r.address === address && (merchantId === undefined || r.merchantId === merchantId));
  const merchants = merchantId !== undefined ? [merchantId] : [...new Set(inIndex.flatMap((r) => (r.merchantId === undefined ? [] : [r.merchantId])))];
  const counters = [...(merchantId === undefined ? [keys.addressCounter(address)] : []), ...merchants.map((m) => keys.pairCounter(address, m))];
  const { LIFT, UNINDEX } = redisLiftScripts;
  const changed = Number(await connection.run(LIFT, counters, [keys.throttleChannel, 'merchant-api throttle unblock', address, merchantId === undefined ? 1 : 0, ...merchants]));
  const members = inIndex.map((r) => r.member);
  if (members.length > 0) await connection.run(UNINDEX, [keys.blocks], members);
  return changed;
}

/** The index's blocks in force (`all`: ended or not), each with its member text. */
async function indexed(connection: RedisConnection, keys: RedisKeys, now: number, limit: number, all = false): Promise<(ThrottleRecord & { member: string })[]> {
  const reply = await connection.run(READ_BLOCKS, [keys.blocks], [all ? 0 : now, limit]);
  return (Array.isArray(reply) ? reply : []).flatMap((member) => {
    const record = typeof member === 'string' ? parseIndexedBlock(member) : undefined;
    return record ? [{ ...record, member: member as string }] : [];
  });
}
