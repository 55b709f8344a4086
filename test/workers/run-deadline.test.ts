import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UnrecoverableError } from 'bullmq';
import { pino } from 'pino';
import { runWithDeadline, RunTimeoutError, RunTimeoutFinalError, type Deadline } from '../../src/workers/run-deadline.js';
import { ManualClock, settle } from '../support/manual-clock.js';

/** A run's deadline on a manual clock: `timeout` 1 s, `timeoutGrace` 2 s; what it logs lands in `logged`. */
function deadlineOn(clock: ManualClock): Deadline & { logged: Array<{ level: number; msg: string; letGoMs?: number }> } {
  const logged: Array<{ level: number; msg: string; letGoMs?: number }> = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line) as { level: number; msg: string }) });
  return { runId: 'job@1', timeoutMs: 1_000, graceMs: 2_000, abort: new AbortController(), log, clock, logged };
}

type Outcome = { value: unknown } | { error: unknown } | 'pending';

/** How `run` has settled so far (`pending`, or its value or error), and the error it failed with. */
function watch(run: Promise<unknown>): { readonly outcome: Outcome; error(): unknown } {
  let outcome: Outcome = 'pending';
  run.then((value) => (outcome = { value }), (error: unknown) => (outcome = { error }));
  return {
    get outcome() {
      return outcome;
    },
    error() {
      const seen = outcome;
      if (seen === 'pending' || !('error' in seen)) return assert.fail(`the run has not failed: ${JSON.stringify(seen)}`);
      return seen.error;
    },
  };
}

describe('runWithDeadline: a timed-out run ends only once its handler has, or for good', () => {
  it('a handler that stops within the grace: the run stays pending until it has, then fails with a retryable timeout saying how late it stopped', async () => {
    const clock = new ManualClock();
    const deadline = deadlineOn(clock);
    // Ignores its signal for 1.5 s, then returns.
    const run = watch(runWithDeadline(async () => {
      await new Promise((resolve) => deadline.abort.signal.addEventListener('abort', resolve, { once: true }));
      await clock.sleep(1_500);
      return 'too late';
    }, deadline));
    await clock.advance(1_000);
    const reason: unknown = deadline.abort.signal.reason;
    assert.ok(reason instanceof RunTimeoutError && reason.stoppedAfterMs === undefined, 'the signal aborts at the deadline');
    await clock.advance(1_499);
    assert.equal(run.outcome, 'pending', 'pending while the handler runs: its worker keeps the slot and the lock');
    await clock.advance(1);
    await settle();
    const error = run.error();
    assert.ok(error instanceof RunTimeoutError && !(error instanceof UnrecoverableError), 'retried per attempts');
    assert.equal(error.stoppedAfterMs, 1_500);
    assert.equal(error.message, 'run job@1 timed out after 1s; its handler stopped 1500 ms after the deadline');
    assert.deepEqual(deadline.logged, [], 'nothing was let go');
  });

  it('a handler that never stops: the run fails for good when the grace ends, loudly, and the handler\'s end is logged when it comes', async () => {
    const clock = new ManualClock();
    const deadline = deadlineOn(clock);
    let release: () => void = () => undefined;
    const run = watch(runWithDeadline(() => new Promise<void>((resolve) => (release = resolve)), deadline));
    await clock.advance(2_999);
    assert.equal(run.outcome, 'pending', 'waits for the handler through the whole grace');
    await clock.advance(1);
    const error = run.error();
    assert.ok(error instanceof RunTimeoutFinalError && error instanceof UnrecoverableError, 'final: BullMQ does not retry it');
    assert.deepEqual(deadline.logged.map((l) => [l.level, l.msg.split(':')[0]]), [[50, 'a handler past its timeout did not stop within its grace (it ignores its signal)']]);
    await clock.advance(60_000);
    release();
    await settle();
    assert.deepEqual(deadline.logged.slice(1).map((l) => [l.msg, l.letGoMs]), [['a handler that was let go has stopped', 60_000]]);
  });

  it('a handler that stops as the grace ends is not let go', async () => {
    const clock = new ManualClock();
    const deadline = deadlineOn(clock);
    const run = watch(runWithDeadline(async () => {
      await clock.sleep(3_000);
      return 'late';
    }, deadline));
    // The handler's sleep was asked for before the grace's: it wakes first, in the same advance.
    await clock.advance(3_000);
    assert.ok(run.error() instanceof RunTimeoutError);
    assert.deepEqual(deadline.logged, []);
  });

  it('without a timeout, the handler\'s own outcome stands', async () => {
    const clock = new ManualClock();
    const deadline = { ...deadlineOn(clock), timeoutMs: undefined };
    const run = watch(runWithDeadline(async () => {
      await clock.sleep(60_000);
      return 'done';
    }, deadline));
    await clock.advance(60_000);
    assert.deepEqual(run.outcome, { value: 'done' });
  });
});
