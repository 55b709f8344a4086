--[[
  A worker's take of a staged run, made only if the run may start now: stagedRunMayStart.lua's check
  and startRun.lua's take in one script, where the job's hash and the ledger are on one server (a single
  Redis, or a Sentinel group's primary; on a Cluster they are in different slots, and the worker makes
  the two steps). One round trip instead of two for every run a burst starts.
  KEYS[1] the job's hash  KEYS[2] its lock
  KEYS[3] fence  KEYS[4] the job's state  KEYS[5] paused jobs  KEYS[6] the job's ledger
  KEYS[7] the run's stop request
  ARGV[1] the worker's lock token  ARGV[2] this start ('<ms>|<identity>')
  ARGV[3..8] as stagedRunMayStart.lua's ARGV[1..6]
  Returns startRun.lua's replies, the stop request added to a start: { 1, kind, runner, starts, stop };
  or { 0 }: hand the run back, nothing written.
]]
--- @include "includes/take-run"
--- @include "../../ledger/lua/includes/staged-run"
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return { -1 }
end
if not stagedRunMayStart(KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]) then
  return { 0 }
end
local reply = takeRun(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
if reply[1] == 1 then
  reply[5] = redis.call('GET', KEYS[7])
end
return reply
