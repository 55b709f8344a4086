--[[
  Raises the fence to a new leadership term. The fence only moves forward, and one token (generation,
  transitions) belongs to one term: the same token raised again by another holder is refused, since two
  elections that hand out the same leaderTransitions must not both be able to enqueue.
  KEYS[1] fence hash  KEYS[2] retired generations set
  ARGV[1] generation (lease uid)  ARGV[2] leaderTransitions  ARGV[3] holder identity  ARGV[4] now (ms)
  Returns { 1 } when the fence now stands at this term, or { -1, generation, transitions } with the fence
  that rejected it.
]]
local generation, transitions, holder = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local current = redis.call('HMGET', KEYS[1], 'generation', 'transitions', 'holder')
local reject = function()
  redis.call('HINCRBY', KEYS[1], 'rejectedRaises', 1)
  return { -1, current[1] or '', tonumber(current[2] or '-1') }
end

if redis.call('SISMEMBER', KEYS[2], generation) == 1 then
  return reject()
end
if current[1] and current[1] == generation then
  local standing = tonumber(current[2])
  if transitions < standing then
    return reject()
  end
  -- The same term raising again (a restarted producer) is fine; another holder with this token is not.
  if transitions == standing and current[3] and current[3] ~= holder then
    return reject()
  end
end
if current[1] and current[1] ~= generation then
  -- The lease was deleted and recreated: its transitions restarted, so the old generation is retired for good.
  redis.call('SADD', KEYS[2], current[1])
end
redis.call('HSET', KEYS[1], 'generation', generation, 'transitions', transitions, 'holder', holder, 'raisedAt', ARGV[4])
return { 1 }
