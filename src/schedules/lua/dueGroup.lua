--[[
  A batch of the due index's entries at one instant: the members due exactly at ARGV[1] that sort after
  ARGV[2], at most ARGV[3] of them, in the index's order. A group due at one instant may be any size (a
  million hourly schedules all fall due at hh:00), so a leader reads it in batches; from the last member
  read, not from an offset, so that a member leaving the group between batches (a lane parked, a schedule
  removed) moves no other past the cursor, and no member comes twice.
  KEYS[1] due index
  ARGV[1] the instant (ms)  ARGV[2] the last member read, or '' for the first batch  ARGV[3] the most members to answer
]]
local key, cursor, limit = KEYS[1], ARGV[2], tonumber(ARGV[3])
-- Members of one score are in byte order (memcmp): so is this comparison, not Lua's locale-dependent '<'.
local function pastCursor(member)
  for i = 1, math.min(#member, #cursor) do
    local a, b = string.byte(member, i), string.byte(cursor, i)
    if a ~= b then return a > b end
  end
  return #member > #cursor
end
-- The group holds the ranks [first, last).
local first = redis.call('ZCOUNT', key, '-inf', '(' .. ARGV[1])
local last = first + redis.call('ZCOUNT', key, ARGV[1], ARGV[1])
if cursor ~= '' then
  -- The first rank of the group past the cursor, by bisection: O(log n) ranks read, whatever the group's size.
  local high = last
  while first < high do
    local middle = math.floor((first + high) / 2)
    if pastCursor(redis.call('ZRANGE', key, middle, middle)[1]) then high = middle else first = middle + 1 end
  end
end
if first >= last then return {} end
return redis.call('ZRANGE', key, first, math.min(first + limit, last) - 1)
