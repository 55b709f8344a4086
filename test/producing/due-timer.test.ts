import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DUE_BATCH, DueTimer } from '../../src/producing/due-timer.js';
import { ManualClock, settle } from '../support/manual-clock.js';

describe('DueTimer: one timer for every lane', () => {
  it('ends naps in due order on one clock sleep, and a woken nap at once', async () => {
    const clock = new ManualClock();
    const timer = new DueTimer(clock, new AbortController().signal);
    const ended: string[] = [];
    const nap = (name: string, ms: number) => {
      const n = timer.nap(ms);
      void n.done.then(() => ended.push(name));
      return n;
    };
    nap('c', 300);
    nap('a', 100);
    const b = nap('b', 200);
    nap('a2', 100);
    await settle();
    assert.equal(clock.pending, 1, 'one clock sleep for all naps');
    b.wake();
    await settle();
    assert.deepEqual(ended, ['b']);
    await clock.advance(100);
    assert.deepEqual(ended, ['b', 'a', 'a2']);
    await clock.advance(250);
    assert.deepEqual(ended, ['b', 'a', 'a2', 'c']);
    assert.equal(clock.pending, 0);
  });

  it('an earlier nap re-arms the timer; the end of the term ends every nap', async () => {
    const clock = new ManualClock();
    const term = new AbortController();
    const timer = new DueTimer(clock, term.signal);
    let late = false;
    let early = false;
    void timer.nap(60_000).done.then(() => (late = true));
    void timer.nap(10).done.then(() => (early = true));
    await clock.advance(10);
    assert.equal(early, true);
    assert.equal(late, false);
    term.abort();
    await settle();
    assert.equal(late, true);
    let after = false;
    void timer.nap(5).done.then(() => (after = true));
    await settle();
    assert.equal(after, true, 'a nap asked after the term ended ends at once');
  });

  it(`naps due together end in passes of ${DUE_BATCH}, a turn of the event loop apart`, async () => {
    const clock = new ManualClock();
    const timer = new DueTimer(clock, new AbortController().signal);
    const count = 2 * DUE_BATCH + 10;
    let ended = 0;
    for (let i = 0; i < count; i++) void timer.nap(1_000).done.then(() => ended++);
    const passes: number[] = [];
    const watch = setInterval(() => passes.push(ended), 0);
    await clock.advance(1_000);
    clearInterval(watch);
    assert.equal(ended, count);
    assert.ok(!passes.some((n) => n > 0 && n < count && n % DUE_BATCH !== 0), `progress seen between passes: ${[...new Set(passes)].join(', ')}`);
  });
});
