--[[
  Records, under the fence, that the current term has taken jobs over and applied its rules (a run-time
  pause, the catch-up policy) to the runs earlier terms staged for them: from now on workers may start
  those runs (stagedRunMayStart.lua).
  KEYS[1] fence  KEYS[2] retired generations; then each job's state
  ARGV[1] generation  ARGV[2] transitions
  Returns -1 when fenced (nothing written), else 1.
]]
--- @include "includes/fence"
if fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], 0) then
  return -1
end
for i = 3, #KEYS do
  redis.call('HSET', KEYS[i], 'reviewedBy', ARGV[1] .. '|' .. ARGV[2])
end
return 1
