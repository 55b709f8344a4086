--[[
  Writes a schedule's spec, as one new version, tells the change feed, and records who wrote which
  version in the audit trail. Writing the spec that is already stored changes nothing (no new version,
  no feed or audit entry), so any number of instances upserting the same schedules at boot leave one
  version between them. With an expected version, the write is made only if the stored version is that
  one (0: only if the schedule does not exist yet).
  KEYS[1] specs (hash: id -> "<version>|<updatedAt>|<createdAt>|<updatedBy>|<spec JSON>", times in ms)
  KEYS[2] ids (sorted set)
  KEYS[3] change feed (stream)
  KEYS[4] due index (sorted set: id -> when a leader must look at it next)
  KEYS[5] replaced versions (hash: id -> JSON array, see includes/replaced)
  KEYS[6] audit stream  KEYS[7] audit index (see redis/lua/includes/audit)
  KEYS[8] the schedule's job state (its ledger's; field `schedule`: the stored version's revision, once
  a lane has taken the schedule over)
  ARGV[1] id  ARGV[2] spec JSON  ARGV[3] expected version ('' for any)  ARGV[4] who
  ARGV[5] the feed's approximate length cap
  ARGV[6] when a leader must look at the new version at the latest (ms; its first tick, as the writer
  computed it): '' for now
  ARGV[7] the audit stream's length cap  ARGV[8] how many ids the audit index keeps per name
  Returns { version, 1 } when written, { version, 0 } when the stored spec was the same, and
  { stored version, -1 } when the expected version did not match (nothing is written).
]]
--- @include "includes/replaced"
--- @include "../../redis/lua/includes/audit"
local id, spec, expected = ARGV[1], ARGV[2], ARGV[3]
local stored = redis.call('HGET', KEYS[1], id)
local version = 0
-- The write's time is the server's (scripts replicate their effects, so TIME is allowed here).
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local created = now
if stored then
  -- "<version>|<updatedAt>|<createdAt>|<by>|<spec>": who wrote it cannot hold a '|' (see ScheduleStore).
  local first = string.find(stored, '|', 1, true)
  local second = string.find(stored, '|', first + 1, true)
  local third = string.find(stored, '|', second + 1, true)
  local fourth = string.find(stored, '|', third + 1, true)
  version = tonumber(string.sub(stored, 1, first - 1))
  created = string.sub(stored, second + 1, third - 1)
  if (expected == '' or tonumber(expected) == version) and string.sub(stored, fourth + 1) == spec then
    return { version, 0 }
  end
end
if expected ~= '' and tonumber(expected) ~= version then
  return { version, -1 }
end
version = version + 1
-- The version replaced, and when: the ticks it owed that no leader recorded are still to be accounted for.
if stored then
  appendReplaced(KEYS[5], id, now, 'edit', stored)
end
-- The record's fields are split on '|': a name holding one would shift the spec.
local by = string.gsub(ARGV[4], '|', '/')
redis.call('HSET', KEYS[1], id, version .. '|' .. now .. '|' .. created .. '|' .. by .. '|' .. spec)
-- Workers hold the schedule's staged runs from this write until a leader has approved this revision
-- (stagedRunMayStart.lua): a run the new version does not owe must not start, however late the leader hears.
-- A schedule new to its ledger (no state yet: no lane took it over) has no staged run, and no key is made
-- for it: a bulk import of a million schedules would pay one each.
if stored or redis.call('EXISTS', KEYS[8]) == 1 then
  redis.call('HSET', KEYS[8], 'schedule', version .. '|' .. now)
end
redis.call('ZADD', KEYS[2], 0, id)
-- Due by the new version's first tick, or now (a live lane also hears of it on the feed). LT keeps an
-- earlier instant: a tick of the old version may still be owed before then.
local review = now
if ARGV[6] ~= '' and tonumber(ARGV[6]) > now then review = ARGV[6] end
redis.call('ZADD', KEYS[4], 'LT', review, id)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'id', id, 'version', version)
-- The version names the spec: the record holds the newest, and a copy in each entry would cost up to 16 KiB.
recordAudit(KEYS[6], KEYS[7], ARGV[7], ARGV[8], id, 'upsert', ARGV[4], '{"version":' .. version .. '}')
return { version, 1 }
