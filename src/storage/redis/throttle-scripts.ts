/**
 * The throttle's counters on Redis (docs/security.md#sharing-the-counters-on-redis):
 * the rules of src/limits/throttle.ts in Lua, one script per change, so that
 * two instances counting at once never lose a count (a script runs alone).
 * An address's counter and its pairs' share a hash tag, so one script
 * changes both on a Redis Cluster too. Each script publishes the records it
 * changed, as JSON, on the throttle channel, and answers the same text: every
 * other instance learns a block as soon as it is made.
 *
 * A record's version is the server's clock in microseconds, zero-padded to
 * 20 digits so that text order is time order, and at least one past the
 * record's previous version: of two copies, the greater version is the newer.
 * The `#!lua` line (Redis 7) makes a full Redis refuse a script whole.
 */
import { redisScript } from './connection.js';

/** A pair's count and doubling are forgotten a day after its last failure, as on MySQL. */
export const PAIR_MEMORY_SECONDS = 86_400;
/** A reset pair stays this long at least, so that an instance starting reads it. */
export const RESET_VISIBLE_SECONDS = 60;

const VERSION = `
local function nextVersion(key)
  local t = redis.call('TIME')
  local micros = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local previous = tonumber(redis.call('HGET', key, 'version') or '0')
  if previous >= micros then micros = previous + 1 end
  return string.format('%020d', micros)
end
local function recordOf(scope, address, merchant, failures, windowStart, blocks, blockedUntil, version)
  return { scope = scope, address = address, merchantId = merchant, failures = failures, windowStart = windowStart,
    blocks = blocks, blockedUntil = blockedUntil, version = version }
end
`;

/**
 * Key checks reserved before their keys are compared (docs/security.md#ten-checks-even-all-at-once)
 * live in the address's hash, per instance (its origin, a UUID of 36 characters): `a|<origin>`
 * checks of the address, `p|<origin>|<merchant>` of a claimed merchant, and `u|<origin>` the Unix
 * second they end unless renewed, so an instance that died holds nothing for long. Their number
 * in a hash is bounded by the address's limit (a reservation beyond it is refused).
 */
const RESERVATIONS = `
local function giveBack(key, field, n)
  if n <= 0 then return end
  if redis.call('HINCRBY', key, field, -n) <= 0 then redis.call('HDEL', key, field) end
end
-- A hash that held only this instance's reservations (no count: its address is new, or the census
-- refused it) goes with the last of them, so checks in flight are all such hashes cost.
local function dropIfIdle(key, origin)
  if redis.call('HLEN', key) == 1 and redis.call('HEXISTS', key, 'u|' .. origin) == 1 then redis.call('DEL', key) end
end
`;

/**
 * KEYS: the address counter, and the pair counter when the merchant exists.
 * ARGV: now, pairFailures, pairBlockSeconds, pairMaxBlockSeconds, addressFailures,
 * addressWindowSeconds, addressBlockSeconds, channel, origin, address, merchantId ('' for none),
 * then the reservation this failure's check held, given back in the same change: checks of the
 * address (0 or 1), of the pair (0 or 1), and the merchant as claimed; then for the census
 * (docs/scaling.md#the-throttles-keys) the longest the address's key and a pair's key live after
 * a write (seconds).
 *
 * The failure is counted at once, as it always was (the next reservation must see it). The
 * answer also says which counter the census must admit (`admit`: 1 for the address, for the
 * pair): one new, or whose admission ends within the key's longest life. The caller then asks
 * ADMIT and settles each with SETTLE_ADMISSION: a counter the census refused goes.
 */
