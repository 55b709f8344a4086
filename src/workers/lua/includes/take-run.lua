--[[
  A worker's take of a run (`thisStart`: '<ms>|<identity>'): see startRuns.lua for the fields it keeps
  and what it returns. Shared with
  startStagedRuns.lua, which first checks that a staged run may start.
]]
local function takeRun(jobKey, lockKey, token, thisStart)
  if redis.call('GET', lockKey) ~= token then
    return { -1 }
  end
  -- One read of the fields a take decides on: it runs for every run a burst starts.
  local fields = redis.call('HMGET', jobKey, 'leasebeatStarts', 'leasebeatFinish', 'stc', 'atm')
  local starts = tonumber(fields[1] or '0')
  local raw = fields[2]
  local finish = raw and cjson.decode(raw)
  local kind, runner = 'first', ''
  if finish and finish.s == starts then
    local stalled = tonumber(fields[3] or '0')
    local attempts = tonumber(fields[4] or '0')
    -- BullMQ counts the attempt when it records the finish, and a stall when it recovers a run: a run back
    -- from recovery with its attempt uncounted is one whose finish the server never got. (A handler that
    -- moved its job itself is re-entered instead: it is written to be.)
    if stalled > finish.stc and attempts == finish.atm and finish.o ~= 'moved' then
      return { 2, raw }
    end
    if finish.o == 'completed' then
      return { 3, raw }
    end
    if finish.o == 'moved' then
      kind = 'continued'
    else
      kind = finish.f and 'operator-retry' or 'retry'
    end
  elseif starts > 0 then
    kind, runner = 'runner-lost', redis.call('HGET', jobKey, 'leasebeatRunner') or ''
  end
  redis.call('HSET', jobKey, 'leasebeatStarts', starts + 1, 'leasebeatRunner', thisStart)
  return { 1, kind, runner, starts + 1 }
end
