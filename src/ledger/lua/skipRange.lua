--[[
  Records a range of ticks that will never run (missed while no leader enqueued, or owed past the
  catch-up window), under the fence.
  KEYS[1] fence  KEYS[2] retired generations  KEYS[3] skips  KEYS[4] job state  KEYS[5] ledger index
  ARGV[1] generation  ARGV[2] transitions  ARGV[3] first tick  ARGV[4] last tick  ARGV[5] count
  ARGV[6] reason  ARGV[7] range as JSON
  Returns 1, -1 when fenced, -2 when the range is inverted or empty (a caller bug: nothing is written,
  since such a range would move the watermark without recording any tick), or -3 when a tick in the
  range is recorded already, on its own or inside a recorded range (nothing is written: the caller read
  the watermark before another writer of the job recorded that tick, and must count its span again from
  the ledger).
]]
--- @include "includes/fence"
if fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], 1) then
  redis.call('HINCRBY', KEYS[4], 'fenced', 1)
  return -1
end
local from, to, count = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if not from or not to or not count or from > to or count < 1 then
  return -2
end
-- A tick is recorded once: a run and a skip of one tick would both be in the ledger, and two ranges over
-- one tick would count it twice. Recorded ranges never overlap, so the one starting last at or before
-- `to` is the only one that can reach into this range.
if #redis.call('ZRANGEBYSCORE', KEYS[5], from, to, 'LIMIT', 0, 1) > 0 then
  return -3
end
local before = redis.call('ZREVRANGEBYSCORE', KEYS[3], to, '-inf', 'LIMIT', 0, 1)[1]
if before and tonumber(cjson.decode(before).to) >= from then
  return -3
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[7])
redis.call('HINCRBY', KEYS[4], 'skipped:' .. ARGV[6], ARGV[5])
local last = tonumber(redis.call('HGET', KEYS[4], 'lastScheduledTick') or '-1')
if to > last then
  redis.call('HSET', KEYS[4], 'lastScheduledTick', ARGV[4])
end
return 1
