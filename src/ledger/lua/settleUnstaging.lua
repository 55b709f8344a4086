--[[
  Records what became of a take-back that markUnstaging.lua started (state
  'unstaging|<reason>|<jobId>|<queue>', in the pending set), once BullMQ's side decided it
  (pullStagedRun.lua). Unfenced: the decision was fenced when the take-back was marked, and the pull
  decided the race with the run's promotion.
  KEYS[1] ledger  KEYS[2] pending  KEYS[3] job state
  ARGV[1] tick (ms)  ARGV[2] outcome: 'taken-back' (pulled: recorded skipped for the reason) or 'runs'
          (promoted or started first: recorded enqueued again)
  Returns 1 when the record moved, 0 when it was not being taken back (settled already).
]]
local tick, outcome = ARGV[1], ARGV[2]
local existing = redis.call('HGET', KEYS[1], tick)
if not existing or string.sub(existing, 1, 10) ~= 'unstaging|' then
  return 0
end
local reason, jobId = string.match(existing, '^unstaging|([^|]*)|([^|]*)|')
if outcome == 'taken-back' then
  redis.call('HSET', KEYS[1], tick, 'skipped|' .. reason)
  redis.call('HINCRBY', KEYS[3], 'enqueued', -1)
  redis.call('HINCRBY', KEYS[3], 'skipped:' .. reason, 1)
else
  redis.call('HSET', KEYS[1], tick, 'enqueued|' .. jobId)
end
redis.call('ZREM', KEYS[2], tick)
return 1
