import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Pacer } from '../../src/util/pacer.js';
import { ManualClock, settle } from '../support/manual-clock.js';

describe('Pacer: at most `perSecond` slots a second, on a monotonic clock', () => {
  /** Takes slots one after another, as a backfill does, and counts them. */
  const take = (pacer: Pacer, signal: AbortSignal): { count: () => number } => {
    let count = 0;
    void (async () => {
      while (!signal.aborted) {
        await pacer.next();
        if (!signal.aborted) count++;
      }
    })();
    return { count: () => count };
  };

  it('hands out the first slot at once, then one every 1/rate s', async () => {
    const clock = new ManualClock();
    const stop = new AbortController();
    const slots = take(new Pacer(10, () => clock.monotonic(), (ms) => clock.sleep(ms)), stop.signal);
    await settle();
    assert.equal(slots.count(), 1);
    await clock.advance(99);
    assert.equal(slots.count(), 1);
    await clock.advance(1);
    assert.equal(slots.count(), 2);
    await clock.advance(900);
    assert.equal(slots.count(), 11, 'ten a second after the first');
    stop.abort();
    await clock.advance(1_000);
  });

  it('banks no idle time: after a pause the slots come at the rate again, not in a burst', async () => {
    const clock = new ManualClock();
    const pacer = new Pacer(5, () => clock.monotonic(), (ms) => clock.sleep(ms));
    await pacer.next();
    // Idle for 10 s (a backfill waiting for its previous run).
    await clock.advance(10_000);
    await pacer.next();
    let more = 0;
    void pacer.next().then(() => more++);
    await settle();
    assert.equal(more, 0, 'the slot after the pause waits its 200 ms');
    await clock.advance(200);
    assert.equal(more, 1);
  });
});
