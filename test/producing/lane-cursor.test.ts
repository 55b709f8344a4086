import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LaneCursor, takeoverCursor } from '../../src/producing/lane-cursor.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { nextTick } from '../../src/scheduling/plan.js';
import { scheduledJob } from '../scheduling/helpers.js';
import { ManualClock } from '../support/manual-clock.js';

const T0 = Date.UTC(2026, 0, 1);
const S = 1_000;
const M = 60 * S;

/** A cursor taken over at `now` from a ledger whose watermark is `lastScheduledTick`, with the takeover finished. */
function takenOver(now: number, lastScheduledTick: number | undefined = now): LaneCursor {
  const cursor = new LaneCursor();
  cursor.takeOver({ lastScheduledTick, scheduledSince: now, newestDueTick: lastScheduledTick }, now);
  cursor.tookOver(now);
  return cursor;
}

/** The ticks the lane would walk from its position up to `to`, in order (what `step` asks nextTick for). */
function walk(job: ScheduledJob, cursor: LaneCursor, to: number, now: number): number[] {
  const walked: number[] = [];
  for (let tick = nextTick(job, cursor.position); tick !== undefined && tick <= to; tick = nextTick(job, cursor.position)) {
    walked.push(tick);
    cursor.recorded(tick, now);
  }
  return walked;
}

describe('takeoverCursor: where a takeover starts walking', () => {
  it('a job no term has ticked yet: from when a leader first saw it', () => {
    assert.equal(takeoverCursor({ lastScheduledTick: undefined, scheduledSince: T0 - 5 * M, newestDueTick: undefined }, T0), T0 - 5 * M);
  });

  it('a watermark at or before now: from the watermark', () => {
    assert.equal(takeoverCursor({ lastScheduledTick: T0 - M, scheduledSince: T0 - 9 * M, newestDueTick: T0 - M }, T0), T0 - M);
    assert.equal(takeoverCursor({ lastScheduledTick: T0, scheduledSince: T0 - 9 * M, newestDueTick: T0 }, T0), T0);
  });

  it('a watermark past now (ticks staged ahead): from the newest tick recorded by now, else from now', () => {
    assert.equal(takeoverCursor({ lastScheduledTick: T0 + 2 * S, scheduledSince: T0 - 9 * M, newestDueTick: T0 - M }, T0), T0 - M);
    assert.equal(takeoverCursor({ lastScheduledTick: T0 + 2 * S, scheduledSince: T0 - 9 * M, newestDueTick: undefined }, T0), T0);
  });

  it('LaneCursor.takeOver takes the ledger watermark as its own and starts at takeoverCursor', () => {
    const cursor = new LaneCursor();
    assert.equal(cursor.position, -Infinity);
    assert.equal(cursor.watermark, undefined);
    assert.equal(cursor.takeOver({ lastScheduledTick: T0 + 2 * S, scheduledSince: T0 - 9 * M, newestDueTick: T0 - M }, T0), T0 - M);
    assert.equal(cursor.position, T0 - M);
    assert.equal(cursor.watermark, T0 + 2 * S, 'the next claim names the ledger watermark as its previous tick');
    const fresh = new LaneCursor();
    fresh.takeOver({ lastScheduledTick: undefined, scheduledSince: T0 - 5 * M, newestDueTick: undefined }, T0);
    assert.equal(fresh.position, T0 - 5 * M);
    assert.equal(fresh.watermark, undefined);
  });

  it('a retried takeover trusts only the ledger: it resets the position and watermark', () => {
    const cursor = takenOver(T0);
    cursor.recorded(T0 + M, T0 + M);
    cursor.takeOver({ lastScheduledTick: T0, scheduledSince: T0, newestDueTick: T0 }, T0 + M);
    assert.equal(cursor.position, T0);
    assert.equal(cursor.watermark, T0);
  });

  it('tookOver: every tick up to now is recorded or owed to no one', () => {
    const cursor = new LaneCursor();
    cursor.takeOver({ lastScheduledTick: T0 - 10 * M, scheduledSince: T0 - 20 * M, newestDueTick: T0 - 10 * M }, T0);
    cursor.recorded(T0 - M, T0); // the catch-up plan ran the newest owed tick
    cursor.tookOver(T0);
    assert.equal(cursor.position, T0);
    assert.equal(cursor.recordedBy(T0), T0, 'a rewind never walks back past the takeover');
    // A takeover whose position ran past now (it recorded a tick ahead) keeps it.
    const ahead = new LaneCursor();
    ahead.takeOver({ lastScheduledTick: T0, scheduledSince: T0, newestDueTick: T0 }, T0);
    ahead.recorded(T0 + M, T0);
    ahead.tookOver(T0);
    assert.equal(ahead.position, T0 + M);
    assert.equal(ahead.recordedBy(T0), T0);
  });
});

