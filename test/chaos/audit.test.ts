import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { audit, COMPLETION_SLACK_MS, laneStalls, leaseInvariants, secondRuns, serialRuns } from '../../scripts/chaos/audit.js';
import type { ExecutedFault } from '../../scripts/chaos/faults.js';
import type { RunEndRecord, RunRecord } from '../../scripts/chaos/jobs/_record.js';
import type { LeaseRecordWrite } from '../../scripts/chaos/lease-history.js';
import { CHAOS_TIMINGS } from '../../scripts/chaos/suite.js';
import { KeySpace } from '../../src/redis/keys.js';
import { tickJobId } from '../../src/ledger/job-data.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { useRedis } from '../support/redis-server.js';
import { scheduledJob } from '../support/scheduled-job.js';

const LEASE_MS = 2000;

/** A lease write at `at` ms by `holder` ('' for a release) with `transitions`, in generation `g1` unless told. */
function write(at: number, holder: string, transitions: number, generation = 'g1'): LeaseRecordWrite {
  return { at, op: 'update', holder, transitions, generation, version: String(at), durationMs: holder === '' ? 1000 : LEASE_MS, acquire: 0, renew: at };
}

describe('chaos audit: lease invariants from the lock history', () => {
  it('flags failure 1 of issue 9: a resumed leader writes its old term over a live lease, and the term is reused later', () => {
    // A renews term 7, is frozen; B takes over with 8 after A's lease ran out; A resumes and writes term 7
    // over B's live lease; later B takes term 8 again.
    const writes = [
      write(0, 'a', 7), write(250, 'a', 7),
      write(2400, 'b', 8), write(2650, 'b', 8),
      write(2700, 'a', 7), write(2950, 'a', 7),
      write(5000, 'b', 8),
    ];
    const { l1, l2, l3, holderChanges } = leaseInvariants({ writes, source: 'api' });
    assert.equal(holderChanges, 3);
    assert.equal(l1.count, 1, l1.items.join('\n'));
    assert.match(l1.items[0]!, /transitions went from 8 to 7/);
    assert.equal(l2.count, 2, l2.items.join('\n'));
    assert.match(l2.items[0]!, /token g1#7 of a held again after token g1#8/);
    assert.match(l2.items[1]!, /token g1#8 of b held again after token g1#7/);
    // a's take-back 50 ms after b's renewal; b's retake 2050 ms after a's last change is allowed.
    assert.equal(l3.count, 1, l3.items.join('\n'));
    assert.match(l3.items[0]!, /a wrote the lease 50 ms after b's last change/);
    assert.equal(l3.checked, 3);
    assert.equal(l1.checked, writes.length - 1);
  });

  it('a rewrite of an unchanged record does not extend the lease: followers count from when its content last changed', () => {
    // a renews at 0; its write is retried with the same content at 1500 (the first one's replica WAIT
    // failed); b takes over 2000 ms after the content changed. With a new renewTime at 1500, the same
    // takeover is 500 ms early.
    const same = { ...write(1500, 'a', 3), renew: 0 };
    const unchanged = leaseInvariants({ writes: [write(0, 'a', 3), same, write(2001, 'b', 4)], source: 'stream' });
    assert.equal(unchanged.l3.count, 0, unchanged.l3.items.join('\n'));
    const renewed = leaseInvariants({ writes: [write(0, 'a', 3), write(1500, 'a', 3), write(2001, 'b', 4)], source: 'stream' });
    assert.equal(renewed.l3.count, 1);
    assert.match(renewed.l3.items[0]!, /b wrote the lease 501 ms after a's last change/);
  });

  it('passes a healthy history: renewals, a release taken over at once, a takeover after the lease, a recreated record', () => {
    const writes = [
      write(0, 'a', 0), write(250, 'a', 0), write(500, 'a', 0),
      write(600, '', 0), write(650, 'b', 1), write(900, 'b', 1),
      write(2901, 'c', 2), write(3150, 'c', 2),
      // Recreated (new generation): transitions start again; the new generation makes new tokens.
      { ...write(3200, 'c', 0, 'g2'), op: 'create' as const },
      write(3450, 'c', 0, 'g2'),
    ];
    const { l1, l2, l3, holderChanges } = leaseInvariants({ writes, source: 'stream' });
    for (const v of [l1, l2, l3]) assert.equal(v.count, 0, v.items.join('\n'));
    assert.equal(holderChanges, 1, 'a release is not a holder change from a live lease');
    assert.equal(l1.checked, writes.length - 2, 'pairs across generations are not compared');
    assert.equal(l2.checked, writes.length - 1, 'every write with a holder');
  });

  it('a sampled history is judged with the sampling period as tolerance', () => {
    const writes = [write(0, 'a', 0), write(1970, 'b', 1)];
    assert.equal(leaseInvariants({ writes, source: 'api' }).l3.count, 1);
    assert.equal(leaseInvariants({ writes, source: 'sampled' }).l3.count, 0);
  });
});

describe('chaos audit: runs of skip / bufferOne jobs', () => {
  const job = { name: 'buffered', overlap: 'bufferOne' as const };
  let started = 0;
  function run(tick: number, identity: string, startedAt: number): RunRecord {
    started++;
    return { job: job.name, jobId: `buffered@${tick}`, tick, timestamp: started, token: { generation: 'g', leaderTransitions: 1 }, pid: 1, identity, attemptsMade: 0, startedAt };
  }
  const end = (r: RunRecord, finishedAt: number): RunEndRecord => ({ jobId: r.jobId, identity: r.identity, startedAt: r.startedAt, finishedAt });

  it('flags failure 3 of issue 9: two runs at once on two processes, and a buffered tick run after a later one', () => {
    const r58 = run(58_000, 'p1', 58_010);
    const r62 = run(62_000, 'p1', 62_010);
    const r60 = run(60_000, 'p2', 62_012);
    const violations = serialRuns([job], [r58, r62, r60], [end(r58, 60_300), end(r62, 64_300), end(r60, 64_310)], new Map());
    assert.equal(violations.checked, 3);
    assert.equal(violations.count, 2, violations.items.join('\n'));
    assert.match(violations.items[0]!, /started on p2 .* while tick .*:01:02.000Z ran on p1/);
    assert.match(violations.items[1]!, /ran at .* after tick .*:01:02.000Z had run/);
  });

  it('a run cut off by a crash ends when its process exited; its re-run and the next tick are in order', () => {
    const cut = run(10_000, 'p1', 10_010);
    const rerun = run(10_000, 'p2', 45_000);
    const next = run(12_000, 'p2', 47_400);
    const violations = serialRuns([job, { name: 'other', overlap: 'allow' }], [cut, rerun, next], [end(rerun, 47_300), end(next, 49_700)], new Map([['p1', 11_000]]));
    assert.equal(violations.count, 0, violations.items.join('\n'));
    assert.equal(violations.checked, 3);
    // Without the exit time the cut-off run would still be running.
    assert.equal(serialRuns([job], [cut, rerun], [end(rerun, 47_300)], new Map()).count, 1);
  });
});

/** A run of `jobId` on `identity` started at `startedAt` (ms). */
function runOf(jobId: string, identity: string, startedAt: number): RunRecord {
  return { job: jobId.split('@')[0]!, jobId, tick: Number(jobId.split('@')[1]), timestamp: 1, token: { generation: 'g', leaderTransitions: 1 }, pid: 1, identity, attemptsMade: 0, startedAt };
}

/** A fault of the log: `kind` at [startedAt, endedAt], aimed at `target` (an identity) or at a job id's run. */
function faultOf(index: number, kind: ExecutedFault['kind'], startedAt: number, endedAt: number, aim: { target?: string; jobId?: string } = {}): ExecutedFault {
  return {
    index, kind, wasLeader: false, startedAt, endedAt, detail: 'injected',
    ...(aim.target ? { target: aim.target } : {}),
    ...(aim.jobId ? { aim: { event: 'a handler returned', eventAt: startedAt, killedAt: startedAt + 2, gapMs: 2, heldMs: 6, port: 7000, jobId: aim.jobId } } : {}),
  };
}

describe('chaos audit: second runs of one job id', () => {
  const id = 'every-second@10000';

  it("flags issue 18's re-run: completion lost in a failover of BullMQ's primary, run again by stalled-job recovery on a live process", () => {
    // Ran on p1 at 10 s; BullMQ's primary killed 3 ms after the handler returned; run again 36.7 s later, attemptsMade 0 both times.
    const runs = [runOf(id, 'p1', 10_001), runOf('every-second@11000', 'p2', 11_001), runOf(id, 'p1', 46_701)];
    const faults = [faultOf(0, 'kill', 2_000, 3_000, { target: 'p3' }), faultOf(1, 'bull-primary-kill-after-handler', 10_004, 14_000, { jobId: id }), faultOf(2, 'primary-kill', 20_000, 25_000)];
    const { violations, duplicates, explained } = secondRuns(runs, [], new Map([['p3', 2_000]]), faults);
    assert.equal(violations.checked, 3);
    assert.equal(violations.count, 1, violations.items.join('\n'));
    assert.match(violations.items[0]!, /^DUPLICATE every-second@10000: ran on p1 .* 36700 ms after its run on p1 .*whose process was still running; fault in between: #1 bull-primary-kill-after-handler \(aimed at this run\)/);
    assert.deepEqual(explained, []);
    assert.deepEqual(duplicates[0]!.cause, { fault: 1, kind: 'bull-primary-kill-after-handler', aimedAtThis: true });
  });

  it('a second run is explained, not flagged, when the process of the first died before that run could finish', () => {
    // p1 SIGKILLed 1 ms into the run (fault #4): at-least-once processing runs it again elsewhere.
    const runs = [runOf(id, 'p1', 10_001), runOf(id, 'p2', 45_000)];
    const faults = [faultOf(4, 'kill', 10_002, 11_500, { target: 'p1' })];
    const { violations, explained } = secondRuns(runs, [], new Map([['p1', 10_002]]), faults);
    assert.equal(violations.count, 0, violations.items.join('\n'));
    assert.equal(explained.length, 1);
    assert.deepEqual(explained[0]!.death, { at: 10_002, fault: 4, kind: 'kill' });
    assert.equal(explained[0]!.previous.identity, 'p1');
    assert.equal(explained[0]!.again.identity, 'p2');
  });

  it('a death long after the run ended, or after the second run started, explains nothing', () => {
    const slow = runOf('slow@10000', 'p1', 10_001);
    const ends: RunEndRecord[] = [{ jobId: slow.jobId, identity: 'p1', startedAt: slow.startedAt, finishedAt: 12_500 }];
    const late = secondRuns([slow, runOf(slow.jobId, 'p2', 50_000)], ends, new Map([['p1', 12_500 + COMPLETION_SLACK_MS + 1]]), []);
    assert.equal(late.violations.count, 1);
    assert.match(late.violations.items[0]!, new RegExp(`whose process died only ${COMPLETION_SLACK_MS + 1} ms after that run's end`));
    // Within the slack of its end record it explains the re-run (its completion may not have been written).
    assert.equal(secondRuns([slow, runOf(slow.jobId, 'p2', 50_000)], ends, new Map([['p1', 12_500 + COMPLETION_SLACK_MS]]), []).violations.count, 0);
    const afterwards = secondRuns([runOf(id, 'p1', 10_001), runOf(id, 'p2', 45_000)], [], new Map([['p1', 45_001]]), []);
    assert.equal(afterwards.violations.count, 1);
    assert.match(afterwards.violations.items[0]!, /whose process was still running/);
  });

  it('a third run is judged against the second', () => {
    // p1 dies in its run (explained); p2 is alive when the job runs a third time (a duplicate).
    const runs = [runOf(id, 'p1', 10_001), runOf(id, 'p2', 45_000), runOf(id, 'p3', 80_000)];
    const { violations, explained, duplicates } = secondRuns(runs, [], new Map([['p1', 10_500]]), []);
    assert.equal(explained.length, 1);
    assert.equal(violations.count, 1);
    assert.equal(duplicates[0]!.previous.identity, 'p2');
  });
});

describe('chaos audit: stalled lanes', () => {
  const lane = (accounted: boolean[]): Array<{ tick: number; accounted: boolean }> => accounted.map((a, i) => ({ tick: 1000 * (i + 1), accounted: a }));

  it('flags consecutive ticks neither run nor recorded, blamed on the fault before them, and says when the lane never came back', () => {
    const faults = [faultOf(0, 'ledger-primary-kill-between-claim-and-wait', 2_500, 6_000), faultOf(1, 'kill', 9_000, 9_500, { target: 'p1' })];
    const lanes = new Map([
      ['every-second', lane([true, true, true, false, false, false, true, true, true, false, false])],
      // A lone missing tick is the exactly-once invariant's, not a stall.
      ['cron-5s', lane([true, false, true])],
    ]);
    const violations = laneStalls(lanes, faults);
    assert.equal(violations.checked, 2);
    assert.equal(violations.count, 2, violations.items.join('\n'));
    assert.match(violations.items[0]!, /^every-second: 3 consecutive ticks 1970-01-01T00:00:04.000Z – 1970-01-01T00:00:06.000Z neither run nor recorded; last fault before: #0 ledger-primary-kill/);
    assert.match(violations.items[1]!, /2 consecutive ticks .* \(through the end of the window\); last fault before: #1 kill/);
  });
});

describe('chaos audit on a real Redis: a lost staged run', () => {
  const redis = useRedis();

  it('flags a tick recorded enqueued that never ran and is not in BullMQ; one that ran, and a recorded skip, pass', async () => {
    const job = scheduledJob({ name: 'every-second', every: '1s', attempts: 1, handler: () => undefined });
    const queue = new Queue(job.queue, { connection: redis.client });
    const ledger = new TickLedger(redis.client, new KeySpace());
    try {
      const from = Math.floor(Date.now() / 1000) * 1000 - 10_000;
      const [ran, lost, skipped] = [from + 1000, from + 2000, from + 3000];
      const token = { generation: 'g', leaderTransitions: 1 };
      await queue.add(job.name, { tick: ran, token, data: undefined, manual: false }, { jobId: tickJobId(job.name, ran) });
      await redis.client.hset(ledger.keys.ledger(job.name), String(ran), `enqueued|${tickJobId(job.name, ran)}`, String(lost), `enqueued|${tickJobId(job.name, lost)}`, String(skipped), 'skipped|overlap');
      const result = await audit({
        jobs: [job], window: { from, to: skipped }, redis: redis.client, ledger, queues: new Map([[job.queue, queue]]), logs: [],
        // The lost run's add was seen on BullMQ's event stream 2 s before its tick, before the failover took it away.
        writes: new Map([[tickJobId(job.name, ran), { addedAt: ran - 2000, repeats: [] }], [tickJobId(job.name, lost), { addedAt: lost - 2000, repeats: [] }]]),
        runs: [runOf(tickJobId(job.name, ran), 'p1', ran + 3)], faults: [], steadyJob: job.name, lease: { writes: [], source: 'api' }, runEnds: [], exits: new Map(), timings: CHAOS_TIMINGS,
      });
      const named = (start: string) => result.invariants.find((i) => i.name.startsWith(start))!;
      const lostRuns = named('no tick recorded enqueued');
      assert.equal(lostRuns.checked, 2);
      assert.deepEqual(lostRuns.violations, [
        `every-second tick ${new Date(lost).toISOString()}: recorded enqueued|every-second@${lost}, but its run never ran and BullMQ has no job every-second@${lost} (its add was seen at ${new Date(lost - 2000).toISOString()}, 2000 ms before the tick)`,
      ]);
      // The gap invariant still sees it too; every tick is run or recorded, so no lane stalled; nothing ran twice.
      assert.ok(named('every (job, nominal tick)').violations.some((v) => v.includes(`recorded as enqueued but BullMQ has no job every-second@${lost}`)));
      assert.equal(named("no job's lane stalls").violationCount, 0);
      assert.equal(named('no job id runs twice').violationCount, 0);
      assert.deepEqual(result.secondRuns, { explained: [], duplicates: [] });
    } finally {
      await queue.close();
    }
  });
});
