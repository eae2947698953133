/**
 * Salts on Redis (docs/scaling.md#salts): one script per signature checks
 * the life marker and records the salt with `SET key 1 NX EX`, atomically,
 * so that of two instances given the same signed URL at once exactly one
 * accepts it. The key expires when the salt can no longer be replayed (its
 * ts + tolerance, plus `EXPIRY_MARGIN_SECONDS`): Redis holds the signed rate
 * times the window, and nothing has to prune it.
 *
 * The life marker. Redis may lose what it held: a restart without
 * persistence, a FLUSHALL, a failover to a replica that had not caught up.
 * Salts lost that way would let their URLs through again. So beside the
 * salts, in the same hash slot, a marker per group (keys.ts) holds since
 * when (Unix seconds, the handler's clock) the group's salts are kept, and a
 * signature whose `ts` is older is refused (400, "sign again"), exactly as
 * the memory storage refuses one older than its start. Every marker is
 * written (`SET NX`) when an instance first talks to Redis, so a missing
 * marker later means Redis lost it, with the salts beside it: the script
 * writes it anew, one second after the current time (salts of this very
 * second may be among the lost), and says so, and the instance writes every
 * other missing marker the same way. Lost salts therefore never reopen
 * a replay; they cost one re-signing of the requests signed before the loss.
 * A marker that changed (another instance rewrote it first) refuses the same
 * way, since the script compares `ts` with whatever marker is there.
 *
 * The `#!lua` line (Redis 7) declares the script's flags, none here: so Redis
 * refuses the whole script when it is at its maxmemory, before any write,
 * rather than letting it start and refusing only some of its commands.
 */
import { redisScript } from './connection.js';

/**
 * Seconds a salt's key outlives its expiry: the expiry is sent as a duration from the handler's
 * clock, so only the time between the handler reading its clock and Redis running the command (and
 * the rounding to whole seconds) must be covered, never a difference of clocks.
 */
export const EXPIRY_MARGIN_SECONDS = 2;

/** KEYS: a life marker. ARGV: now. Writes the marker unless it exists. */
export const MARK_LIFE = redisScript(`#!lua
return redis.call('SET', KEYS[1], ARGV[1], 'NX') and 1 or 0
`);

/**
 * KEYS: the group's life marker, the salt's key. ARGV: now, seconds the key lives, ts ('' when
 * unknown). Answers {verdict, since, markerWritten}: verdict 1 new, 0 a replay, -1 ts before the
 * marker (since: the marker).
 */
export const RECORD_SALT = redisScript(`#!lua
local since = tonumber(redis.call('GET', KEYS[1]))
local written = 0
if not since then
  since = tonumber(ARGV[1]) + 1
  redis.call('SET', KEYS[1], since)
  written = 1
end
if ARGV[3] ~= '' and tonumber(ARGV[3]) < since then return {-1, since, written} end
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[2]) then return {1, 0, written} end
return {0, 0, written}
`);

/** What the script answered, read; `markerWritten`: the group's marker was missing. */
export type SaltVerdict = ({ kind: 'new' } | { kind: 'replay' } | { kind: 'before-marker'; since: number }) & { markerWritten: boolean };

export function readSaltVerdict(reply: unknown): SaltVerdict {
  const [code, value, written] = Array.isArray(reply) ? (reply as unknown[]).map(Number) : [Number.NaN];
  const markerWritten = written === 1;
  if (code === 1) return { kind: 'new', markerWritten };
  if (code === 0) return { kind: 'replay', markerWritten };
  if (code === -1 && Number.isFinite(value)) return { kind: 'before-marker', since: value!, markerWritten };
  throw new TypeError('The Redis salt script answered something unexpected.');
}
