--[[
  A leader sets when it must look at a runtime schedule again, after it has dropped the schedule's lane
  (nothing staged, nothing pending, the next tick far off): the due index then holds the schedule until
  that instant. Written only under the fence, and only if the stored version is the one the lane ran by:
  an edit since then made the schedule due at once (upsertSchedule.lua), and this write must not hide it.
  KEYS[1] fence  KEYS[2] retired generations  KEYS[3] specs  KEYS[4] due index  KEYS[5] replaced versions
  ARGV[1] generation  ARGV[2] transitions  ARGV[3] id  ARGV[4] version  ARGV[5] updatedAt
  ARGV[6] when to look again (ms), or '' when nothing more is owed (the schedule leaves the index until
  it is written again)
  Returns 1 when written, 0 when the stored version is not the given one (or the schedule is gone;
  nothing written but the removal of its index entry), -1 when fenced.
]]
--- @include "../../ledger/lua/includes/fence"
if fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], 0) then
  return -1
end
local stored = redis.call('HGET', KEYS[3], ARGV[3])
if not stored then
  redis.call('ZREM', KEYS[4], ARGV[3])
  return 0
end
-- "<version>|<updatedAt>|...": the version and the time of the write the lane ran by.
local first = string.find(stored, '|', 1, true)
local second = string.find(stored, '|', first + 1, true)
if string.sub(stored, 1, first - 1) ~= ARGV[4] or string.sub(stored, first + 1, second - 1) ~= ARGV[5] then
  return 0
end
-- A parking lane has recorded every tick up to now: the version before it owes nothing more.
redis.call('HDEL', KEYS[5], ARGV[3])
if ARGV[6] == '' then
  redis.call('ZREM', KEYS[4], ARGV[3])
else
  redis.call('ZADD', KEYS[4], ARGV[6], ARGV[3])
end
return 1
