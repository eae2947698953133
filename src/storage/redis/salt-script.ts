/**
 * Salts on Redis (docs/scaling.md#salts): one script per signature checks
 * the life marker and records the salt with `SET key 1 NX EX`, atomically,
 * so that of two instances given the same signed URL at once exactly one
 * accepts it. The key expires when the salt can no longer be replayed (its
 * ts + tolerance, plus `EXPIRY_MARGIN_SECONDS`): Redis holds the signed rate
 * times the window, and nothing has to prune it.
 *
 * The life marker. Redis may lose what it held: a restart without
 * persistence, or from a snapshot or an append-only file that lacks the last
 * writes, a FLUSHALL, a failover to a replica that had not caught up. Salts
 * lost that way would let their URLs through again. So beside the salts, in
 * the same hash slot, a marker per group (keys.ts) holds since when (Unix
 * seconds) the group's salts are kept, and a signature whose `ts` is older
 * is refused (400, "sign again"), exactly as the memory storage refuses one
 * older than its start; and a boot key holds the `run_id` of the Redis that
 * recorded them, so that a snapshot restored (its markers came back, the
 * salts since it did not) is told from the Redis that wrote them. After a
 * loss the marker lies past every ts an instance may have accepted (below):
 * lost salts therefore never reopen a replay; they cost the re-signing of
 * the requests of the tolerance that follows (docs/scaling.md#the-life-marker).
 *
 * The `#!lua` line (Redis 7) declares the script's flags, none here: so Redis
 * refuses the whole script when it is at its maxmemory, before any write,
 * rather than letting it start and refusing only some of its commands.
 */
import { randomUUID } from 'node:crypto';
import { redisScript, type RedisScript } from './connection.js';

/**
 * Seconds a salt's key outlives its expiry: the expiry is sent as a duration from the handler's
 * clock, so only the time between the handler reading its clock and Redis running the command (and
 * the rounding to whole seconds) must be covered, never a difference of clocks.
 */
export const EXPIRY_MARGIN_SECONDS = 2;

/**
 * The salts' script, one text per instance (`saltScript()`): the comment that ends it is drawn at
 * random, so no other client ever loads it, and a Redis that answers NOSCRIPT to it has lost its
 * script cache since this instance last ran it: it restarted (from a snapshot, an append-only file,
 * or empty), or a replica took over, or SCRIPT FLUSH. The instance then checks every group again
 * (`verify`) before it trusts a salt: detection costs nothing per request.
 *
 * Each group also has a sequence (KEYS: its seq key), raised by one in the script that records a
 * new salt and answered with it: the instance remembers, per group, the highest it saw
 * acknowledged, so that after a restart or a failover a stored sequence lower than that proves a
 * write it acknowledged is missing (docs/scaling.md#a-restart-that-lost-nothing).
 *
 * `verify` (KEYS: the group's life marker, its boot key, its sequence; ARGV: 'verify', now, the
 * future bound (seconds a ts may be ahead), the `run_id` this instance last found for the group, or
 * '', '1' when other instances listen on the presence channel, the marker this instance last found,
 * or '', the highest sequence it saw acknowledged, or '', and the `run_id`s of the masters it found
 * durable, comma-separated, or '' when the Redis answering now is not, and '1' to take the group as
 * lost whatever it holds, since another group showed a loss): the boot key holds the `run_id` of the
 * Redis that recorded the group's salts. Answers {code, since, run_id, sequence}: 0 when the marker
 * is there, the sequence is not below the instance's, and this Redis wrote the salts (or both the
 * Redis the instance knew and this one are durable: then another `run_id` is a restart or a
 * failover that lost nothing); 1 after a loss
 * (the marker missing although this instance knew the group, or other instances run, which wrote
 * every marker before they listened; or recorded by another Redis that is not durable, or this
 * instance knew another Redis, or a first marker other than the one it knew, or the sequence went
 * back), having raised the marker past every ts an instance may have accepted, and the sequence
 * back to what the instance saw; 2 on first contact with an empty group, marked from `now` with
 * three decimals (`%.3f`): a first marker always holds a dot, a marker after a loss never does.
 *
 * `record` (KEYS: the group's life marker, the salt's key, the boot key, the sequence; ARGV:
 * 'record', now, the future bound, seconds the key lives, ts or '', the marker this instance last
 * verified for the group or ''): answers {verdict, since, markerWritten, sequence}: verdict 1 new
 * (sequence: the group's, raised), 0 a replay, -1 ts before the marker (since: the marker). A first
 * marker other than the one this instance verified means the group was empty since (a FLUSHALL,
 * and an instance that did not see this one marked it as new): a loss, so the marker is raised as
 * if it were missing.
 *
 * After a loss the marker is the later of the instance's clock and Redis's `TIME`, plus the future
 * bound, plus one second (never lower than it was): an instance accepts a ts up to its clock plus
 * that bound, so a URL accepted before the loss, even signed ahead of the clock, is never accepted
 * again, and an instance whose clock runs behind cannot write a marker that lets one through.
 */