export const RECORD_FAILURE = redisScript(`#!lua
${VERSION}
${RESERVATIONS}
local now = tonumber(ARGV[1])
local function needsAdmission(key, horizon)
  return tonumber(redis.call('HGET', key, 'admitted') or '0') < now + tonumber(horizon or '0')
end
local admit = { needsAdmission(KEYS[1], ARGV[15]) and 1 or 0, (KEYS[2] and needsAdmission(KEYS[2], ARGV[16])) and 1 or 0 }
giveBack(KEYS[1], 'a|' .. ARGV[9], tonumber(ARGV[12] or '0'))
if (ARGV[14] or '') ~= '' then giveBack(KEYS[1], 'p|' .. ARGV[9] .. '|' .. ARGV[14], tonumber(ARGV[13] or '0')) end
local pairFailures, pairBlock, pairMaxBlock = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local addressFailures, addressWindow, addressBlock = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local records = {}

local a = redis.call('HMGET', KEYS[1], 'failures', 'windowStart', 'blockedUntil')
local failures, windowStart, blockedUntil = tonumber(a[1] or '0'), tonumber(a[2] or '0'), tonumber(a[3] or '0')
local count = failures + 1
if not a[1] or now - windowStart >= addressWindow then
  count = 1
  windowStart = now
end
if count >= addressFailures then
  blockedUntil = now + addressBlock
  failures = 0
  windowStart = now
else
  failures = count
end
local version = nextVersion(KEYS[1])
redis.call('HSET', KEYS[1], 'failures', failures, 'windowStart', windowStart, 'blockedUntil', blockedUntil, 'version', version)
redis.call('EXPIRE', KEYS[1], math.max(blockedUntil, windowStart + addressWindow) - now + 1)
records[1] = recordOf('address', ARGV[10], '', failures, windowStart, 0, blockedUntil, version)

if KEYS[2] then
  local p = redis.call('HMGET', KEYS[2], 'failures', 'blocks', 'blockedUntil')
  local pf, blocks, until_ = tonumber(p[1] or '0') + 1, tonumber(p[2] or '0'), tonumber(p[3] or '0')
  if pf >= pairFailures then
    until_ = now + math.min(pairMaxBlock, pairBlock * math.pow(2, blocks))
    blocks = math.min(blocks + 1, 32)
    pf = 0
  end
  local pv = nextVersion(KEYS[2])
  redis.call('HSET', KEYS[2], 'failures', pf, 'blocks', blocks, 'blockedUntil', until_, 'version', pv)
  redis.call('EXPIRE', KEYS[2], math.max(until_ - now, ${PAIR_MEMORY_SECONDS}))
  records[2] = recordOf('pair', ARGV[10], ARGV[11], pf, 0, blocks, until_, pv)
end

local text = cjson.encode({ origin = ARGV[9], records = records })
redis.call('PUBLISH', ARGV[8], text)
if admit[1] == 0 and admit[2] == 0 then return text end
return cjson.encode({ origin = ARGV[9], records = records, admit = admit })
`);

/**
 * The census's answer, settled on the counters (docs/scaling.md#the-throttles-keys). KEYS: the
 * address counter, and the pair counter when the census was asked about it. ARGV: for each key,
 * '' (not asked), 0 (refused) or the second it is admitted until. An admitted key that exists
 * records its admission; a refused key that holds no admission goes (its failures are counted
 * by each instance alone), reservations of checks in flight with it: they are given back into
 * nothing, which is all a refused address's reservations are worth.
 */
export const SETTLE_ADMISSION = redisScript(`#!lua
for i, key in ipairs(KEYS) do
  local answer = ARGV[i] or ''
  if answer ~= '' then
    local untilSecond = tonumber(answer)
    if untilSecond > 0 then
      if redis.call('EXISTS', key) == 1 then redis.call('HSET', key, 'admitted', untilSecond) end
    elseif redis.call('HEXISTS', key, 'admitted') == 0 then
      redis.call('DEL', key)
    end
  end
end
return 1
`);

/**
 * The census of the throttle's counters (docs/scaling.md#the-throttles-keys), a sorted set in a
 * slot of its own: one member per counter key (an address, or an address and a merchant), scored
 * by the latest second the key may live. It bounds the number of counters whatever the number of
 * attacking addresses. KEYS: the census. ARGV: now, most members, then member and until-when
 * pairs: the members asked for, each with the second it is counted until. Members that ended go
 * first; then each member asked is admitted (answer: its until) when it is already counted or
 * while there is room, else refused (answer 0), in order.
 */
