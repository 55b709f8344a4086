--[[
  Creates a lease record if none exists, and appends the write to the lease's history.
  KEYS[1] lease hash  KEYS[2] history stream
  ARGV[1] holderIdentity  ARGV[2] leaseDurationSeconds  ARGV[3] acquireTime (ms)  ARGV[4] renewTime (ms)
  ARGV[5] leaderTransitions  ARGV[6] generation id, fresh for every creation  ARGV[7] history length to keep
  ARGV[8] change channel, published the new record
  Returns 1 (the new version), or -1 when the record already exists.
]]
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
-- The replication epoch the record is written in (see updateLease.lua).
local epoch = string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)')
redis.call('HSET', KEYS[1],
  'holderIdentity', ARGV[1], 'leaseDurationSeconds', ARGV[2], 'acquireTime', ARGV[3],
  'renewTime', ARGV[4], 'leaderTransitions', ARGV[5], 'generation', ARGV[6], 'version', 1, 'epoch', epoch)
-- The history is written by the same script as the record, so it is the lock's own ground truth:
-- audits and the status page read who held which term from here, not from the processes' logs.
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[7], '*',
  'op', 'create', 'holder', ARGV[1], 'transitions', ARGV[5], 'generation', ARGV[6], 'version', 1,
  'duration', ARGV[2], 'acquire', ARGV[3], 'renew', ARGV[4])
-- Followers wake on this instead of polling; a lost message only delays them (they poll as a fallback).
redis.call('PUBLISH', ARGV[8], cjson.encode({
  holder = ARGV[1], duration = ARGV[2], acquire = ARGV[3], renew = ARGV[4], transitions = ARGV[5],
  generation = ARGV[6], version = '1' }))
return 1
