--[[
  Whether a staged run may start now; see stagedRunMayStart.lua for the rules. Shared with the worker's
  take (workers/lua/startStagedRuns.lua), which makes the same check in its own script where every key is
  on one server. `check` holds the keys fence, state, paused, ledger and the arguments generation,
  transitions, job, dueAt, aliveWithin, tick, schedule (as stagedRunMayStart.lua's KEYS[1..4] and ARGV),
  and `now`, the server's time in ms (serverNowMs(): a script checking many runs reads it once).
  Returns true to start.
]]
local function serverNowMs()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

local function stagedRunMayStart(fenceKey, stateKey, pausedKey, ledgerKey, generation, transitions, job, dueAt, aliveWithin, tick, schedule, now)
  -- A runtime schedule's run: the revision stored (written by each upsert and remove) must be the one a
  -- leader approved once it had marked the runs that revision does not owe. One read, which also serves
  -- the review check below.
  local state
  if schedule == '1' then
    state = redis.call('HMGET', stateKey, 'reviewedBy', 'schedule', 'approved')
    if state[2] ~= state[3] then
      return false
    end
  end
  local record = redis.call('HGET', ledgerKey, tick)
  if not record or string.sub(record, 1, 9) ~= 'enqueued|' then
    return false
  end
  local pause = redis.call('HGET', pausedKey, job)
  if pause and tonumber(cjson.decode(pause).at or 0) <= tonumber(dueAt) then
    return false
  end
  local fence = redis.call('HMGET', fenceKey, 'generation', 'transitions', 'aliveAt')
  local aliveAt = tonumber(fence[3] or '')
  if not fence[1] or not aliveAt or now - aliveAt >= tonumber(aliveWithin) then
    return false
  end
  if fence[1] == generation and tonumber(fence[2]) == tonumber(transitions) then
    return true
  end
  local reviewedBy = state and state[1] or redis.call('HGET', stateKey, 'reviewedBy')
  return reviewedBy == fence[1] .. '|' .. fence[2]
end
