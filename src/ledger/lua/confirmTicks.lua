--[[
  Records that the runs of claimed ticks are in BullMQ, under the fence: a confirm that arrives late,
  after a newer term took over, must not overwrite what that term recorded since (a take-back's
  `skipped|paused`, say). Only a tick recorded as claimed for this very job id (`claimed|…|<jobId>`, or
  `buffered|…|<jobId>`) moves to `enqueued|<jobId>`; lastJobId was set when it was claimed. A tick with
  no claim (one a failover lost after the run was added) is left alone and answered as such: the caller
  claims it again, which restores its place in the watermark, then confirms.
  KEYS[1] fence  KEYS[2] retired generations
  then for the i-th tick (i from 0): KEYS[3+3i] ledger  KEYS[4+3i] the pending set it was claimed in (the
          live lane's, or a backfill's: see stepBackfill.lua)  KEYS[5+3i] job state
  ARGV[1] generation  ARGV[2] transitions  ARGV[3] now (ms)
  then for the i-th tick: ARGV[4+2i] tick (ms)  ARGV[5+2i] job id
  Returns { -1 } when fenced (nothing is written), else one code per tick, in order:
     1  recorded enqueued now
     0  already enqueued with this job id (a confirm retried after its reply was lost): nothing to do
    -2  not claimed for this job id (no record, or another state): nothing written; claim it again
]]
--- @include "includes/fence"
if fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], 1) then
  return { -1 }
end
local now = ARGV[3]
local results = {}
for i = 0, (#KEYS - 2) / 3 - 1 do
  local ledger, pending, state = KEYS[3 + 3 * i], KEYS[4 + 3 * i], KEYS[5 + 3 * i]
  local tick, jobId = ARGV[4 + 2 * i], ARGV[5 + 2 * i]
  local existing = redis.call('HGET', ledger, tick) or ''
  local claimedFor = '|' .. jobId
  local claimed = (string.sub(existing, 1, 8) == 'claimed|' or string.sub(existing, 1, 9) == 'buffered|')
      and string.sub(existing, -#claimedFor) == claimedFor
  if claimed then
    redis.call('HSET', ledger, tick, 'enqueued|' .. jobId)
    redis.call('ZREM', pending, tick)
    redis.call('HSET', state, 'lastEnqueuedAt', now)
    redis.call('HINCRBY', state, 'enqueued', 1)
    results[#results + 1] = 1
  elseif existing == 'enqueued|' .. jobId then
    results[#results + 1] = 0
  else
    results[#results + 1] = -2
  end
end
return results
