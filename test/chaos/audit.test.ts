import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { audit, COMPLETION_SLACK_MS, laneStalls, leaseInvariants, secondRuns, serialRuns } from '../../scripts/chaos/audit.js';
import type { JobWrites } from '../../scripts/chaos/events.js';
import type { ExecutedFault } from '../../scripts/chaos/faults.js';
import { auditSchedules } from '../../scripts/chaos/schedule-audit.js';
import type { ScheduleWrite } from '../../scripts/chaos/schedules-client.js';
import { TickChecker, type SeenJob } from '../../scripts/chaos/tick-check.js';
import { distinctRuns, type RunEndRecord, type RunRecord } from '../../scripts/chaos/jobs/_record.js';
import type { LeaseRecordWrite } from '../../scripts/chaos/lease-history.js';
import { CHAOS_TIMINGS } from '../../scripts/chaos/suite.js';
import { KeySpace } from '../../src/redis/keys.js';
import { directWrites } from '../../src/redis/durability.js';
import { validateJobDefinition } from '../../src/scheduling/schema.js';
import type { StoredSpec } from '../../src/schedules/spec.js';
import { ScheduleStore } from '../../src/schedules/store.js';
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
    return { runId: `run-${started}`, job: job.name, jobId: `buffered@${tick}`, tick, timestamp: started, token: { generation: 'g', leaderTransitions: 1 }, pid: 1, identity, attemptsMade: 0, startedAt };
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
  return { runId: `${jobId}:${identity}:${startedAt}`, job: jobId.split('@')[0]!, jobId, tick: Number(jobId.split('@')[1]), timestamp: 1, token: { generation: 'g', leaderTransitions: 1 }, pid: 1, identity, attemptsMade: 0, startedAt };
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

  // CI (kubernetes lock, seed 12): Redis stopped right after applying a run's RPUSH and before replying;
  // ioredis sent it again once Redis was back, and the one run read as two at the same millisecond.
  it('a run record the records client wrote twice is one run; two runs of one id at one millisecond stay two', () => {
    const run = runOf(id, 'p1', 10_001);
    const resent = distinctRuns([run, runOf('every-second@11000', 'p1', 11_001), { ...run }]);
    assert.equal(resent.resent, 1);
    assert.deepEqual(resent.runs.map((r) => r.jobId), [id, 'every-second@11000']);
    assert.equal(secondRuns(resent.runs, [], new Map(), []).violations.count, 0);
    const twice = distinctRuns([run, { ...run, runId: 'another invocation' }]);
    assert.equal(twice.resent, 0);
    assert.equal(secondRuns(twice.runs, [], new Map(), []).violations.count, 1);
  });

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

