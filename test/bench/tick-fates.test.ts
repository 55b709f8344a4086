import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { addFates, allRan, describeFates, NO_FATES } from '../../bench/tick-fates.js';

describe('the release trials’ tally of the ticks due around a handover', () => {
  it('adds trials up, and passes only when every due tick ran', () => {
    const clean = { ticks: 3, ran: 3, skipped: {}, unrun: 0, twice: 0 };
    // Issue 31's trial: the tick due 11 ms before the takeover went back as catchup-limit.
    const lost = { ticks: 3, ran: 2, skipped: { 'catchup-limit': 1 }, unrun: 0, twice: 0 };
    const total = [clean, lost, { ...clean, ran: 2, unrun: 1 }].reduce(addFates, NO_FATES);
    assert.deepEqual(total, { ticks: 9, ran: 7, skipped: { 'catchup-limit': 1 }, unrun: 1, twice: 0 });
    assert.equal(describeFates(total), '7/9 due ticks ran; skipped catchup-limit 1, other 0; unrun 1; run twice 0');
    assert.equal(allRan(total), false);
    assert.equal(allRan([clean, clean].reduce(addFates, NO_FATES)), true);
    assert.equal(describeFates(addFates(clean, { ...clean, ran: 2, skipped: { paused: 1 } })), '5/6 due ticks ran; skipped catchup-limit 0, other 1; unrun 0; run twice 0');
  });
});
