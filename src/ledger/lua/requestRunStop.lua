--[[
  Asks, under the fence, that a run stop because a newer tick of its job came due (overlap `cancelOther`
  or `terminateOther`): records the request for a worker that has not started the run yet, and publishes
  it to the worker pools of every instance, one of which may be running it.
  KEYS[1] fence  KEYS[2] retired generations  KEYS[3] the run's stop request (a string)
  ARGV[1] generation  ARGV[2] transitions  ARGV[3] the request (JSON { jobId, how, byTick })
  ARGV[4] how long the request is kept (ms)  ARGV[5] the pub/sub channel of stop requests
  Returns -1 when fenced (nothing written or published), else 1.
]]
--- @include "includes/fence"
if fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], 0) then
  return -1
end
redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[4])
redis.call('PUBLISH', ARGV[5], ARGV[3])
return 1
