--[[
  The check every write that decides the fate of a tick makes first, in the same script: the caller's
  token must be the term the fence stands at, of a generation not retired (a lease deleted and
  recreated). A stale term, a leader that has not noticed it lost the lease, is turned away here,
  atomically with the write it wanted to make. `counted` refusals are added to the fence's tally.
]]
local function fenced(fenceKey, retiredKey, generation, transitions, counted)
  local fence = redis.call('HMGET', fenceKey, 'generation', 'transitions')
  if fence[1] == generation and tonumber(fence[2]) == tonumber(transitions)
      and redis.call('SISMEMBER', retiredKey, generation) == 0 then
    return false
  end
  if counted > 0 then redis.call('HINCRBY', fenceKey, 'fenced', counted) end
  return true
end
