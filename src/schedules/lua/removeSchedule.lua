--[[
  Removes a schedule, tells the change feed, and records who removed which version in the audit trail.
  With an expected version, only if that version is stored.
  KEYS[1] specs  KEYS[2] ids  KEYS[3] change feed  KEYS[4] due index
  KEYS[5] replaced versions (hash: id -> JSON array, see includes/replaced)
  KEYS[6] audit stream  KEYS[7] audit index (see redis/lua/includes/audit)
  KEYS[8] paused jobs  KEYS[9] failure streaks  KEYS[10] the schedule's job state
  ARGV[1] id  ARGV[2] expected version ('' for any)  ARGV[3] the feed's approximate length cap
  ARGV[4] who  ARGV[5] the audit stream's length cap  ARGV[6] how many ids the audit index keeps per name
  Returns the removed version, 0 when there was no such schedule, -1 when the expected version did not
  match (nothing is removed).
]]
--- @include "includes/replaced"
--- @include "../../redis/lua/includes/audit"
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored then
  return 0
end
local version = tonumber(string.sub(stored, 1, string.find(stored, '|', 1, true) - 1))
if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= version then
  return -1
end
redis.call('HDEL', KEYS[1], ARGV[1])
-- The ticks it owed up to now that no leader recorded are still to be accounted for (by the next leader).
local time = redis.call('TIME')
appendReplaced(KEYS[5], ARGV[1], tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000), 'remove', stored)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
-- A schedule written again under this id is a new one: it must not inherit this one's run-time pause (with
-- its note) or its count of failed runs towards pauseOnFailure.
redis.call('HDEL', KEYS[8], ARGV[1])
redis.call('HDEL', KEYS[9], ARGV[1])
-- No revision is stored: workers hold its staged runs, which its lane takes back (stagedRunMayStart.lua).
-- A schedule no lane took over (no state) has none.
if redis.call('EXISTS', KEYS[10]) == 1 then
  redis.call('HSET', KEYS[10], 'schedule', '')
end
-- Version 0 in the feed: the schedule is gone.
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'id', ARGV[1], 'version', 0)
recordAudit(KEYS[6], KEYS[7], ARGV[5], ARGV[6], ARGV[1], 'remove', ARGV[4], '{"version":' .. version .. '}')
return version
