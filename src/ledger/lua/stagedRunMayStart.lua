--[[
  Whether a worker may start a staged run (a tick added to BullMQ as a delayed job ahead of its due time)
  now, or must hand it back for a moment: the rules that stop a tick (a run-time pause, the catch-up
  policy of a leader that takes the job over after its due time) were applied to it by a leader only if
  one was alive to. It may start when
    - no take-back of it is under way (markUnstaging.lua): a leader decided it must not run, and only its
      pull has yet to land (BullMQ failing over may hold that up past the due time), and
    - for a runtime schedule's run, a leader has approved the schedule's stored version (markReviewed.lua)
      since the last upsert or remove: an edit holds the schedule's staged runs from its acknowledgement
      until a leader has marked those the new version does not owe (markUnstaging.lua), and a remove
      holds them until they are taken back, however late the leader hears of the write, and
    - its claim is confirmed (`enqueued`): a claim whose add is not (its WAIT unanswered while BullMQ fails
      over) may yet be taken back by its lane, and one with no record (lost in a failover) is recorded
      again by the next leader, and
    - its job is not paused since before its due time (a pause set after the tick lets it run, as it lets
      a run added at its tick), and
    - the current term is alive: its producer stamped the fence recently (pulse.lua), and
    - that term staged it (its lane takes a staged run back when the job is paused or rescheduled), or
      took the job over after the term that did and then applied its rules (a pause, the catch-up
      policy) to the runs earlier terms staged (markReviewed.lua).
  So a staged run whose leader died before its due time waits for the next leader's decision.
  A run that may start also gets the stop a leader asked of it (requestRunStop.lua), read here rather
  than in a round trip of its own: every run a burst starts would pay for it.
  KEYS[1] fence  KEYS[2] the job's state  KEYS[3] paused jobs  KEYS[4] the job's ledger
  KEYS[5] the run's stop request
  ARGV[1] the staging term's generation  ARGV[2] its transitions  ARGV[3] the job's name
  ARGV[4] the run's due time (ms)  ARGV[5] how recent (ms) the term's stamp must be for it to count as
  alive (its RenewDeadline: a leader that has not renewed for that long has stopped producing)
  ARGV[6] the run's tick (ms)  ARGV[7] '1' for a runtime schedule's run, else ''
  Returns { 1, stop request or nothing } to start, { 0 } to hand it back.
]]
--- @include "includes/staged-run"
if not stagedRunMayStart(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], serverNowMs()) then
  return { 0 }
end
return { 1, redis.call('GET', KEYS[5]) }
