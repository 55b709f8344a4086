--[[
  Lifts the take-back mark (markUnstaging.lua) of a runtime schedule's staged run that an edit held
  (`rescheduled`) before its take-back went ahead, under the fence: a later edit, written before the tick,
  owes the tick again. The run was never pulled (a `rescheduled` take-back of a schedule's run is pulled
  only once its tick has come, under the revision stored then: see markUnstaging.lua's ARGV[8]), so it is
  recorded `enqueued` again, out of the pending set, and starts as staged once a leader approved the
  revision (stagedRunMayStart.lua).
  KEYS[1] fence  KEYS[2] retired generations  KEYS[3] ledger  KEYS[4] pending
  ARGV[1] generation  ARGV[2] transitions  ARGV[3] tick (ms)  ARGV[4] job id
  Returns -1 when fenced, 1 when restored, 0 when the tick is not this run's `rescheduled` take-back.
]]
--- @include "includes/fence"
if fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], 1) then
  return -1
end
local tick, jobId = ARGV[3], ARGV[4]
local existing = redis.call('HGET', KEYS[3], tick)
-- 'unstaging|rescheduled|<jobId>|<queue>': the queue goes last, and may hold a '|'.
if not existing or string.sub(existing, 1, 23 + #jobId) ~= 'unstaging|rescheduled|' .. jobId .. '|' then
  return 0
end
redis.call('HSET', KEYS[3], tick, 'enqueued|' .. jobId)
redis.call('ZREM', KEYS[4], tick)
return 1
