import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Pacer } from '../../src/util/pacer.js';
import { ManualClock, settle } from '../support/manual-clock.js';

describe('Pacer: at most `perSecond` slots a second, on a monotonic clock', () => {
  /** Takes `batch` slots at a time, one take after another, as a backfill does, and counts them. */
  const take = (pacer: Pacer, signal: AbortSignal, batch = 1): { count: () => number } => {
    let count = 0;
    void (async () => {
      while (!signal.aborted) {
        await pacer.next(batch);
        if (!signal.aborted) count += batch;
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

  it('a batch takes its count of slots at once: the next batch starts count/rate s later, so the rate holds over any span', async () => {
    const clock = new ManualClock();
    const stop = new AbortController();
    // 2,000 a second in batches of 100 (a backfill at --rate 2000): a batch every 50 ms.
    const slots = take(new Pacer(2_000, () => clock.monotonic(), (ms) => clock.sleep(ms)), stop.signal, 100);
    await settle();
    assert.equal(slots.count(), 100, 'the first batch at once');
    await clock.advance(49);
    assert.equal(slots.count(), 100);
    await clock.advance(1);
    assert.equal(slots.count(), 200);
    for (let ms = 50; ms < 10_000; ms += 50) await clock.advance(50);
    assert.equal(slots.count(), 20_100, 'ten seconds at 2,000 a second, and the batch taken at the start');
    stop.abort();
    await clock.advance(1_000);
  });

  it('slots handed back (ticks of a batch that needed no run) bring the next slot sooner, by as many', async () => {
    const clock = new ManualClock();
    const pacer = new Pacer(10, () => clock.monotonic(), (ms) => clock.sleep(ms));
    await pacer.next(5);
    pacer.giveBack(3);
    let more = 0;
    void pacer.next().then(() => more++);
    await clock.advance(199);
    assert.equal(more, 0, 'the two slots used take their 200 ms');
    await clock.advance(1);
    assert.equal(more, 1);
  });
});
