/**
 * `merchant-api throttle list|unblock`: the failed-authentication throttle's blocks where the
 * servers share them (docs/security.md#lifting-a-block): on Redis with REDIS_URL (where `serve`
 * keeps them then), on MySQL with DATABASE_URL, on both when both are set (blocks counted before
 * Redis was added stay in MySQL); each line says which store. On MySQL `unblock` marks the rows
 * lifted, and every server reads the change within its poll interval (a second by default); on
 * Redis it publishes the lift, and every server drops the block at once, whichever made it.
 */
import { StorageUnavailableError } from '../../index.js';
import { isIP } from 'node:net';
import { ACTOR_OPTION, actorOf } from './actor.js';
import { liftThrottleBlocks, writeAuditEvent, listThrottleBlocks, type ThrottleBlock } from '../../storage/mysql/index.js';
import { createRedisConnection } from '../../storage/redis/index.js';
import { addressKey, formatEpochSeconds, isShareableAddress, merchantIdProblem } from '../../cli-internal.js';
import { liftRedisThrottleBlocks, listRedisThrottleBlocks } from '../../cli-internal-redis.js';
import type { CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';
import type { MysqlConfig } from '../config.js';
import { logAdminChange } from './admin-log.js';
import { runMysqlCommand, withDatabase } from './mysql-env.js';
import { commandGroup, parseCommandArgs } from './parse-args.js';

const USAGE = `Usage: merchant-api throttle <subcommand>   (the shared throttle: Redis with REDIS_URL, MySQL with DATABASE_URL, or both)
  list [--json]                         blocks in force: address, merchant, until when
  unblock --address A [--merchant ID]   lift the blocks of address A (its own and every merchant's from it),
                                        or with --merchant only that merchant's from A; every server within a second`;

/** An IP address, or an address with a prefix length (the IPv6 networks `throttle list` shows). */
function isAddressOrNetwork(text: string): boolean {
  const slash = text.indexOf('/');
  if (slash === -1) return isIP(text) !== 0;
  const family = isIP(text.slice(0, slash));
  const prefix = text.slice(slash + 1);
  return family !== 0 && /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

/** One place the servers keep blocks: what `list` and `unblock` do there. */
interface BlockStore {
  /** How the output names it. */
  name: string;
  /** How soon every server drops a lifted block. */
  spreads: string;
  list(now: number): Promise<ThrottleBlock[]>;
  lift(address: string, merchantId: string | undefined): Promise<number>;
}

/** The stores configured: Redis with REDIS_URL, MySQL with DATABASE_URL; `work` runs on each in turn, each closed after. */
async function withStores<T>(config: MysqlConfig, work: (store: BlockStore) => Promise<T>, actor = 'unknown'): Promise<T[]> {
  const results: T[] = [];
  const redis = config.redis;
  if (redis !== undefined) {
    const connection = createRedisConnection(redis.urls, { cluster: redis.cluster, connectTimeout: config.storageTimeout, commandTimeout: config.storageTimeout });
    try {
      results.push(
        await work({
          name: 'Redis (REDIS_URL)',
          spreads: 'at once',
          list: (now) => listRedisThrottleBlocks(connection, redis.prefix, now, LIST_LIMIT),
          lift: (address, merchantId) => liftRedisThrottleBlocks(connection, redis.prefix, address, merchantId),
        }).catch((error: unknown) => {
          // A Redis failure reads as the storage's: one line, never the URL's password.
          throw error instanceof StorageUnavailableError ? error : new StorageUnavailableError(`Redis did not answer: ${(error as Error).message}`);
        }),
      );
    } finally {
      await connection.close().catch(() => undefined);
    }
  }
  if (config.databaseUrl !== undefined || redis === undefined) {
    results.push(
      await withDatabase(config, (db) =>
        work({
          name: 'MySQL (DATABASE_URL)',
          spreads: 'within about a second',
          list: (now) => listThrottleBlocks(db, now, LIST_LIMIT),
          // The lift and its audit record in one transaction (a Redis lift has no database to record in: its log event stays).
          lift: (address, merchantId) =>
            db.transaction().execute(async (trx) => {
              const changed = await liftThrottleBlocks(trx, address, merchantId);
              if (changed > 0) await writeAuditEvent(trx, actor, { action: 'throttle_unblocked', merchantId: merchantId ?? null, summary: { client_address: address, rows: changed } });
              return changed;
            }),
        }),
      ),
    );
  }
  return results;
}

/** Most blocks `list` shows. */
const LIST_LIMIT = 1000;

/**
 * The throttle's key of a client address, as the servers store it in `auth_failures.address`:
 * the servers' own rule (an IPv6 address counts per IPV6_PREFIX network), so that an operator
 * types the address a log line shows, or the network a `throttle list` shows, and `unblock`
 * finds the row.
 */
export function throttleKeyOfAddress(address: string, ipv6Prefix: number): string {
  return addressKey(address, ipv6Prefix);
}

/** The `throttle` command. */
export const throttleCommand = commandGroup('throttle', USAGE, { list, unblock });

async function list(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parseCommandArgs(args, { json: { type: 'boolean' } }, USAGE);
  if (parsed === 'help') return help(io);
  if (parsed.positionals.length > 0) throw new CliUsageError(`throttle list takes no arguments.\n${USAGE}`);
  return runMysqlCommand(io, 'throttle list', async () => {
    const now = Math.floor(Date.now() / 1000);
    const both = config.redis !== undefined && config.databaseUrl !== undefined;
    // Without REDIS_URL the output is MySQL's alone, as it always was; with it, each block names its store.
    const named = config.redis !== undefined;
    const found = await withStores(config, async (store) => ({ store, blocks: await store.list(now) }));
    const blocks = found.flatMap(({ store, blocks }) => blocks.map((b) => ({ ...b, store: store.name })));
    if (parsed.values.json) {
      io.out(JSON.stringify(blocks.map(({ store, ...b }) => ({ ...b, ...(named ? { store } : {}), blocked_until: formatEpochSeconds(b.blocked_until), seconds_left: b.blocked_until - now }))));
      return 0;
    }
    if (blocks.length === 0) {
      io.out(named ? `No blocks in force in ${found.map(({ store }) => store.name).join(' nor in ')}.` : 'No blocks in force.');
      return 0;
    }
    const header = ['ADDRESS', 'MERCHANT', 'BLOCKED UNTIL (UTC)', 'SECONDS LEFT', 'BLOCKS', ...(named ? ['STORE'] : [])];
    const rows = [header, ...blocks.map((b) => [b.address, b.merchant_id ?? '(every merchant)', formatEpochSeconds(b.blocked_until), String(b.blocked_until - now), b.scope === 'pair' ? String(b.blocks) : '-', ...(named ? [b.store] : [])])];
    const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
    for (const row of rows) io.out(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd());
    for (const { store, blocks: some } of found) if (some.length === LIST_LIMIT) io.out(`(the ${LIST_LIMIT} longest blocks${both ? ` of ${store.name}` : ''}; there may be more)`);
    return 0;
  });
}

async function unblock(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parseCommandArgs(args, { address: { type: 'string' }, merchant: { type: 'string' }, ...ACTOR_OPTION }, USAGE);
  if (parsed === 'help') return help(io);
  const address = parsed.values.address as string | undefined;
  const merchantId = parsed.values.merchant as string | undefined;
  if (address === undefined || parsed.positionals.length > 0) throw new CliUsageError(`Give the client address: throttle unblock --address A [--merchant ID].\n${USAGE}`);
  if (!isAddressOrNetwork(address.trim())) throw new CliUsageError(`--address must be an IPv4 or IPv6 address as the access log shows it, or a network as \`throttle list\` shows it (2001:db8:1:2::/64).\n${USAGE}`);
  const key = throttleKeyOfAddress(address.trim(), config.ipv6Prefix);
  if (!isShareableAddress(key)) throw new CliUsageError(`--address must be a client address as the access log shows it (printable ASCII, at most 64 characters).`);
  if (merchantId !== undefined && merchantIdProblem(merchantId) !== undefined) throw new CliUsageError(`--merchant: ${merchantIdProblem(merchantId)}.`);
  const who = merchantId === undefined ? `address ${key} (and every merchant from it)` : `merchant "${merchantId}" from address ${key}`;
  const named = config.redis !== undefined;
  return runMysqlCommand(io, 'throttle unblock', async () => {
    const lifted = await withStores(config, async (store) => ({ store, changed: await store.lift(key, merchantId) }), actorOf(parsed.values, io));
    for (const { store, changed } of lifted) {
      const where = named ? ` in ${store.name}` : '';
      if (changed === 0) {
        io.out(`Nothing to lift${where}: no failures are counted for ${who}.`);
        continue;
      }
      logAdminChange(io, 'throttle_unblocked', { client_address: key, merchant_id: merchantId ?? null, rows: changed, ...(named ? { store: store.name } : {}) }, 'throttle block lifted');
      io.out(`Lifted the block of ${who}${where}, and its count starts again; every server drops it ${store.spreads}.`);
    }
    return 0;
  });
}

function help(io: CliIo): number {
  io.out(USAGE);
  return 0;
}
