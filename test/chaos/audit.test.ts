import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { leaseInvariants, serialRuns } from '../../scripts/chaos/audit.js';
import type { RunEndRecord, RunRecord } from '../../scripts/chaos/jobs/_record.js';
import type { LeaseRecordWrite } from '../../scripts/chaos/lease-history.js';

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
