--[[
  Starts taking back a staged run (a tick added to BullMQ as a delayed job ahead of its due time) that a
  pause, a removal or a new schedule no longer wants, under the fence: a stale leader must not take back
  a run the current one counts on. The tick is put back in the pending set, so a leader that dies before
  the take-back is settled leaves it to the next one (see settleUnstaging.lua). Marking a tick already
  being taken back answers as a fresh mark, so a lane retrying a take-back whose reply it lost goes on.
  KEYS[1] fence  KEYS[2] retired generations  KEYS[3] ledger  KEYS[4] pending  KEYS[5] job state
  ARGV[1] generation  ARGV[2] transitions  ARGV[3] tick (ms)  ARGV[4] job id  ARGV[5] reason
  ARGV[6] the queue the run was added to
  ARGV[7] '1' to mark a tick that is still only claimed (or buffered) by this job id: a claim the job no
  longer owes, whose earlier add may or may not have landed; it is marked before it is added again, so
  that no worker starts it before the pull (stagedRunMayStart.lua)
  ARGV[8] for a runtime schedule's tick its revision no longer has: that revision (see
  upsertSchedule.lua), or '' for none. The mark is then made only if that revision is still stored and
  the tick has come on the server's clock: a version written later owes no tick before its write, so no
  later edit can want the tick back once its take-back goes ahead (a mark made earlier only holds the run,
  and is lifted by restoreStaged.lua when an edit before the tick wants it again)
  Returns -1 when fenced (nothing is written), 1 when the tick is now (or already was) being taken back,
  0 when its record is no longer this run's `enqueued` (settled otherwise; nothing to take back), -2 when
  the revision is not the stored one or the tick has not come (nothing is written: decide it again).
]]
--- @include "includes/fence"
if fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], 1) then
  return -1
end
local tick, jobId = ARGV[3], ARGV[4]
if ARGV[8] ~= '' then
  local stored = redis.call('HGET', KEYS[5], 'schedule')
  local time = redis.call('TIME')
  if (stored and stored ~= ARGV[8]) or tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) < tonumber(tick) then
    return -2
  end
end
local existing = redis.call('HGET', KEYS[3], tick)
if existing == 'enqueued|' .. jobId then
  -- The queue goes last: it is the only part that may hold a '|' (job names and ids cannot).
  redis.call('HSET', KEYS[3], tick, 'unstaging|' .. ARGV[5] .. '|' .. jobId .. '|' .. ARGV[6])
  redis.call('ZADD', KEYS[4], tick, tick)
  return 1
end
if existing and string.sub(existing, 1, 10) == 'unstaging|' then
  return 1
end
local claimed = existing and (string.sub(existing, 1, 8) == 'claimed|' or string.sub(existing, 1, 9) == 'buffered|')
if ARGV[7] == '1' and claimed and string.sub(existing, -(#jobId + 1)) == '|' .. jobId then
  redis.call('HSET', KEYS[3], tick, 'unstaging|' .. ARGV[5] .. '|' .. jobId .. '|' .. ARGV[6])
  redis.call('ZADD', KEYS[4], tick, tick)
  return 1
end
return 0
