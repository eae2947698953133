-- The heavy merchant of bench/abuse-fairness.ts as a fast client: every
-- connection sends the same request again and again. With the argument
-- "honour", a connection answered 429 waits Retry-After seconds before its
-- next request (as the merchant client does); without it, it sends at once.
-- done() prints the answers by status as one JSON line.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  honour = args[1] == "honour"
  counts = {}
  -- Waits owed by connections answered 429, in the order of the answers: each
  -- answer is followed by exactly one next request, so each wait is taken once.
  waits, first, last = {}, 1, 0
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
  if honour and status == 429 then
    local seconds = tonumber(headers["retry-after"] or headers["Retry-After"] or "1") or 1
    last = last + 1
    waits[last] = seconds * 1000
  end
end

function delay()
  if first <= last then
    local wait = waits[first]
    waits[first] = nil
    first = first + 1
    return wait
  end
  return 0
end

function done(summary, latency, requests)
  local parts = {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("counts")) do
      table.insert(parts, string.format('"%d":%d', status, n))
    end
  end
  io.write(string.format('WRKSTATUS {"requests":%d,"duration_us":%d,"socket_errors":%d,"answers":{%s}}\n',
    summary.requests, summary.duration, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout, table.concat(parts, ",")))
end
