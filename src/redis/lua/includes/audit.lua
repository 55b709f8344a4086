--[[
  The deployment's audit trail: one stream of entries (fields name, action, by, detail; always in this
  order, so that the stream stores the field names once per node), and a hash from each name to the ids
  of its newest entries, space-separated, newest first. The stream is trimmed here, oldest first, and
  each trimmed entry's id leaves its name's list in the same step: the index never outgrows the stream.
]]
-- Entries trimmed per write at most: one is enough at the cap, more bring a stream over it back down.
local AUDIT_TRIM_PER_WRITE = 10

-- The first `count` ids of a list (all of it when it has fewer).
local function firstIds(ids, count)
  local at = 0
  for _ = 1, count do
    at = string.find(ids, ' ', at + 1, true)
    if not at then return ids end
  end
  return string.sub(ids, 1, at - 1)
end

-- Takes the trimmed entry `id` out of the list of `name`. Its older entries were trimmed before it, so
-- when the list still has it, it is the last.
local function forgetAuditId(indexKey, name, id)
  local ids = redis.call('HGET', indexKey, name)
  if ids == id then
    redis.call('HDEL', indexKey, name)
  elseif ids and string.sub(ids, -#id - 1) == ' ' .. id then
    redis.call('HSET', indexKey, name, string.sub(ids, 1, -#id - 2))
  end
end

-- Appends an entry for `name`, lists it first among the name's newest `perName`, and trims the stream
-- to `maxLength`. Returns the entry's id.
local function recordAudit(streamKey, indexKey, maxLength, perName, name, action, by, detail)
  local id = redis.call('XADD', streamKey, '*', 'name', name, 'action', action, 'by', by, 'detail', detail)
  local ids = redis.call('HGET', indexKey, name)
  redis.call('HSET', indexKey, name, ids and firstIds(id .. ' ' .. ids, tonumber(perName)) or id)
  local excess = redis.call('XLEN', streamKey) - tonumber(maxLength)
  if excess > 0 then
    for _, entry in ipairs(redis.call('XRANGE', streamKey, '-', '+', 'COUNT', math.min(excess, AUDIT_TRIM_PER_WRITE))) do
      local fields = entry[2]
      for i = 1, #fields, 2 do
        if fields[i] == 'name' then forgetAuditId(indexKey, fields[i + 1], entry[1]) end
      end
      redis.call('XDEL', streamKey, entry[1])
    end
  end
  return id
end
