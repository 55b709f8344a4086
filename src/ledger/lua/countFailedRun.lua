--[[
  Counts a run of a job with `pauseOnFailure` that failed for good, or (ARGV[2] = 0) clears its count
  after a completed run. Once `ARGV[2]` runs in a row have failed, pauses the job at run time as
  `leasebeat pause` does (the note says why; a notice on the leader's stream makes it take back the runs
  it staged) and clears the count, so that after a resume the job gets N more runs. One script: of many
  instances failing runs at once, exactly one pauses.
  The pause is in the job's history as an operator's is: an audit entry written in the same script.
  KEYS[1] failure streaks  KEYS[2] paused jobs  KEYS[3] the leader's stream  KEYS[4] the audit stream
  KEYS[5] the audit index
  ARGV[1] job  ARGV[2] failed runs in a row that pause it (0: the run completed)  ARGV[3] the pause note
  ARGV[4] the stream's approximate length cap  ARGV[5] the audit stream's cap  ARGV[6] audit ids kept per
  name  ARGV[7] who the audit entry names as pausing it
  Returns { failed runs in a row now, 1 when this call paused the job else 0 }.
]]
--- @include "../../redis/lua/includes/audit"
local job, limit = ARGV[1], tonumber(ARGV[2])
if limit == 0 then
  redis.call('HDEL', KEYS[1], job)
  return { 0, 0 }
end
local streak = redis.call('HINCRBY', KEYS[1], job, 1)
if streak < limit then
  return { streak, 0 }
end
redis.call('HDEL', KEYS[1], job)
-- Already paused (by an operator, say): that pause and its note stand.
if redis.call('HEXISTS', KEYS[2], job) == 1 then
  return { streak, 0 }
end
local time = redis.call('TIME')
local at = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('HSET', KEYS[2], job, cjson.encode({ note = ARGV[3], at = at }))
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'notice', 'pause', 'job', job)
recordAudit(KEYS[4], KEYS[5], ARGV[5], ARGV[6], job, 'pause', ARGV[7], cjson.encode({ note = ARGV[3], pauseOnFailure = limit }))
return { streak, 1 }
