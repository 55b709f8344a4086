--[[
  The versions of a schedule that writes replaced or removed while a leader may still owe their ticks a
  record, oldest first: one hash field per schedule, a JSON array of [endedAt (ms, as a string), 'edit' or
  'remove', the replaced record]. Each write that ends a version appends it, so that a takeover after
  several edits with no leader counts each version's ticks by that version. At most MAX_REPLACED are kept:
  past that the oldest goes, and its span is counted by the next one (a bound on memory, documented).
]]
local MAX_REPLACED = 8

local function appendReplaced(key, id, endedAt, kind, record)
  local chain = {}
  local stored = redis.call('HGET', key, id)
  if stored then chain = cjson.decode(stored) end
  chain[#chain + 1] = { tostring(endedAt), kind, record }
  while #chain > MAX_REPLACED do table.remove(chain, 1) end
  redis.call('HSET', key, id, cjson.encode(chain))
end
