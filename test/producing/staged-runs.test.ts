import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StagedRuns, stagedBefore, unstageReason } from '../../src/producing/staged-runs.js';
import type { StagedRun } from '../../src/producing/staging.js';
import { jitterMs } from '../../src/scheduling/plan.js';
import { scheduledJob } from '../scheduling/helpers.js';
import { ManualClock } from '../support/manual-clock.js';

const T0 = Date.UTC(2026, 0, 1);
const S = 1_000;
const M = 60 * S;

const run = (tick: number, dueAt = tick): StagedRun => ({ tick, jobId: `job:${tick}`, queue: 'q', dueAt });
const ticksOf = (runs: StagedRun[]): number[] => runs.map((r) => r.tick);

describe('stagedBefore: the runs earlier terms may have staged', () => {
  it('takes the enqueued ticks only, due at their tick plus jitter', () => {
    const job = scheduledJob({ every: '1m', jitter: '20s', queue: 'reports' });
    const runs = stagedBefore(job, [
      { tick: T0, state: { kind: 'skipped', reason: 'paused' } },
      { tick: T0 + M, state: { kind: 'enqueued', jobId: 'a' } },
      { tick: T0 + 2 * M, state: { kind: 'claimed', term: { generation: 'g', leaderTransitions: 1 }, jobId: 'b' } },
      { tick: T0 + 3 * M, state: { kind: 'enqueued', jobId: 'c' } },
    ]);
    assert.deepEqual(runs, [
      { tick: T0 + M, jobId: 'a', queue: 'reports', dueAt: T0 + M + jitterMs(job, T0 + M) },
      { tick: T0 + 3 * M, jobId: 'c', queue: 'reports', dueAt: T0 + 3 * M + jitterMs(job, T0 + 3 * M) },
    ]);
  });
});

describe('StagedRuns: which runs are still ahead', () => {
  it('takeOver holds the runs still ahead of now and returns those that came due (at now counts as due)', () => {
    const staged = new StagedRuns();
    staged.added(run(T0 - 5 * M), T0 - 6 * M);
    const late = staged.takeOver([run(T0 - M), run(T0), run(T0 + S), run(T0 + 2 * S)], T0);
    assert.deepEqual(ticksOf(late), [T0 - M, T0]);
    assert.deepEqual(ticksOf(staged.list()), [T0 + S, T0 + 2 * S], 'replaces what was held: a takeover trusts only the ledger');
    late.push(run(T0 - 2 * M));
    assert.equal(staged.size, 2, 'the late list is the caller’s own');
  });

  it('added keeps runs oldest first and drops those due by the time of the add', () => {
    const staged = new StagedRuns();
    staged.added(run(T0 + M), T0 + M - 2 * S);
    staged.added(run(T0 + M + 30 * S), T0 + M - S);
    assert.deepEqual(ticksOf(staged.list()), [T0 + M, T0 + M + 30 * S]);
    staged.added(run(T0 + 2 * M), T0 + 2 * M - 2 * S);
    assert.deepEqual(ticksOf(staged.list()), [T0 + 2 * M], 'the earlier two came due before this add');
  });

  it('staged runs come due as the clock moves, and are dropped then', async () => {
    const clock = new ManualClock(T0);
    const staged = new StagedRuns();
    for (const tick of [T0 + S, T0 + 2 * S, T0 + 3 * S]) staged.added(run(tick), clock.now());
    assert.equal(staged.dropDue(clock.now()), 3);
    await clock.advance(S - 1);
    assert.equal(staged.dropDue(clock.now()), 3, 'not due a millisecond before');
    await clock.advance(1);
    assert.equal(staged.dropDue(clock.now()), 2, 'due at its due time: BullMQ has promoted it');
    assert.deepEqual(ticksOf(staged.list()), [T0 + 2 * S, T0 + 3 * S]);
    await clock.advance(5 * S);
    assert.equal(staged.dropDue(clock.now()), 0);
  });

  it('a run is due at its due time (tick plus jitter), not at its tick', () => {
    const staged = new StagedRuns();
    staged.added(run(T0, T0 + 10 * S), T0 - S);
    assert.equal(staged.dropDue(T0 + 5 * S), 1);
    assert.equal(staged.dropDue(T0 + 10 * S), 0);
  });
});

describe('StagedRuns: take-backs', () => {
  it('a take-back that started is carried past its due time; a settled one is no longer held', () => {
    const staged = new StagedRuns();
    const [a, b] = [run(T0 + S), run(T0 + 2 * S)];
    staged.added(a, T0);
    staged.added(b, T0);
    staged.takingBack(a, 'paused');
    assert.equal(a.takingBack, 'paused', 'marked on the run itself (the take-back call sees it)');
    assert.equal(staged.dropDue(T0 + 10 * S), 1, 'b came due; a is being taken back');
    assert.deepEqual(staged.list(), [a]);
    staged.settled(a);
    assert.equal(staged.size, 0);
    assert.equal(staged.dropDue(T0 + 10 * S), 0);
  });

  it('list is a copy: runs settled while the lane walks it leave the walk whole', () => {
    const staged = new StagedRuns();
    const runs = [run(T0 + S), run(T0 + 2 * S), run(T0 + 3 * S)];
    for (const r of runs) staged.added(r, T0);
    const walked: number[] = [];
    for (const r of staged.list()) {
      walked.push(r.tick);
      staged.settled(r);
    }
    assert.deepEqual(walked, ticksOf(runs));
    assert.equal(staged.size, 0);
  });

  it('settled removes that very run, not another of the same tick', () => {
    const staged = new StagedRuns();
    const [a, again] = [run(T0 + S), run(T0 + S)];
    staged.added(a, T0);
    staged.added(again, T0);
    staged.settled(a);
    assert.equal(staged.list()[0], again);
  });
});

describe('unstageReason: why a staged run is taken back', () => {
  const job = scheduledJob({ every: '1m' });

  it('removed once the job is gone, paused while it is paused (at run time too)', () => {
    assert.equal(unstageReason(run(T0 + M), undefined, false), 'removed');
    assert.equal(unstageReason(run(T0 + M), job, true), 'paused');
  });

  it('rescheduled when the schedule no longer has its tick; kept while it does', () => {
    assert.equal(unstageReason(run(T0 + M), job, false), undefined);
    assert.equal(unstageReason(run(T0 + M), scheduledJob({ every: '7m' }), false), 'rescheduled');
    assert.equal(unstageReason(run(T0 + M), scheduledJob({ every: '30s' }), false), undefined);
  });

  it('a take-back that started keeps its reason, whatever the job says now', () => {
    const r = run(T0 + M);
    r.takingBack = 'rescheduled';
    assert.equal(unstageReason(r, job, false), 'rescheduled');
    assert.equal(unstageReason(r, undefined, true), 'rescheduled');
  });
});
