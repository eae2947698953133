-- Cycles through pre-signed request paths, one per request: wrk's Lua has no
-- HMAC-SHA224, so bench/signed-paths.ts signs them ahead of time (each with
-- its own salt). Arguments: file, first line (1-based), line count.
--
-- Every line has the same length, and the region is held as ONE string: a
-- table of a million strings made LuaJIT's garbage collector stall wrk for
-- 100+ ms at a time (measured: p99 of a constant server went from 12 to
-- 227 ms), which showed up as the server's latency.
--
-- Running past the end wraps around, which replays salts: the server answers
-- 400, counted as non-2xx, and `wrapped` says it happened.
local blob
local width -- bytes per line, newline included
local n = 0
local i = 0
local suffix
wrapped = 0

function init(args)
  local first, count = tonumber(args[2]), tonumber(args[3])
  local file = assert(io.open(args[1], "rb"))
  width = #file:read("*l") + 1
  file:seek("set", (first - 1) * width)
  blob = file:read(count * width)
  file:close()
  n = math.floor(#blob / width)
  suffix = " HTTP/1.1\r\nHost: " .. wrk.headers["Host"] .. "\r\n\r\n"
end

function request()
  if i == n then
    i = 0
    wrapped = wrapped + 1
  end
  local start = i * width + 1
  i = i + 1
  return "GET " .. blob:sub(start, start + width - 2) .. suffix
end

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

function done(summary, latency, requests)
  local w = 0
  for _, thread in ipairs(threads) do w = w + (thread:get("wrapped") or 0) end
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50_us":%d,"p99_us":%d,"max_us":%d,"wrapped":%d}\n',
    summary.requests, summary.duration, summary.bytes, summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout, latency:percentile(50), latency:percentile(99), latency.max, w))
end
