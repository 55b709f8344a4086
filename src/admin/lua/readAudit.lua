--[[
  Reads the newest entries of one name from the deployment's audit trail (see includes/audit), through
  its list of ids. Ids whose entries are gone from the stream (trimmed by hand, say: the audit writes
  take their own trims out of the lists) are dropped from the list as they are met, and a list left
  empty goes.
  KEYS[1] audit stream  KEYS[2] audit index
  ARGV[1] name  ARGV[2] how many entries at most
  Returns the entries, newest first, as XRANGE gives them: { id, { field, value, ... } }.
]]
local ids = redis.call('HGET', KEYS[2], ARGV[1])
if not ids then
  return {}
end

-- An id as { ms, seq }, to compare.
local function parts(id)
  local dash = string.find(id, '-', 1, true)
  return tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
end

local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
local oldestMs, oldestSeq = 0, 0
if oldest then oldestMs, oldestSeq = parts(oldest[1]) end
local limit = tonumber(ARGV[2])
local entries, kept, listed = {}, {}, 0
for id in string.gmatch(ids, '[^ ]+') do
  listed = listed + 1
  local ms, seq = parts(id)
  -- The stream is trimmed from its oldest entry on: an id older than the oldest entry is gone.
  if oldest and (ms > oldestMs or (ms == oldestMs and seq >= oldestSeq)) then
    if #entries < limit then
      local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
      if entry then
        entries[#entries + 1] = entry
        kept[#kept + 1] = id
      end
    else
      kept[#kept + 1] = id
    end
  end
end
if #kept == 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
elseif #kept < listed then
  redis.call('HSET', KEYS[2], ARGV[1], table.concat(kept, ' '))
end
return entries
