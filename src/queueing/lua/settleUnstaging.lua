--[[
  Records what became of a take-back that markUnstaging.lua started, once the BullMQ side decided it.
  Unfenced: the decision was fenced when the take-back was marked, and BullMQ's own delayed set decided
  the race with the run's promotion.
  States (all but the last two in the pending set):
    'unstaging|<reason>|<jobId>|<queue>'  marked; the delayed job may or may not be out of BullMQ's reach
    'unstaged|<reason>|<jobId>|<queue>'   out of reach, never to run; its job hash is still to delete
    'skipped|<reason>'                    taken back and cleaned up
    'enqueued|<jobId>'                    it was promoted first: it runs (or ran), as staged
  KEYS[1] ledger  KEYS[2] pending  KEYS[3] job state
  ARGV[1] tick (ms)  ARGV[2] outcome: 'runs' or 'taken-back' (from unstaging), 'cleaned' (from unstaged)
  Returns 1 when the record moved, 0 when it was not in the state the outcome follows from.
]]
local tick, outcome = ARGV[1], ARGV[2]
local existing = redis.call('HGET', KEYS[1], tick)
if not existing then
  return 0
end
local state, reason, jobId, queue = string.match(existing, '^(%a+)|([^|]*)|([^|]*)|(.*)$')
if outcome == 'runs' and state == 'unstaging' then
  redis.call('HSET', KEYS[1], tick, 'enqueued|' .. jobId)
  redis.call('ZREM', KEYS[2], tick)
  return 1
end
if outcome == 'taken-back' and state == 'unstaging' then
  redis.call('HSET', KEYS[1], tick, 'unstaged|' .. reason .. '|' .. jobId .. '|' .. queue)
  redis.call('HINCRBY', KEYS[3], 'enqueued', -1)
  redis.call('HINCRBY', KEYS[3], 'skipped:' .. reason, 1)
  return 1
end
if outcome == 'cleaned' and state == 'unstaged' then
  redis.call('HSET', KEYS[1], tick, 'skipped|' .. reason)
  redis.call('ZREM', KEYS[2], tick)
  return 1
end
return 0
