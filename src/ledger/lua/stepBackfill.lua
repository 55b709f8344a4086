--[[
  One step of a backfill (`leasebeat backfill`), under the fence: decides ticks of the range in order,
  and moves the backfill's progress (kept in its hash, so that the next leader resumes it) in the same
  atomic step, so that no tick is decided, or counted, twice across any number of leaders.
  A backfill never touches the live lane's bookkeeping: its claims go to a pending set of their own
  (the live takeover must not finish them as late live ticks, nor skip them by the catch-up policy), and
  it never moves `lastScheduledTick`, `lastJobId` or the live pending set: it decides only ticks at least
  a staging reach behind the older of the watermark and now, which the ledger's no-hole order has long
  walked past and no takeover reads as staged runs.
  KEYS[1] fence  KEYS[2] retired generations  KEYS[3] ledger  KEYS[4] ledger index  KEYS[5] skips
  KEYS[6] job state  KEYS[7] backfill pending  KEYS[8] the backfill  KEYS[9] backfill queue
  KEYS[10] paused jobs  KEYS[11..] the job's other backfills (their decided spans)
  ARGV[1] generation  ARGV[2] transitions  ARGV[3] mode: 'list' (decide the ticks given that need no
          run, stop at the first that does), 'claim' (claim each tick given, in order, to add it; a batch
          of the backfill, or the claims an earlier term left pending), 'skip' (record the one tick given
          as skipped: overlap), 'finish' (end the backfill)
  ARGV[4] '1' to run ticks recorded skipped  ARGV[5] reach (ms): ticks later than the older of the
          watermark and now, less this, are the live lane's (its staging horizon and jitter: its takeover
          reads the records there as its staged runs; see takeOver.lua)  ARGV[6] now (ms)
  ARGV[7] job name  ARGV[8] finish: '' (done) or why it failed
  then pairs: ARGV[9+2i] tick (ms)  ARGV[10+2i] its run's job id
  Fates, counted in the backfill's hash: `ran` (a record of a run: enqueued, claimed, buffered, being
  taken back), `skipped` (a skipped record or range), `pruned` (no record where the ledger would hold
  one: its record was pruned, so it may have run), `later` (the live lane's), `enqueued` (claimed by this
  backfill), `overlapSkipped` (recorded `skipped|overlap` by this backfill).
  Returns:
    { -1 }               fenced: nothing written
    { -3 }               no such backfill
    { -4, state }        the backfill has ended (done or failed): nothing to do
    { -2 }               finish refused: a claim of a backfill is still pending
    { 1, cursor, tick }  list: `tick` needs a run (ticks before it were decided)
    { 6, cursor, outcome per tick given, in order }  claim: `claimed` (add it), `reclaimed` (a backfill's
                         claim of an earlier term, rewritten for this one: add it again), `paused` (the
                         job is paused at run time: nothing written for it nor for any tick after it,
                         wait), or the fate it needed no run as (counted; `run` when the cursor was past it)
    { 3, cursor }        skip: recorded skipped
    { 5 }                skip: the job is paused at run time: nothing written, wait
    { 0, cursor, fate }  list: every tick given decided; skip: the tick needed no run after all (its fate
                         is counted); finish: ended
]]
--- @include "includes/fence"
if fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], 1) then
  return { -1 }
end
local ledger, index, skips, jobState, pending, backfill = KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local mode = ARGV[3]
local state = redis.call('HGET', backfill, 'state')
if not state then return { -3 } end
if state == 'done' or state == 'failed' then return { -4, state } end

if mode == 'finish' then
  if redis.call('ZCARD', pending) > 0 then return { -2 } end
  if ARGV[8] == '' then
    redis.call('HSET', backfill, 'state', 'done')
  else
    redis.call('HSET', backfill, 'state', 'failed', 'error', ARGV[8])
  end
  redis.call('ZREM', KEYS[9], redis.call('HGET', backfill, 'id'))
  return { 0, redis.call('HGET', backfill, 'cursor'), '' }
end

redis.call('HSET', backfill, 'state', 'running', 'term', ARGV[1] .. '/' .. ARGV[2])
local cursor = tonumber(redis.call('HGET', backfill, 'cursor'))
local watermark = tonumber(redis.call('HGET', jobState, 'lastScheduledTick') or '')
local since = tonumber(redis.call('HGET', jobState, 'scheduledSince') or '')
local includeSkipped = ARGV[4] == '1'
-- Both only grow, so a tick behind this edge stays behind every later takeover's reach.
local edge = watermark and math.min(watermark, tonumber(ARGV[6])) - tonumber(ARGV[5])

-- The reason of the skipped range covering the tick, if one does. Recorded ranges never overlap
-- (skipRange.lua): only the one starting last at or before the tick can cover it.
local function rangeReason(tick)
  local member = redis.call('ZREVRANGEBYSCORE', skips, tick, '-inf', 'LIMIT', 0, 1)[1]
  if member == nil then return nil end
  local range = cjson.decode(member)
  if tonumber(range.to) >= tick then return range.reason end
  return nil