describe('LaneCursor: normal ticking', () => {
  it('walks each tick once when due, the watermark following, on the manual clock', async () => {
    const job = scheduledJob({ every: '1m' });
    const clock = new ManualClock(T0);
    const cursor = takenOver(clock.now());
    const fired: number[] = [];
    for (let i = 0; i < 5; i++) {
      const tick = nextTick(job, cursor.position)!;
      await clock.advance(tick - clock.now());
      assert.equal(cursor.rewind(clock.now()), cursor.position, 'no redefinition: no rewind');
      cursor.recorded(tick, clock.now());
      fired.push(tick);
      assert.equal(cursor.position, tick);
      assert.equal(cursor.watermark, tick);
      assert.equal(cursor.recordedBy(clock.now()), tick, 'a tick recorded when due counts as recorded by now at once');
    }
    assert.deepEqual(fired, [1, 2, 3, 4, 5].map((n) => T0 + n * M));
  });

  it('a skipped range moves the position and watermark to its end', () => {
    const cursor = takenOver(T0);
    cursor.recorded(T0 + 10 * M, T0 + 12 * M);
    assert.equal(cursor.position, T0 + 10 * M);
    assert.equal(cursor.watermark, T0 + 10 * M);
    assert.equal(cursor.recordedBy(T0 + 12 * M), T0 + 10 * M);
  });

  it('a tick settled below the watermark moves neither the watermark nor the position back', () => {
    const cursor = takenOver(T0);
    cursor.recorded(T0 + 2 * M, T0 + 2 * M);
    cursor.recorded(T0 + M, T0 + 2 * M);
    assert.equal(cursor.position, T0 + 2 * M);
    assert.equal(cursor.watermark, T0 + 2 * M);
  });

  it('ticks recorded ahead of now (staged) are folded in only once due', async () => {
    const clock = new ManualClock(T0 + M - 2 * S);
    const cursor = takenOver(T0);
    // Staged two seconds before its tick.
    cursor.recorded(T0 + M, clock.now());
    assert.equal(cursor.position, T0 + M, 'the walk goes on past the staged tick');
    assert.equal(cursor.watermark, T0 + M);
    assert.equal(cursor.recordedBy(clock.now()), T0, 'not yet recorded by now');
    await clock.advance(S);
    assert.equal(cursor.recordedBy(clock.now()), T0);
    await clock.advance(S);
    assert.equal(cursor.recordedBy(clock.now()), T0 + M, 'due at its tick');
    // A skipped range recorded early is folded in the same way.
    cursor.recorded(T0 + 3 * M, clock.now());
    assert.equal(cursor.recordedBy(T0 + 3 * M - 1), T0 + M);
    assert.equal(cursor.recordedBy(T0 + 3 * M), T0 + 3 * M);
  });
});

