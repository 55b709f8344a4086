--[[
  Forgets the versions of a schedule that writes up to `endedAt` replaced or removed, once a leader has
  recorded the ticks they owed; those later writes ended stay (see includes/replaced).
  KEYS[1] replaced versions
  ARGV[1] id  ARGV[2] the time (ms) of the newest write whose replaced version is accounted for
  Returns how many versions were forgotten.
]]
--- @include "includes/replaced"
local chain, kept = readReplaced(KEYS[1], ARGV[1]), {}
if #chain == 0 then
  return 0
end
for _, entry in ipairs(chain) do
  if tonumber(entry[1]) > tonumber(ARGV[2]) then kept[#kept + 1] = entry end
end
if #kept == 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
elseif #kept < #chain then
  redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(kept))
end
return #chain - #kept