export const ADMIT = redisScript(`#!lua
local now, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local answers, latest = {}, now
for i = 3, #ARGV, 2 do
  local member, until_ = ARGV[i], tonumber(ARGV[i + 1])
  if redis.call('ZSCORE', KEYS[1], member) or redis.call('ZCARD', KEYS[1]) < cap then
    redis.call('ZADD', KEYS[1], until_, member)
    answers[#answers + 1] = until_
    if until_ > latest then latest = until_ end
  else
    answers[#answers + 1] = 0
  end
end
if redis.call('TTL', KEYS[1]) < latest - now then redis.call('EXPIRE', KEYS[1], latest - now + 1) end
return answers
`);

/**
 * KEYS: the address counter, the pair counter of the claimed merchant (read only: it may not exist).
 * ARGV: now, pairFailures, addressFailures, addressWindowSeconds, origin, merchant as claimed ('' for
 * none), checks of the address, checks of the pair, seconds the reservation holds, then checks of
 * the address and of the pair counted whatever the limits say (a check that already started),
 * then the channel and the address: the first reservation of an address by an instance is
 * published, so the others reserve their next check of it too.
 * Those are added first; then answers 1 when the failures counted and every live instance's
 * reservations, plus these, stay within both limits and nothing is blocked (then they are added
 * to this instance's), else 0.
 */
export const RESERVE_CHECKS = redisScript(`#!lua
local now = tonumber(ARGV[1])
local pairLimit, addressLimit, addressWindow = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local origin, merchant = ARGV[5], ARGV[6]
local wantAddress, wantPair, hold = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local all = redis.call('HGETALL', KEYS[1])
local h = {}
for i = 1, #all, 2 do h[all[i]] = all[i + 1] end
local dead = {}
for field, value in pairs(h) do
  if string.sub(field, 1, 2) == 'u|' and tonumber(value) < now then dead[string.sub(field, 3)] = true end
end
local addressHeld, pairHeld = 0, 0
for field, value in pairs(h) do
  local kind = string.sub(field, 1, 2)
  if kind == 'a|' or kind == 'p|' or kind == 'u|' then
    if dead[string.sub(field, 3, 38)] then redis.call('HDEL', KEYS[1], field)
    elseif kind == 'a|' then addressHeld = addressHeld + tonumber(value)
    elseif kind == 'p|' and string.sub(field, 40) == merchant then pairHeld = pairHeld + tonumber(value) end
  end
end
local forcedAddress, forcedPair = tonumber(ARGV[10] or '0'), tonumber(ARGV[11] or '0')
if forcedAddress > 0 then redis.call('HINCRBY', KEYS[1], 'a|' .. origin, forcedAddress) end
if merchant ~= '' and forcedPair > 0 then redis.call('HINCRBY', KEYS[1], 'p|' .. origin .. '|' .. merchant, forcedPair) end
if forcedAddress > 0 or forcedPair > 0 then
  redis.call('HSET', KEYS[1], 'u|' .. origin, now + hold)
  if redis.call('TTL', KEYS[1]) < hold then redis.call('EXPIRE', KEYS[1], hold + 1) end
end
addressHeld, pairHeld = addressHeld + forcedAddress, pairHeld + forcedPair
if tonumber(h.blockedUntil or '0') > now then return 0 end
local failures = tonumber(h.failures or '0')
if now - tonumber(h.windowStart or '0') >= addressWindow then failures = 0 end
if failures + addressHeld + wantAddress > addressLimit then return 0 end
if merchant ~= '' then
  local p = redis.call('HMGET', KEYS[2], 'failures', 'blockedUntil')
  if tonumber(p[2] or '0') > now then return 0 end
  if tonumber(p[1] or '0') + pairHeld + wantPair > pairLimit then return 0 end
end
if wantAddress > 0 then redis.call('HINCRBY', KEYS[1], 'a|' .. origin, wantAddress) end
if merchant ~= '' and wantPair > 0 then redis.call('HINCRBY', KEYS[1], 'p|' .. origin .. '|' .. merchant, wantPair) end
if forcedAddress > 0 and ARGV[12] then redis.call('PUBLISH', ARGV[12], cjson.encode({ origin = origin, busy = { ARGV[13] } })) end
redis.call('HSET', KEYS[1], 'u|' .. origin, now + hold)
if redis.call('TTL', KEYS[1]) < hold then redis.call('EXPIRE', KEYS[1], hold + 1) end
return 1
`);

