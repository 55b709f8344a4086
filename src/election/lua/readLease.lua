--[[
  Reads a lease record together with a fingerprint of everything stored in it, so that a record that
  cannot be decoded (fields missing or garbled) can still be replaced by compare-and-swap on its content.
  KEYS[1] lease hash
  Returns { fingerprint, field1, value1, field2, value2, ... }, or {} when the record does not exist.
]]
local fields = redis.call('HGETALL', KEYS[1])
if #fields == 0 then
  return {}
end
local reply = { redis.sha1hex(table.concat(fields, '\0')) }
for i = 1, #fields do
  reply[i + 1] = fields[i]
end
return reply
