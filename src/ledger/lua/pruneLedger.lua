--[[
  Forgets ledger entries and skip ranges older than the retention, at most ARGV[2] at a time.
  KEYS[1] ledger  KEYS[2] ledger index  KEYS[3] skips  KEYS[4] backfill pending
  ARGV[1] cutoff tick (ms)  ARGV[2] limit
  Returns the number of ledger entries removed.
]]
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
-- A backfill's claim of a past tick is always older than the cutoff: while it is pending its record is
-- what tells the next leader that the run may be in BullMQ already, so it stays until it is confirmed.
local forget = {}
for _, tick in ipairs(old) do
  if not redis.call('ZSCORE', KEYS[4], tick) then forget[#forget + 1] = tick end
end
if #forget > 0 then
  redis.call('HDEL', KEYS[1], unpack(forget))
  redis.call('ZREM', KEYS[2], unpack(forget))
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[1])
return #forget
