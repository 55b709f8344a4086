--[[
  Registers an instance of a deployment (a leasebeat key prefix and lease name) as a user of one BullMQ
  prefix, and tells which instances of other deployments use it: two deployments on one BullMQ prefix
  share its queues, and run each other's jobs. Stamped with Redis' own time, so every instance judges
  "recently" on one clock.
  KEYS[1] the registry (hash, in BullMQ's prefix): JSON [deployment, identity] → Redis ms of its last write
  ARGV[1] this instance's field, JSON [deployment, identity] as the caller writes it (the leave deletes
          it by the same text)  ARGV[2] this deployment, '<prefix>/<lease>'
  ARGV[3] how long (ms) an instance counts as present after its last write  ARGV[4] '1' to register even
          when another deployment is present (a running instance refreshing), '0' to register only when none is
  Returns a flat list of the other deployments' instances present: deployment, identity, ms since its last
  write, … (nothing registered when it is not empty and ARGV[4] is '0'). Instances gone quiet for ten
  times ARGV[3] are forgotten.
]]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local present = tonumber(ARGV[3])
local others = {}
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local who = cjson.decode(entries[i])
  local age = now - tonumber(entries[i + 1])
  if age > 10 * present then
    redis.call('HDEL', KEYS[1], entries[i])
  elseif who[1] ~= ARGV[2] and age < present then
    others[#others + 1] = who[1]
    others[#others + 1] = who[2]
    others[#others + 1] = age
  end
end
if #others == 0 or ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], ARGV[1], now)
end
return others
