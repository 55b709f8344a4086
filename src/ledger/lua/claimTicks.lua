--[[
  Checks the caller's fencing token against the fence once, then decides the fate of each (job, nominal
  tick) given, in order, atomically: a batch of ticks due together costs one round trip. A job's records
  are written in nominal tick order with no holes: a new record is refused unless the job's previous
  tick (as the caller scheduled it) is already recorded, so `lastScheduledTick` is a contiguous watermark
  a new leader can plan its catch-up from. Every key carries the cluster's hash tag (one slot).
  KEYS[1] fence  KEYS[2] retired generations  KEYS[3] paused jobs
  then for the i-th tick (i from 0): KEYS[4+5i] ledger  KEYS[5+5i] ledger index  KEYS[6+5i] pending
          KEYS[7+5i] job state  KEYS[8+5i] skips
  ARGV[1] generation  ARGV[2] transitions
  then for the i-th tick: ARGV[3+6i] job name  ARGV[4+6i] tick (ms)  ARGV[5+6i] job id
          ARGV[6+6i] mode: 'enqueue' (claim to add now; also releases a buffered claim), 'buffer' (claim to
          add once the previous run finished), 'skip', or 'added' (claim to run whatever a pause says: the
          caller added the run already and its claim was lost in a failover, so it is in BullMQ and runs)
          ARGV[7+6i] skip reason  ARGV[8+6i] the job's previous nominal tick (ms), or '' when it has none
  Ledger states: 'claimed|<gen>|<transitions>|<jobId>' and 'buffered|<gen>|<transitions>|<jobId>' (both
  in the pending set until added), 'enqueued|<jobId>', 'skipped|<reason>'.
  Returns { -1 } when fenced (a newer term exists; nothing is written; the caller must stop enqueuing),
  else two entries per tick, in order, `code, detail` (detail '' when it has none):
    1, ''        claimed: add the job, then confirm it (lastJobId now names it: it counts as a run)
    2, ''        claimed earlier and never confirmed (whatever the mode asked now), or a buffered claim
                 released now: add it (same job id)
    4, ''        buffered: claimed (now or earlier), to be added once the previous run has finished
    0, state     already settled (enqueued, skipped, or buffered when asked to skip): nothing to do
                 (a settled tick the watermark had lost is counted in it again); also a tick a recorded
                 skipped range covers ('skipped|<its reason>'), which has no record of its own
    3, reason    recorded as skipped (reason may be 'paused' when the job is paused at run time)
    -2, last     refused: the previous tick is not recorded (the watermark `last` is older); a caller bug
]]
local generation, transitions = ARGV[1], tonumber(ARGV[2])
local count = (#ARGV - 2) / 6

--- @include "includes/fence"
if fenced(KEYS[1], KEYS[2], generation, transitions, count) then
  for i = 0, count - 1 do
    redis.call('HINCRBY', KEYS[7 + 5 * i], 'fenced', 1)
  end
  return { -1 }
end

-- The reason of a recorded skipped range that covers `tick`, if any. Recorded ranges never overlap
-- (skipRange.lua), so only the one starting last at or before the tick can.
local function coveringRange(skips, tick)
  local member = redis.call('ZREVRANGEBYSCORE', skips, tick, '-inf', 'LIMIT', 0, 1)[1]
  if not member then return nil end
  local range = cjson.decode(member)
  if tonumber(range.to) >= tick then return range.reason end
  return nil
end

local function claim(ledger, index, pending, state, skips, job, tick, jobId, mode, reason, previous)
  local paused = redis.call('HEXISTS', KEYS[3], job) == 1
  local added = mode == 'added'
  if mode == 'added' then
    mode, paused = 'enqueue', false
  end
  local claimedState = generation .. '|' .. transitions .. '|' .. jobId

  local function recordSkip(why)
    redis.call('HSET', ledger, tick, 'skipped|' .. why)
    redis.call('HINCRBY', state, 'skipped:' .. why, 1)
    return 3, why
  end

  -- The newest run (added or about to be): the next overlap decision waits for it.
  local function becomeLastRun()
    redis.call('HSET', state, 'lastJobId', jobId, 'lastJobTick', tick)
  end

  local existing = redis.call('HGET', ledger, tick)
  local last = redis.call('HGET', state, 'lastScheduledTick')
  if existing then
    -- A record the watermark does not count (its claim was lost in a failover and a later write of the
    -- same tick was not): count it now, when the caller walks to it in order, or every later claim of
    -- the job would be refused as a hole by a record that no longer tells it is there.
    local inOrder = last and previous ~= '' and tonumber(last) >= tonumber(previous) and tonumber(tick) > tonumber(last)
    if inOrder or (not last and previous == '') then
      redis.call('ZADD', index, tick, tick)
      redis.call('HSET', state, 'lastScheduledTick', tick)
    end
    -- A claim to run stands, whatever is asked now: a caller retrying a claim whose reply it lost (or
    -- whose replica WAIT failed) decides the tick again and may take its own claim for the previous,
    -- unfinished run and ask to skip or buffer it. Its run may even be in BullMQ already.
    if string.sub(existing, 1, 8) == 'claimed|' then
      redis.call('HSET', ledger, tick, 'claimed|' .. claimedState)
      return 2, ''
    end
    -- Likewise a buffered claim asked to buffer again: the caller holds it as buffered.
    if mode == 'buffer' and string.sub(existing, 1, 9) == 'buffered|' then
      redis.call('HSET', ledger, tick, 'buffered|' .. claimedState)
      return 4, ''
    end
    if mode == 'enqueue' and string.sub(existing, 1, 9) == 'buffered|' then
      if paused then
        redis.call('ZREM', pending, tick)
        return recordSkip('paused')
      end
      redis.call('HSET', ledger, tick, 'claimed|' .. claimedState)
      becomeLastRun()
      return 2, ''
    end
    return 0, existing
  end

  if previous ~= '' and last and tonumber(last) < tonumber(previous) then
    return -2, last
  end

  -- Behind the watermark with no record of its own: another writer of the job (a removed schedule's
  -- stopping lane beside its next life's lane, or the removed-jobs sweep) recorded a range over it after
  -- this caller read the watermark. The range is the tick's record; a claim now would run a tick the
  -- ledger says was skipped. Not a run already in BullMQ ('added'): it runs, and its claim must say so.
  if not added and last and tonumber(tick) <= tonumber(last) then
    local covered = coveringRange(skips, tonumber(tick))
    if covered then
      return 0, 'skipped|' .. covered
    end
  end

  if mode ~= 'skip' and paused then
    mode, reason = 'skip', 'paused'
  end

  redis.call('ZADD', index, tick, tick)
  if not last or tonumber(tick) > tonumber(last) then
    redis.call('HSET', state, 'lastScheduledTick', tick)
  end
  if mode == 'skip' then
    return recordSkip(reason)
  end
  redis.call('ZADD', pending, tick, tick)
  if mode == 'buffer' then
    redis.call('HSET', ledger, tick, 'buffered|' .. claimedState)
    return 4, ''
  end
  redis.call('HSET', ledger, tick, 'claimed|' .. claimedState)
  becomeLastRun()
  return 1, ''
end

local results = {}
for i = 0, count - 1 do
  local k, a = 4 + 5 * i, 3 + 6 * i
  local code, detail = claim(KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4],
    ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5])
  results[#results + 1] = code
  results[#results + 1] = detail
end
return results
