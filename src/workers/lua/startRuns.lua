--[[
  Workers' takes of runs of one queue, each checked on the server that will record it against what the
  run's own record says (see src/workers/run-records.ts). The takes a worker makes in one turn share this
  script: one round trip for a burst's runs, not one each. In BullMQ's slot, on each job's hash, where the
  run's history lives and dies with the job.
  KEYS[2i-1] run i's job hash  KEYS[2i] its lock
  ARGV[2i-1] the worker's lock token for run i  ARGV[2i] this start, as leasebeatRunner records it: '<ms>|<identity>'
  Fields of the job hash that leasebeat keeps:
    leasebeatStarts  how many times a leasebeat worker started the run's handler
    leasebeatRunner  who started it last: '<ms>|<identity>'
    leasebeatFinish  the last finish, as JSON: { s = leasebeatStarts when it finished, stc = BullMQ's
                     stalled count then, atm = its attempts made then, o = 'completed' | 'failed',
                     f = true when the failure was final (no retry left), v = the return value as JSON
                     text, or the error's message }
  Returns one reply per run, in order:
    { -1 }               the lock is not ours on this server: it does not have our take (a failover lost
                         it, or the lock expired): do not run
    { 1, kind, runner, starts }
                         start the handler; the start is counted (starts: leasebeatStarts now). kind: 'first'; 'retry' (BullMQ retries a
                         failed attempt); 'operator-retry' (a run that failed for good, retried by an
                         operator); 'runner-lost' (the last start never finished: its process died, or
                         it lost its lock; runner is that start's leasebeatRunner); 'continued' (the
                         handler moved the job and it came back, as it meant to). runner is '' otherwise
    { 2, finish }        the run finished, and the record of its finish was lost (a failover brought the
                         finished run back through stalled-job recovery): record that finish again, do
                         not run
    { 3, finish }        a completed run was put back to run (an operator's retry from Bull Board or the
                         BullMQ API): refused; record its completion again, do not run
]]
--- @include "includes/take-run"
local replies = {}
for i = 1, #KEYS / 2 do
  replies[i] = takeRun(KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i - 1], ARGV[2 * i])
end
return replies