/** KEYS: the address counter. ARGV: origin, merchant as claimed ('' for none), checks of the address, of the pair. */
export const RELEASE_CHECKS = redisScript(`#!lua
${RESERVATIONS}
giveBack(KEYS[1], 'a|' .. ARGV[1], tonumber(ARGV[3]))
if ARGV[2] ~= '' then giveBack(KEYS[1], 'p|' .. ARGV[1] .. '|' .. ARGV[2], tonumber(ARGV[4])) end
dropIfIdle(KEYS[1], ARGV[1])
return 1
`);

/**
 * KEYS: the pair counter. ARGV: now, channel, origin, address, merchantId.
 * The count and doubling start again (a block in force stays); answers '' when there is no counter.
 */
export const RESET_PAIR = redisScript(`#!lua
${VERSION}
local now = tonumber(ARGV[1])
local blockedUntil = redis.call('HGET', KEYS[1], 'blockedUntil')
if not blockedUntil then return '' end
blockedUntil = tonumber(blockedUntil)
local version = nextVersion(KEYS[1])
redis.call('HSET', KEYS[1], 'failures', 0, 'blocks', 0, 'version', version)
redis.call('EXPIRE', KEYS[1], math.max(blockedUntil - now, ${RESET_VISIBLE_SECONDS}))
local text = cjson.encode({ origin = ARGV[3], records = { recordOf('pair', ARGV[4], ARGV[5], 0, 0, 0, blockedUntil, version) } })
redis.call('PUBLISH', ARGV[2], text)
return text
`);

/**
 * KEYS: the blocks index. ARGV: now, most entries kept, then score and member (a record as JSON) pairs.
 * Ended blocks go, and beyond the cap the ones that end first.
 */
export const INDEX_BLOCKS = redisScript(`#!lua
local now = tonumber(ARGV[1])
for i = 3, #ARGV, 2 do redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local excess = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2])
if excess > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, excess - 1) end
return 1
`);

/** KEYS: the blocks index. ARGV: now, most entries answered. The blocks in force, longest first. */
export const READ_BLOCKS = redisScript(`#!lua flags=no-writes
return redis.call('ZRANGE', KEYS[1], '+inf', '(' .. ARGV[1], 'BYSCORE', 'REV', 'LIMIT', 0, tonumber(ARGV[2]))
`);

/**
 * The operator's lift (`merchant-api throttle unblock`). LIFT: KEYS, the counters to lift (the
 * address's first when `withAddress` is 1, then the pairs in the order of the merchant ids).
 * ARGV: channel, origin, address, withAddress, merchant ids. Each counter that exists starts
 * again, unblocked, and is published as lifted; answers how many there were.
 * UNINDEX: KEYS, the blocks index; ARGV, the members to remove.
 */
export const redisLiftScripts = {
  LIFT: redisScript(`#!lua
${VERSION}
local records = {}
local withAddress = ARGV[4] == '1'
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then
    local version = nextVersion(key)
    redis.call('HSET', key, 'failures', 0, 'blocks', 0, 'blockedUntil', 0, 'version', version)
    redis.call('EXPIRE', key, ${RESET_VISIBLE_SECONDS})
    local record
    if withAddress and i == 1 then
      record = recordOf('address', ARGV[3], '', 0, 0, 0, 0, version)
    else
      record = recordOf('pair', ARGV[3], ARGV[4 + i - (withAddress and 1 or 0)], 0, 0, 0, 0, version)
    end
    record.lifted = true
    records[#records + 1] = record
  end
end
if #records == 0 then return 0 end
redis.call('PUBLISH', ARGV[1], cjson.encode({ origin = ARGV[2], records = records }))
return #records
`),
  UNINDEX: redisScript(`#!lua
return redis.call('ZREM', KEYS[1], unpack(ARGV))
`),
};
