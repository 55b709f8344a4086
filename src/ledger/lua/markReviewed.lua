--[[
  Records, under the fence, that the current term has taken jobs over and applied its rules (a run-time
  pause, the catch-up policy) to the runs earlier terms staged for them: from now on workers may start
  those runs (stagedRunMayStart.lua). For a runtime schedule it also approves the revision its lane
  reviewed the staged runs by (it marked those the revision does not owe), if that revision is still the
  one stored: a later write holds the runs again until its own review.
  KEYS[1] fence  KEYS[2] retired generations; then each job's state
  ARGV[1] generation  ARGV[2] transitions; then each job's revision, or '' (a file job)
  Returns -1 when fenced (nothing written), else 1.
]]
--- @include "includes/fence"
if fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], 0) then
  return -1
end
for i = 3, #KEYS do
  redis.call('HSET', KEYS[i], 'reviewedBy', ARGV[1] .. '|' .. ARGV[2])
  local revision = ARGV[i] or ''
  if revision ~= '' and redis.call('HGET', KEYS[i], 'schedule') == revision then
    redis.call('HSET', KEYS[i], 'approved', revision)
  end
end
return 1
