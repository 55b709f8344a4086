--[[
  The versions of a schedule that writes replaced or removed while a leader may still owe their ticks a
  record, oldest first: one hash field per schedule, a JSON array of [endedAt (ms, as a string), 'edit' or
  'remove', the replaced record]. Each write that ends a version appends it, so that a takeover after
  several edits with no leader counts each version's ticks by that version, and a lane that hears of several
  writes at once decides each held staged run by the version in force at its tick (takeUpRevision): an
  edit storm (bullmq #3085) writes tens of versions while a leader fails over. At most MAX_REPLACED are
  kept: past that the oldest goes, and its span is counted by the next one (a bound on memory, documented).
]]
local MAX_REPLACED = 64

-- The chain stored for `id` (empty when none). An entry of the one-version format earlier builds wrote,
-- "<endedAt>|edit|<record>" or "<endedAt>|remove|<record>", reads as a chain of that one version.
local function readReplaced(key, id)
  local stored = redis.call('HGET', key, id)
  if not stored then return {} end
  if string.sub(stored, 1, 1) == '[' then return cjson.decode(stored) end
  local first = string.find(stored, '|', 1, true)
  local second = string.find(stored, '|', first + 1, true)
  return { { string.sub(stored, 1, first - 1), string.sub(stored, first + 1, second - 1), string.sub(stored, second + 1) } }
end

local function appendReplaced(key, id, endedAt, kind, record)
  local chain = readReplaced(key, id)
  chain[#chain + 1] = { tostring(endedAt), kind, record }
  while #chain > MAX_REPLACED do table.remove(chain, 1) end
  redis.call('HSET', key, id, cjson.encode(chain))
end