describe('chaos audit on a real Redis: runtime schedules written by a client', () => {
  const redis = useRedis({ flush: true });
  const B = Date.UTC(2026, 0, 1);
  const type = validateJobDefinition({ name: 'tenant', handler: () => undefined }, '/jobs/tenant.ts');
  const types = new Map(type.ok ? [[type.job.name, type.job]] : []);
  const spec = (id: string, seq: number, every: '1s' | '2s'): ScheduleWrite['spec'] => ({ job: 'tenant', every, data: { schedule: id, write: seq } });
  /** A write sent at B + `sent` ms, answered 10 ms later; `ok` (with its version) or unknown. */
  function write(seq: number, id: string, op: ScheduleWrite['op'], sent: number, answer: { version?: number; removed?: boolean; unknown?: true }, every: '1s' | '2s' = '1s'): ScheduleWrite {
    return {
      seq, id, op, ...(op === 'remove' ? {} : { spec: spec(id, seq, every) }), sentAt: B + sent, answeredAt: B + sent + 10,
      ...(answer.unknown ? { outcome: 'unknown' as const, error: 'Command timed out' } : { outcome: 'ok' as const, ...answer }),
    };
  }
  /** A run of `id` at B + `tick` ms with the data of write `seq`, its job added (its timestamp) at B + `added`. */
  const scheduleRun = (id: string, tick: number, seq: number, added: number): RunRecord => ({
    ...runOf(tickJobId(id, B + tick), 'p1', B + tick + 5), timestamp: B + added, data: { schedule: id, write: seq },
  });

  it('judges owed ticks, the version each run carries and the store against the acknowledged writes', async () => {
    const keys = new KeySpace();
    const ledger = new TickLedger(redis.client, keys);
    const writes = [
      write(1, 's1', 'create', 100, { version: 1 }),
      write(2, 's1', 'edit-data', 5100, { version: 2 }),
      write(3, 's1', 'remove', 10100, { removed: true }),
      write(4, 's1', 'create', 15100, { version: 1 }, '2s'),
      write(5, 's1', 'edit-interval', 20100, { unknown: true }),
      write(6, 's2', 'create', 100, { version: 1 }),
      // A version given twice: the edit's acknowledgement says 1 again, as if the create were lost.
      write(7, 's2', 'edit-data', 1100, { version: 1 }),
    ];
    // [tick, data of write, added at]: each is commented with the verdict.
    const runs: Array<[number, number, number]> = [
      [4000, 2, 5200], // decided late (its add after the edit, 1.2 s after the tick): caught up by the schedule as it then stood
      [6000, 1, 4000], // staged before the edit and kept: 890 ms after its acknowledgement, within the 3 s allowance
      [9000, 1, 7000], // staged 1.9 s after the edit's acknowledgement: past the allowance (applied late)
      [11000, 2, 9000], // staged before the removal, which came 890 ms before the tick: within the 1.5 s (RenewDeadline) it has to take it back
      [12000, 2, 10000], // staged before the removal, 1.9 s before the tick: past RenewDeadline, should have been taken back
      [16000, 2, 16500], // the removed life's data on the re-created life's tick
      [19000, 5, 20200], // an odd tick before the interval edit that added it
      [21000, 5, 20500], // an odd tick of the unknown edit: it may have taken effect
    ];
    const states: string[] = [];
    const seen = new Map<string, SeenJob>();
    const adds = new Map<string, JobWrites>();
    for (const [tick, , added] of runs) {
      const id = tickJobId('s1', B + tick);
      states.push(String(B + tick), `enqueued|${id}`);
      seen.set(id, { id, name: 's1', tick: B + tick, token: 'g#1', state: 'completed', failedReason: '', writtenAt: B + added });
      adds.set(id, { addedAt: B + added, repeats: [] });
    }
    // Every other owed tick of s1 is recorded skipped, but for B+7000: a silent gap.
    for (let tick = 2000; tick <= 30_000; tick += 1000) if (!runs.some(([t]) => t === tick) && tick !== 7000) states.push(String(B + tick), 'skipped|catchup-limit');
    await redis.client.hset(keys.ledger('s1'), ...states);
    // s2 is judged for its writes only: its ticks are one recorded range.
    await redis.client.zadd(keys.skips('s2'), B, JSON.stringify({ from: B + 1000, to: B + 30_000, count: 30, reason: 'catchup-limit' }));
    const store = new ScheduleStore(redis.client, keys, directWrites(redis.client));
    await store.upsert('s1', spec('s1', 4, '2s') as StoredSpec, 'test');
    const runRecords = runs.map(([tick, seq, added]) => scheduleRun('s1', tick, seq, added));
    const runsByJob = new Map(runRecords.map((run) => [run.jobId, [run]]));
    const lanes = new Map<string, Array<{ tick: number; accounted: boolean }>>();
    const checker = new TickChecker({ redis: redis.client, ledger, seen, runsByJob, writes: adds });
    const result = await auditSchedules(
      { writes, ids: ['s1', 's2'], stageAheadMs: 2000, renewDeadlineMs: 1500, types },
      { checker, seen, runs: runRecords, window: { from: B, to: B + 30_000 }, redis: redis.client, ledger, adds, lanes },
    );
    const [owed, versions, kept] = result.invariants;
    const at = (ms: number): string => new Date(B + ms).toISOString();
    // What came next is named: here the removal, sent 3.1 s after the tick (a lane behind would drop it).
    assert.deepEqual(owed!.violations, [
      `s1 tick ${at(7000)}: neither a job nor a recorded skip; the schedule's next write (#3 remove, sent ${at(10_100)}, acknowledged ${at(10_110)}), its removal, ` +
        'was sent 3100 ms after the tick, before any leader recorded it',
    ]);
    assert.deepEqual(versions!.violations.map((v) => v.slice(0, v.indexOf(' (run on'))), [at(9000), at(12000), at(16000), at(19000)].map((t) => `s1 tick ${t}`));
    assert.match(versions!.violations[0]!, /superseded by write #2 edit-data .* 3890 ms before its tick: past the allowance of 3000 ms/);
    assert.match(versions!.violations[1]!, /after write #3 remove, .* 1890 ms before the tick, which has no such tick \(a removal\): its staged run was not taken back/);
    assert.match(versions!.violations[2]!, /of the schedule's life after a removal; the tick was owed by write #4 create every 2s.*: a re-created schedule ran a tick of its previous life/);
    assert.match(versions!.violations[3]!, /ran with write #5 edit-interval every 1s, .*sent 1100 ms after the tick, which no version in force then had: a version applied to a tick before it was written/);
    assert.equal(result.summary.caughtUpByLaterVersion, 1);
    assert.deepEqual(kept!.violations, [
      `s2: write #7 edit-data every 1s, sent ${at(1100)}, acknowledged ${at(1110)} as version 1, but the writes before it allow versions 2–2: an acknowledged write was lost, or a version given twice`,
      's2: the store ends holding no schedule; the client\'s writes leave write #7 at version 1',
    ]);
    // Owed: s1's 1 s ticks from its creation + 1 s to its removal's send (2..10 s), its 2 s ticks from its
    // re-creation + 2 s (18 s on), and the even ticks after the unknown interval edit; around the writes optional.
    const stats = result.summary.ticks.s1!;
    assert.equal(lanes.get('s1')!.filter((t) => !t.accounted).length, 1);
    assert.deepEqual(lanes.get('s1')!.map((t) => (t.tick - B) / 1000), [2, 3, 4, 5, 6, 7, 8, 9, 10, 18, 20, 22, 24, 26, 28, 30]);
    assert.equal(stats.ticks - stats.optional!, 16);
    assert.deepEqual(result.enqueued.map((job) => job.tick - B).sort((a, b) => a - b), runs.map(([tick]) => tick).sort((a, b) => a - b));
  });
});
