--[[
  Registers a deployment (a leasebeat key prefix and lease name) as a user of one BullMQ prefix, and tells
  which other deployments use it: two deployments on one BullMQ prefix share its queues, and run each
  other's jobs. Stamped with Redis' own time, so every instance judges "recently" on one clock.
  KEYS[1] the registry (hash, in BullMQ's prefix): deployment → JSON { identity, at }
  ARGV[1] this deployment, '<prefix>/<lease>'  ARGV[2] this instance's identity
  ARGV[3] how long (ms) a deployment counts as present after its last write  ARGV[4] '1' to register even
          when another is present (a running instance refreshing), '0' to register only when none is
  Returns a flat list of the other deployments present: deployment, identity, ms since its last write, …
  (nothing registered when it is not empty and ARGV[4] is '0'). Entries gone quiet for ten times ARGV[3]
  are forgotten.
]]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local present = tonumber(ARGV[3])
local others = {}
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local deployment, entry = entries[i], cjson.decode(entries[i + 1])
  local age = now - tonumber(entry.at)
  if deployment ~= ARGV[1] then
    if age < present then
      others[#others + 1] = deployment
      others[#others + 1] = entry.identity
      others[#others + 1] = age
    elseif age > 10 * present then
      redis.call('HDEL', KEYS[1], deployment)
    end
  end
end
if #others == 0 or ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], ARGV[1], cjson.encode({ identity = ARGV[2], at = now }))
end
return others
