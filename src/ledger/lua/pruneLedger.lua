--[[
  Forgets ledger entries and skip ranges older than the retention, at most ARGV[2] at a time.
  KEYS[1] ledger  KEYS[2] ledger index  KEYS[3] skips
  ARGV[1] cutoff tick (ms)  ARGV[2] limit
  Returns the number of ledger entries removed.
]]
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #old > 0 then
  redis.call('HDEL', KEYS[1], unpack(old))
  redis.call('ZREM', KEYS[2], unpack(old))
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[1])
return #old
