--[[
  What a new leader reads of each job it takes over, for many jobs in one round trip; it also records,
  once per job, when leaders started owing the job its ticks (`scheduledSince`, the first takeover that
  saw it). Unfenced: it decides no tick.
  KEYS[1] paused jobs; for the i-th job (i from 0): KEYS[2+5i] ledger  KEYS[3+5i] pending
          KEYS[4+5i] job state  KEYS[5+5i] ledger index  KEYS[6+5i] skipped ranges
  ARGV[1] now (ms); for the i-th job: ARGV[2+2i] its name  ARGV[3+2i] how far ahead of its due time a
          run may be staged (the horizon plus the job's largest jitter): every run an earlier term staged
          and that may not have started lies within that of the older of now and the watermark
  Returns, per job, { scheduledSince, paused (0/1), job state (HGETALL, flat), pending ticks with their
  ledger states (flat: tick, state, ...), ticks recorded within that reach with their states (flat), the
  newest tick recorded at or before now (a claim's, or the end of a skipped range; '' when none) }.
  The last tells where the job's due ticks stand when staging has moved the watermark past now.
]]
local now = ARGV[1]
local function withStates(ledger, ticks)
  local flat = {}
  for _, tick in ipairs(ticks) do
    flat[#flat + 1] = tick
    flat[#flat + 1] = redis.call('HGET', ledger, tick) or ''
  end
  return flat
end
local results = {}
local function newestDue(index, skips)
  local newest = tonumber(redis.call('ZREVRANGEBYSCORE', index, now, '-inf', 'LIMIT', 0, 1)[1])
  local range = redis.call('ZREVRANGEBYSCORE', skips, now, '-inf', 'LIMIT', 0, 1)[1]
  if range then
    local to = math.min(tonumber(cjson.decode(range).to), tonumber(now))
    if not newest or to > newest then newest = to end
  end
  return newest and string.format('%d', newest) or ''
end
for i = 0, (#ARGV - 1) / 2 - 1 do
  local ledger, pending, state, index = KEYS[2 + 5 * i], KEYS[3 + 5 * i], KEYS[4 + 5 * i], KEYS[5 + 5 * i]
  redis.call('HSETNX', state, 'scheduledSince', now)
  local watermark = tonumber(redis.call('HGET', state, 'lastScheduledTick') or now)
  local since = math.min(tonumber(now), watermark) - tonumber(ARGV[3 + 2 * i])
  results[#results + 1] = {
    redis.call('HGET', state, 'scheduledSince'),
    redis.call('HEXISTS', KEYS[1], ARGV[2 + 2 * i]),
    redis.call('HGETALL', state),
    withStates(ledger, redis.call('ZRANGE', pending, 0, -1)),
    withStates(ledger, redis.call('ZRANGEBYSCORE', index, since, '+inf')),
    newestDue(index, KEYS[6 + 5 * i]),
  }
end
return results