const SALT_SOURCE = `#!lua
local function runId() return string.match(redis.call('INFO', 'server'), 'run_id:(%w+)') end
local function afterLoss(since)
  local clock = redis.call('TIME')
  local past = math.floor(math.max(tonumber(ARGV[2]), tonumber(clock[1]))) + tonumber(ARGV[3]) + 1
  return string.format('%d', math.max(past, math.ceil(tonumber(since) or 0)))
end
local since = redis.call('GET', KEYS[1])
if ARGV[1] == 'verify' then
  local boot = redis.call('GET', KEYS[2])
  local run = runId()
  local stored = tonumber(redis.call('GET', KEYS[3]) or '0')
  local known = tonumber(ARGV[7]) or 0
  local same = (ARGV[4] == '' or ARGV[4] == run) and (boot == run or not boot)
  local function durableRun(id) return ARGV[8] ~= '' and string.find(','..ARGV[8]..',', ','..id..',', 1, true) ~= nil end
  local durable = durableRun(run) and (ARGV[4] == '' or durableRun(ARGV[4]))
  local emptied = since and ARGV[6] ~= '' and since ~= ARGV[6] and string.find(since, '.', 1, true)
  if since and (same or durable) and not emptied and stored >= known and ARGV[9] ~= '1' then
    if boot ~= run then redis.call('SET', KEYS[2], run) end
    return {0, since, run, stored}
  end
  local code = 2
  if since or ARGV[4] ~= '' or ARGV[5] == '1' then
    since = afterLoss(since)
    code = 1
    if stored < known then
      stored = known
      redis.call('SET', KEYS[3], stored)
    end
  else
    since = string.format('%.3f', tonumber(ARGV[2]))
  end
  redis.call('SET', KEYS[1], since)
  redis.call('SET', KEYS[2], run)
  return {code, since, run, stored}
end
local written = 0
if not since then
  since = afterLoss(nil)
  redis.call('SET', KEYS[1], since)
  redis.call('SET', KEYS[3], runId())
  written = 1
elseif ARGV[6] ~= '' and since ~= ARGV[6] and string.find(since, '.', 1, true) then
  since = afterLoss(since)
  redis.call('SET', KEYS[1], since)
  redis.call('SET', KEYS[3], runId())
  written = 1
end
if ARGV[5] ~= '' and tonumber(ARGV[5]) < tonumber(since) then return {-1, since, written, 0} end
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[4]) then return {1, 0, written, redis.call('INCR', KEYS[4])} end
return {0, 0, written, 0}
`;

/** The salts' script for one instance: the same text with a random comment, loaded by this instance alone. */
export function saltScript(): RedisScript {
  return redisScript(`${SALT_SOURCE}-- instance ${randomUUID()}\n`);
}

/** What `verify` answered: the group's marker, whether it was written now after a loss or on first contact, the server's `run_id` and the group's sequence. */
export interface GroupVerdict {
  kind: 'kept' | 'loss' | 'first';
  since: number;
  /** The marker as Redis holds it, for `record` to tell a first marker written since. */
  marker: string;
  runId: string;
  sequence: number;
}

export function readGroupVerdict(reply: unknown): GroupVerdict {
  const [code, since, runId, sequence] = Array.isArray(reply) ? (reply as unknown[]) : [];
  const kind = code === 0 ? 'kept' : code === 1 ? 'loss' : code === 2 ? 'first' : undefined;
  if (kind === undefined || !Number.isFinite(Number(since)) || typeof runId !== 'string' || !Number.isFinite(Number(sequence))) throw new TypeError('The Redis salt script answered something unexpected.');
  return { kind, since: Number(since), marker: String(since), runId, sequence: Number(sequence) };
}

/** What the script answered, read; `markerWritten`: the group's marker was missing; `sequence`: the group's after a new salt. */
export type SaltVerdict = ({ kind: 'new'; sequence: number } | { kind: 'replay' } | { kind: 'before-marker'; since: number }) & { markerWritten: boolean };

export function readSaltVerdict(reply: unknown): SaltVerdict {
  const [code, value, written, sequence] = Array.isArray(reply) ? (reply as unknown[]).map(Number) : [Number.NaN];
  const markerWritten = written === 1;
  if (code === 1 && Number.isFinite(sequence)) return { kind: 'new', sequence: sequence!, markerWritten };
  if (code === 0) return { kind: 'replay', markerWritten };
  if (code === -1 && Number.isFinite(value)) return { kind: 'before-marker', since: value!, markerWritten };
  throw new TypeError('The Redis salt script answered something unexpected.');
}