describe('LaneCursor: a redefinition rewinds', () => {
  it('with staged ticks ahead of now, a new schedule with ticks between is walked from the newest tick recorded by now', () => {
    const everyMinute = scheduledJob({ every: '1m' });
    const cursor = takenOver(T0);
    // At T0 + 30 s the lane staged T0 + 1 m (a long staging horizon): its position ran ahead of now.
    const now = T0 + 30 * S;
    assert.deepEqual(walk(everyMinute, cursor, T0 + M, now), [T0 + M]);
    assert.equal(cursor.position, T0 + M);
    // Redefined to every 15 s: T0 + 15 s and T0 + 30 s lie between the newest tick recorded by now (T0)
    // and the position, and T0 + 45 s between there and the staged tick.
    cursor.redefined();
    assert.equal(cursor.rewindPending, true);
    assert.equal(cursor.rewind(now), T0);
    assert.equal(cursor.rewindPending, false);
    const every15s = scheduledJob({ every: '15s' });
    // The staged T0 + 1 m is walked again (the ledger answers it `settled`), then the walk goes on.
    assert.deepEqual(walk(every15s, cursor, T0 + 75 * S, now), [T0 + 15 * S, T0 + 30 * S, T0 + 45 * S, T0 + M, T0 + 75 * S]);
    assert.equal(cursor.watermark, T0 + 75 * S, 'the claims after the rewind name the newest recorded tick as previous');
  });

  it('the watermark stays put on a rewind: a claim below it names the newest recorded tick', () => {
    const cursor = takenOver(T0);
    cursor.recorded(T0 + M, T0 + 30 * S);
    cursor.redefined();
    cursor.rewind(T0 + 30 * S);
    assert.equal(cursor.position, T0);
    assert.equal(cursor.watermark, T0 + M);
    cursor.recorded(T0 + 15 * S, T0 + 30 * S);
    assert.equal(cursor.position, T0 + 15 * S);
    assert.equal(cursor.watermark, T0 + M);
  });

  it('a staged tick that came due before the rewind is recorded by now: the rewind stops at it', () => {
    const cursor = takenOver(T0);
    cursor.recorded(T0 + M, T0 + M - 2 * S);
    cursor.recorded(T0 + 2 * M, T0 + 2 * M - 2 * S);
    cursor.redefined();
    assert.equal(cursor.rewind(T0 + 2 * M - S), T0 + M, 'T0 + 1 m came due; T0 + 2 m is still ahead');
    cursor.redefined();
    assert.equal(cursor.rewind(T0 + 2 * M), T0 + M, 'the position is already behind: a rewind never moves it forward');
    assert.equal(cursor.recordedBy(T0 + 2 * M), T0 + 2 * M);
  });

  it("a schedule's new version owes no tick before its write: the rewind goes on to it, even forward", () => {
    const every15s = scheduledJob({ every: '15s' });
    // Staged ahead to T0 + 1 m at T0 + 30 s; the new version was written at T0 + 20 s.
    const staged = takenOver(T0);
    staged.recorded(T0 + M, T0 + 30 * S);
    staged.redefined();
    assert.equal(staged.rewind(T0 + 30 * S, T0 + 20 * S), T0 + 20 * S);
    assert.deepEqual(walk(every15s, staged, T0 + 45 * S, T0 + 30 * S), [T0 + 30 * S, T0 + 45 * S], 'T0 + 15 s, before the write, is not walked');
    // Nothing staged (the position at the newest recorded tick): the floor moves it forward.
    const level = takenOver(T0);
    level.redefined();
    assert.equal(level.rewind(T0 + 30 * S, T0 + 20 * S), T0 + 20 * S);
  });

  it("a schedule's version heard of after ticks past its write were recorded: the rewind walks back to the write", () => {
    const every15s = scheduledJob({ every: '15s' });
    // The version before (every minute) recorded T0 + 1 m at T0 + 1 m; the new one, every 15 s, was
    // written at T0 + 40 s and heard of at T0 + 70 s (a feed down, or a takeover by the version before).
    const cursor = takenOver(T0);
    cursor.recorded(T0 + M, T0 + M);
    cursor.redefined();
    assert.equal(cursor.rewind(T0 + 70 * S, T0 + 40 * S), T0 + 40 * S);
    // T0 + 45 s is owed by the new version, though past; T0 + 1 m is walked again (answered `settled`).
    assert.deepEqual(walk(every15s, cursor, T0 + 75 * S, T0 + 70 * S), [T0 + 45 * S, T0 + M, T0 + 75 * S]);
  });

  it('with nothing ahead of now, a rewind changes nothing', () => {
    const cursor = takenOver(T0);
    cursor.recorded(T0 + M, T0 + M);
    cursor.redefined();
    assert.equal(cursor.rewind(T0 + M + 10 * S), T0 + M);
  });

  it('rewinds once per redefinition, and only after one', () => {
    const cursor = takenOver(T0);
    cursor.recorded(T0 + M, T0 + 30 * S);
    assert.equal(cursor.rewindPending, false);
    assert.equal(cursor.rewind(T0 + 30 * S), T0 + M, 'not redefined: the staged position stands');
    cursor.redefined();
    cursor.redefined();
    assert.equal(cursor.rewind(T0 + 30 * S), T0);
    cursor.recorded(T0 + M, T0 + 40 * S);
    assert.equal(cursor.rewind(T0 + 40 * S), T0 + M, 'the redefinition was answered');
  });

  it('a takeover during staging, then a redefinition, walks back only to the takeover', () => {
    // The ledger's watermark is a tick staged past now; the newest tick recorded by now is T0 - 1 m.
    const cursor = new LaneCursor();
    const now = T0 - S;
    assert.equal(cursor.takeOver({ lastScheduledTick: T0, scheduledSince: T0 - 9 * M, newestDueTick: T0 - M }, now), T0 - M);
    // Walking again from there re-meets the staged tick (settled) and records nothing new before now.
    assert.deepEqual(walk(scheduledJob({ every: '1m' }), cursor, T0, now), [T0]);
    cursor.tookOver(now);
    assert.equal(cursor.position, T0);
    cursor.redefined();
    assert.equal(cursor.rewind(now), now, 'every tick up to the takeover is recorded or owed to no one');
  });
});
