--[[
  Workers' takes of staged runs, each made only if its run may start now: stagedRunMayStart.lua's check
  and startRuns.lua's take in one script, where the job hashes and the ledger are on one server (a single
  Redis, or a Sentinel group's primary; on a Cluster they are in different slots, and the worker makes
  the two steps). The takes a worker makes in one turn share this script: one round trip for a burst.
  For run i (k = 7 * (i - 1), a = 9 * (i - 1)):
  KEYS[k+1] its job hash  KEYS[k+2] its lock
  KEYS[k+3] fence  KEYS[k+4] the job's state  KEYS[k+5] paused jobs  KEYS[k+6] the job's ledger
  KEYS[k+7] the run's stop request
  ARGV[a+1] the worker's lock token  ARGV[a+2] this start ('<ms>|<identity>')
  ARGV[a+3..a+9] as stagedRunMayStart.lua's ARGV[1..7]
  Returns one reply per run, in order: startRuns.lua's, the stop request added to a start
  ({ 1, kind, runner, starts, stop }); or { 0 }: hand the run back, nothing written for it.
]]
--- @include "includes/take-run"
--- @include "../../ledger/lua/includes/staged-run"
local function takeStaged(k, a, now)
  if redis.call('GET', KEYS[k + 2]) ~= ARGV[a + 1] then
    return { -1 }
  end
  if not stagedRunMayStart(KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6],
      ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7], ARGV[a + 8], ARGV[a + 9], now) then
    return { 0 }
  end
  local reply = takeRun(KEYS[k + 1], KEYS[k + 2], ARGV[a + 1], ARGV[a + 2])
  if reply[1] == 1 then
    reply[5] = redis.call('GET', KEYS[k + 7])
  end
  return reply
end

local now = serverNowMs()
local replies = {}
for i = 1, #KEYS / 7 do
  replies[i] = takeStaged(7 * (i - 1), 9 * (i - 1), now)
end
return replies
