--[[
  Replaces a lease record if it is still at the version (and generation) the caller based its write on,
  and appends the write to the lease's history.
  KEYS[1] lease hash  KEYS[2] history stream
  ARGV[1] expected version, or 'damaged:<fingerprint>' to replace a record that could not be decoded
  ARGV[2] expected generation
  ARGV[3] holderIdentity  ARGV[4] leaseDurationSeconds  ARGV[5] acquireTime (ms)  ARGV[6] renewTime (ms)
  ARGV[7] leaderTransitions  ARGV[8] generation id for a replaced damaged record  ARGV[9] history length
  ARGV[10] change channel, published the new record
  ARGV[11] '1' to hold writes to the replication epoch: a record written before the last change of
  primary is replaced only as a damaged one (by fingerprint, under a new generation)
  Returns the new version, -1 on a version, generation, epoch or fingerprint mismatch, -2 when the record
  does not exist.

  The epoch is the server's replication id (`master_replid`), which a promoted replica changes. With
  asynchronous replication a failover can roll the record back to an older write, whose token a holder
  of the lost writes may still use: continuing such a record would hand the same (generation,
  transitions) to two terms. So after a change of primary nobody continues the old record, its holder
  included; it is taken over once unchanged for a lease duration, like a damaged one, under a new
  generation whose first fence raise retires every token of the old one.
]]
local fields = redis.call('HGETALL', KEYS[1])
if #fields == 0 then
  return -2
end
local epoch = string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)')
local generation, nextVersion
if string.sub(ARGV[1], 1, 8) == 'damaged:' then
  if redis.sha1hex(table.concat(fields, '\0')) ~= string.sub(ARGV[1], 9) then
    return -1
  end
  -- Nothing of the old record can be trusted, its generation least of all: start a new one, which the
  -- fence then treats like a recreated lease (the old generation is retired for good).
  redis.call('DEL', KEYS[1])
  generation, nextVersion = ARGV[8], 1
else
  local current = redis.call('HMGET', KEYS[1], 'version', 'generation', 'epoch')
  if current[1] ~= ARGV[1] or current[2] ~= ARGV[2] then
    return -1
  end
  if ARGV[11] == '1' and current[3] ~= epoch then
    return -1
  end
  generation, nextVersion = current[2], tonumber(current[1]) + 1
end
redis.call('HSET', KEYS[1],
  'holderIdentity', ARGV[3], 'leaseDurationSeconds', ARGV[4], 'acquireTime', ARGV[5],
  'renewTime', ARGV[6], 'leaderTransitions', ARGV[7], 'generation', generation, 'version', nextVersion, 'epoch', epoch)
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[9], '*',
  'op', 'update', 'holder', ARGV[3], 'transitions', ARGV[7], 'generation', generation,
  'version', nextVersion, 'duration', ARGV[4], 'acquire', ARGV[5], 'renew', ARGV[6])
-- Followers wake on this instead of polling; a lost message only delays them (they poll as a fallback).
redis.call('PUBLISH', ARGV[10], cjson.encode({
  holder = ARGV[3], duration = ARGV[4], acquire = ARGV[5], renew = ARGV[6], transitions = ARGV[7],
  generation = generation, version = tostring(nextVersion) }))
return nextVersion
