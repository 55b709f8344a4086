--[[
  Reads a lease record together with a fingerprint of everything stored in it, so that a record that
  cannot be decoded (fields missing or garbled) can still be replaced by compare-and-swap on its content.
  Also returns the server's replication id (its epoch, see updateLease.lua), to compare with the record's.
  KEYS[1] lease hash
  Returns { fingerprint, epoch, field1, value1, field2, value2, ... }, or {} when the record does not exist.
]]
local fields = redis.call('HGETALL', KEYS[1])
if #fields == 0 then
  return {}
end
local epoch = string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)')
local reply = { redis.sha1hex(table.concat(fields, '\0')), epoch }
for i = 1, #fields do
  reply[i + 2] = fields[i]
end
return reply