end

local function decidedByAnother(tick)
  for k = 11, #KEYS do
    local span = redis.call('HMGET', KEYS[k], 'from', 'cursor')
    if span[1] and span[2] and tonumber(span[1]) <= tick and tick <= tonumber(span[2]) then return true end
  end
  return false
end

-- 'ours' (a backfill's pending claim), 'run' (needs a run), or the fate it is counted as; and for a
-- skipped tick, the reason it was skipped for.
local function fate(tick)
  local record = redis.call('HGET', ledger, tick)
  local base
  local skippedFor = nil
  if record then
    local kind = string.match(record, '^(%a+)|')
    if kind == 'claimed' and redis.call('ZSCORE', pending, tick) then return 'ours' end
    if kind ~= 'skipped' then return 'ran' end
    skippedFor = string.sub(record, 9)
  else
    skippedFor = rangeReason(tick)
  end
  if skippedFor then
    base = includeSkipped and 'run' or 'skipped'
  elseif (since and tick >= since) or decidedByAnother(tick) then
    -- From `scheduledSince` on, the live lane recorded every tick (the ledger has no holes), and a tick
    -- another backfill decided was recorded by it: no record there means the record was pruned, and the
    -- tick may have run. It is never run again.
    return 'pruned'
  else
    base = 'run'
  end
  -- Near the watermark the live lane's takeover reads records as its staged runs, and past it the ticks
  -- are its own to decide: a backfill leaves them to it.
  if base == 'run' and (not edge or tick > edge) then return 'later' end
  return base, skippedFor
end

local function decided(tick, counter)
  if tick <= cursor then return end
  cursor = tick
  redis.call('HSET', backfill, 'cursor', string.format('%d', tick))
  redis.call('HINCRBY', backfill, 'done', 1)
  redis.call('HINCRBY', backfill, counter, 1)
end

if mode == 'list' then
  for i = 9, #ARGV, 2 do
    local tick = tonumber(ARGV[i])
    if tick > cursor then
      local f = fate(tick)
      if f == 'run' or f == 'ours' then return { 1, string.format('%d', cursor), ARGV[i] } end
      decided(tick, f)
    end
  end
  return { 0, string.format('%d', cursor), '' }
end

local paused = redis.call('HEXISTS', KEYS[10], ARGV[7]) == 1
local function claimRecord(jobId)
  return 'claimed|' .. ARGV[1] .. '|' .. ARGV[2] .. '|' .. jobId
end

-- The claim of one tick: see the outcomes of 'claim' above.
local function claim(tickText, jobId)
  local tick = tonumber(tickText)
  local f, skippedFor = fate(tick)
  if f == 'ours' then
    redis.call('HSET', ledger, tickText, claimRecord(jobId))
    return 'reclaimed'
  end
  if f ~= 'run' or tick <= cursor then
    decided(tick, f)
    return f
  end
  -- A pause at run time holds the backfill as it holds the live ticks; nothing is decided meanwhile.
  if paused then return 'paused' end
  -- Indexed like every record, so retention prunes it; pruneLedger.lua leaves it while it is pending.
  redis.call('ZADD', index, tickText, tickText)
  redis.call('HSET', ledger, tickText, claimRecord(jobId))
  redis.call('ZADD', pending, tickText, tickText)
  redis.call('HSET', backfill, 'lastRunId', jobId)
  -- A skipped tick run now (includeSkipped) is skipped no more: the job's count of that reason drops.
  if skippedFor then redis.call('HINCRBY', jobState, 'skipped:' .. skippedFor, -1) end
  decided(tick, 'enqueued')
  return 'claimed'
end

if mode == 'claim' then
  local reply = { 6, '' }
  for i = 9, #ARGV, 2 do
    -- In order, and none past a paused one: the cursor must not pass a tick left undecided.
    local outcome = reply[#reply] == 'paused' and 'paused' or claim(ARGV[i], ARGV[i + 1])
    reply[#reply + 1] = outcome
  end
  reply[2] = string.format('%d', cursor)
  return reply
end

-- 'skip': the one tick given.
local tickText = ARGV[9]
local tick = tonumber(tickText)
local f, skippedFor = fate(tick)
if f ~= 'run' or tick <= cursor then
  if f ~= 'ours' then decided(tick, f) end
  return { 0, string.format('%d', cursor), f }
end
if paused then return { 5 } end
redis.call('ZADD', index, tickText, tickText)
redis.call('HSET', ledger, tickText, 'skipped|overlap')
-- A skipped tick (includeSkipped) skipped again is counted once, for its new reason.
if skippedFor then redis.call('HINCRBY', jobState, 'skipped:' .. skippedFor, -1) end
redis.call('HINCRBY', jobState, 'skipped:overlap', 1)
decided(tick, 'overlapSkipped')
return { 3, string.format('%d', cursor) }
