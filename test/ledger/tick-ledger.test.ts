import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

describe('TickLedger: fence and tick claims on a real Redis', () => {
  const redis = useRedis({ flush: true });
  let ledger: TickLedger;
  const termA = { generation: 'uid-a', leaderTransitions: 3 };
  const termA4 = { generation: 'uid-a', leaderTransitions: 4 };
  const termB = { generation: 'uid-b', leaderTransitions: 0 };

  beforeEach(() => {
    ledger = new TickLedger(redis.client, new KeySpace('test', 'c1'));
  });

  it('keeps every key in one hash slot', () => {
    const k = ledger.keys;
    for (const key of [k.fence, k.retiredGenerations, k.paused, k.ledger('j'), k.ledgerIndex('j'), k.pending('j'), k.skips('j'), k.jobState('j')]) {
      assert.ok(key.startsWith('test:{c1}:'), key);
    }
  });

  it('a stop request of a run is kept and published under the fence; a stale term writes and publishes nothing', async () => {
    await ledger.raiseFence(termA4, 'a', 1);
    const subscriber = redis.server.client();
    const heard: string[] = [];
    subscriber.on('message', (_channel: string, message: string) => heard.push(message));
    await subscriber.subscribe(ledger.keys.runStops);
    try {
      assert.equal(await ledger.requestRunStop(termA, { jobId: 'j@1000', how: 'cancel', byTick: 2000 }), false, 'fenced');
      assert.equal(await redis.client.exists(ledger.keys.runStop('j@1000')), 0);
      assert.equal(await ledger.requestRunStop(termA4, { jobId: 'j@1000', how: 'terminate', byTick: 2000 }), true);
      const request = JSON.stringify({ jobId: 'j@1000', how: 'terminate', byTick: 2000 });
      assert.equal(await redis.client.get(ledger.keys.runStop('j@1000')), request);
      assert.ok((await redis.client.pttl(ledger.keys.runStop('j@1000'))) > 0, 'kept for a while, not for ever');
      await until('the request to be published', () => heard.length > 0, 5_000);
      assert.deepEqual(heard, [request], 'only the request of the current term');
    } finally {
      subscriber.disconnect();
    }
  });

  it('the fence only moves forward within a generation', async () => {
    assert.deepEqual(await ledger.raiseFence(termA4, 'a', 1), { ok: true });
    assert.deepEqual(await ledger.raiseFence(termA, 'old', 2), { ok: false, fence: termA4 });
    assert.deepEqual(await ledger.raiseFence(termA4, 'a', 3), { ok: true }, 'the same term may raise again');
    const fence = await ledger.fence();
    assert.equal(fence.leaderTransitions, 4);
    assert.equal(fence.rejectedRaises, 1);
  });

  it('one token belongs to one term: the same token raised by another holder is refused', async () => {
    assert.deepEqual(await ledger.raiseFence(termA4, 'a', 1), { ok: true });
    assert.deepEqual(await ledger.raiseFence(termA4, 'b', 2), { ok: false, fence: termA4 });
    assert.deepEqual(await ledger.raiseFence(termA4, 'a', 3), { ok: true }, 'the holder of the term may raise it again');
    assert.equal((await ledger.fence()).holder, 'a');
    assert.equal((await ledger.fence()).rejectedRaises, 1);
  });

  it('a recreated lease (new generation) retires the old generation for good', async () => {
    await ledger.raiseFence(termA4, 'a', 1);
    assert.deepEqual(await ledger.raiseFence(termB, 'b', 2), { ok: true });
    assert.equal((await ledger.raiseFence({ generation: 'uid-a', leaderTransitions: 99 }, 'zombie', 3)).ok, false);
    assert.deepEqual(await ledger.claim(termA4, 'j', 1000, 'j@1000'), { kind: 'fenced' });
  });

  it('claims a tick once; a second claim finds it settled after confirmation', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    assert.deepEqual(await ledger.claim(termA, 'j', 1000, 'j@1000'), { kind: 'claimed', retry: false });
    assert.deepEqual(await ledger.pendingTicks('j'), [1000]);
    assert.equal(await ledger.confirm(termA, 'j', 1000, 'j@1000', 1005), 'enqueued');
    assert.deepEqual(await ledger.pendingTicks('j'), []);
    assert.deepEqual(await ledger.claim(termA, 'j', 1000, 'j@1000'), { kind: 'settled', state: 'enqueued|j@1000' });
    const state = await ledger.jobState('j');
    assert.equal(state.lastScheduledTick, 1000);
    assert.equal(state.lastJobId, 'j@1000');
    assert.equal(state.enqueued, 1);
  });

  it('a claim left unconfirmed by a crashed leader is handed to the next term', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    await ledger.claim(termA, 'j', 2000, 'j@2000');
    await ledger.raiseFence(termA4, 'b', 2);
    assert.deepEqual(await ledger.pendingTicks('j'), [2000]);
    assert.deepEqual(await ledger.claim(termA4, 'j', 2000, 'j@2000'), { kind: 'claimed', retry: true });
    assert.match((await ledger.tickState('j', 2000)) ?? '', /^claimed\|uid-a\|4\|/);
  });

  it('rejects a stale token and counts it on the fence and the job', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    await ledger.raiseFence(termA4, 'b', 2);
    assert.deepEqual(await ledger.claim(termA, 'j', 3000, 'j@3000'), { kind: 'fenced' });
    assert.equal(await ledger.skipRange(termA, 'j', { from: 1, to: 2, count: 2, reason: 'missed-window' }), 'fenced');
    assert.equal(await ledger.tickState('j', 3000), undefined, 'a fenced claim writes nothing to the ledger');
    assert.equal((await ledger.fence()).fenced, 2);
    assert.equal((await ledger.jobState('j')).fenced, 2);
  });

  it('records skips with their reason, and obeys a run-time pause', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    assert.deepEqual(await ledger.claim(termA, 'j', 4000, 'j@4000', { skip: 'overlap' }), { kind: 'skipped', reason: 'overlap' });
    await ledger.pause('j', 'maintenance');
    assert.deepEqual(await ledger.claim(termA, 'j', 5000, 'j@5000'), { kind: 'skipped', reason: 'paused' });
    assert.equal((await ledger.pausedJobs()).get('j')?.note, 'maintenance');
    assert.equal(await ledger.resume('j'), true);
    assert.deepEqual(await ledger.claim(termA, 'j', 6000, 'j@6000'), { kind: 'claimed', retry: false });
    assert.equal(await ledger.skipRange(termA, 'j', { from: 10, to: 90, count: 9, reason: 'missed-window' }), 'recorded');
    const state = await ledger.jobState('j');
    assert.deepEqual(state.skipped, { overlap: 1, paused: 1, 'missed-window': 9 });
    assert.equal(state.lastScheduledTick, 6000);
    assert.deepEqual(await ledger.skippedRanges('j'), [{ from: 10, to: 90, count: 9, reason: 'missed-window' }]);
  });

  /*
   * A claim whose reply was lost (a connection reset after the script ran, or a replica WAIT that timed
   * out: `DurabilityError`) is decided again by the lane. By then the tick's own claim is the job's newest
   * run, so a `skip` or `bufferOne` job sees "the previous run is still waiting" and asks to skip or buffer
   * its own tick. The ledger must keep the first decision, or the tick stays claimed and never added, and
   * every later tick of the job is skipped behind it (found by the chaos run on Redis Cluster).
   */
  it('a retried claim keeps its first decision: a claim to run asked again as skipped for overlap is still to be added', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    assert.deepEqual(await ledger.claimTicks(termA, [{ job: 'j', tick: 1000, jobId: 'j@1000' }]), [{ kind: 'claimed', retry: false }]);
    assert.deepEqual(await ledger.claimTicks(termA, [{ job: 'j', tick: 1000, jobId: 'j@1000', request: { skip: 'overlap' } }]), [{ kind: 'claimed', retry: true }]);
    assert.match((await ledger.tickState('j', 1000)) ?? '', /^claimed\|/);
  });

  it('a retried claim keeps its first decision: a buffered claim asked again as buffered is buffered (the lane holds it again)', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    assert.deepEqual(await ledger.claimTicks(termA, [{ job: 'j', tick: 1000, jobId: 'j@1000', request: { buffer: true } }]), [{ kind: 'buffered' }]);
    assert.deepEqual(await ledger.claimTicks(termA, [{ job: 'j', tick: 1000, jobId: 'j@1000', request: { buffer: true } }]), [{ kind: 'buffered' }]);
  });

  it('a retried claim keeps its first decision: a tick already skipped stays settled', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    await ledger.claimTicks(termA, [{ job: 'j', tick: 1000, jobId: 'j@1000', request: { skip: 'overlap' } }]);
    assert.deepEqual(await ledger.claimTicks(termA, [{ job: 'j', tick: 1000, jobId: 'j@1000' }]), [{ kind: 'settled', state: 'skipped|overlap' }]);
  });

  it('refuses a claim that would leave a hole behind the watermark', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    assert.deepEqual(await ledger.claim(termA, 'j', 1000, 'j@1000'), { kind: 'claimed', retry: false });
    assert.deepEqual(await ledger.claim(termA, 'j', 3000, 'j@3000', { previousTick: 2000 }), { kind: 'hole', lastScheduledTick: 1000 });
    assert.equal(await ledger.tickState('j', 3000), undefined, 'a refused claim writes nothing');
    assert.deepEqual(await ledger.claim(termA, 'j', 2000, 'j@2000', { previousTick: 1000, skip: 'overlap' }), { kind: 'skipped', reason: 'overlap' });
    assert.deepEqual(await ledger.claim(termA, 'j', 3000, 'j@3000', { previousTick: 2000 }), { kind: 'claimed', retry: false });
    assert.equal((await ledger.jobState('j')).lastScheduledTick, 3000);
    assert.equal(await ledger.skipRange(termA, 'j', { from: 5000, to: 4000, count: 1, reason: 'catchup-limit' }), 'invalid');
    assert.equal(await ledger.skipRange(termA, 'j', { from: 4000, to: 4000, count: 0, reason: 'catchup-limit' }), 'invalid');
    assert.equal((await ledger.jobState('j')).lastScheduledTick, 3000, 'an invalid range moves nothing');
    assert.deepEqual(await ledger.skippedRanges('j'), []);
  });

  /*
   * Two writers of one job's ledger in one term: a runtime schedule's stopping lane (removed) and the lane
   * of its next life, or a lane and the removed-jobs sweep. Each computes a skipped span from the
   * watermark it read; the other may record a tick of that span in between (found by the chaos audit: a
   * tick enqueued and also inside a `removed` range).
   */
  it('a skipped range never covers a recorded tick: it is refused, and writes nothing', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    assert.deepEqual(await ledger.claim(termA, 'j', 2000, 'j@2000'), { kind: 'claimed', retry: false });
    assert.equal(await ledger.skipRange(termA, 'j', { from: 1000, to: 3000, count: 3, reason: 'removed' }), 'overlaps');
    assert.deepEqual(await ledger.skippedRanges('j'), []);
    assert.deepEqual((await ledger.jobState('j')).skipped, {});
    assert.equal((await ledger.jobState('j')).lastScheduledTick, 2000, 'a refused range moves nothing');
    assert.equal(await ledger.skipRange(termA, 'j', { from: 3000, to: 4000, count: 2, reason: 'removed' }), 'recorded', 'a range past the record is written');
  });

  it('a claim of a tick a recorded range already covers is settled as skipped, never claimed', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    assert.deepEqual(await ledger.claim(termA, 'j', 1000, 'j@1000'), { kind: 'claimed', retry: false });
    assert.equal(await ledger.skipRange(termA, 'j', { from: 2000, to: 4000, count: 3, reason: 'removed' }), 'recorded');
    // A lane that read the watermark before the range was written claims the ticks after it, in order.
    assert.deepEqual(await ledger.claim(termA, 'j', 2000, 'j@2000', { previousTick: 1000 }), { kind: 'settled', state: 'skipped|removed' });
    assert.deepEqual(await ledger.claim(termA, 'j', 3000, 'j@3000', { previousTick: 2000 }), { kind: 'settled', state: 'skipped|removed' });
    assert.equal(await ledger.tickState('j', 3000), undefined, 'the range is its record');
    assert.deepEqual(await ledger.pendingTicks('j'), [1000]);
    assert.equal((await ledger.jobState('j')).lastScheduledTick, 4000);
    assert.deepEqual(await ledger.claim(termA, 'j', 5000, 'j@5000', { previousTick: 4000 }), { kind: 'claimed', retry: false }, 'past the range, claims go on');
  });

  it('a skipped range over a recorded range is refused: no tick is counted twice', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    assert.equal(await ledger.skipRange(termA, 'j', { from: 2000, to: 5000, count: 4, reason: 'removed' }), 'recorded');
    // Two writers that read one watermark both count the span: the second is refused, and counts again.
    assert.equal(await ledger.skipRange(termA, 'j', { from: 2000, to: 5000, count: 4, reason: 'removed' }), 'overlaps');
    assert.equal(await ledger.skipRange(termA, 'j', { from: 3000, to: 6000, count: 4, reason: 'rescheduled' }), 'overlaps');
    assert.equal(await ledger.skipRange(termA, 'j', { from: 1000, to: 2000, count: 2, reason: 'rescheduled' }), 'overlaps');
    assert.equal(await ledger.skipRange(termA, 'j', { from: 6000, to: 7000, count: 2, reason: 'rescheduled' }), 'recorded');
    assert.deepEqual((await ledger.jobState('j')).skipped, { removed: 4, rescheduled: 2 });
  });

  it('a run a failover lost the claim of is claimed as added even inside a range recorded since: it is in BullMQ and runs', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    assert.deepEqual(await ledger.claim(termA, 'j', 1000, 'j@1000'), { kind: 'claimed', retry: false });
    assert.equal(await ledger.skipRange(termA, 'j', { from: 2000, to: 4000, count: 3, reason: 'removed' }), 'recorded');
    assert.deepEqual(await ledger.claim(termA, 'j', 3000, 'j@3000', { previousTick: 2000, added: true }), { kind: 'claimed', retry: false });
    assert.match((await ledger.tickState('j', 3000)) ?? '', /^claimed\|/);
  });

  it('the newest run is known from its claim; a buffered claim is not a run until released', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    await ledger.claim(termA, 'j', 1000, 'j@1000');
    assert.equal((await ledger.jobState('j')).lastJobId, 'j@1000', 'set at claim time, before the job is in BullMQ');
    assert.deepEqual(await ledger.claim(termA, 'j', 2000, 'j@2000', { buffer: true, previousTick: 1000 }), { kind: 'buffered' });
    assert.match((await ledger.tickState('j', 2000)) ?? '', /^buffered\|uid-a\|3\|j@2000$/);
    assert.deepEqual(await ledger.pendingTicks('j'), [1000, 2000]);
    assert.equal((await ledger.jobState('j')).lastJobTick, 1000);
    assert.equal(await ledger.confirm(termA, 'j', 1000, 'j@1000', 1001), 'enqueued');
    // The next term finds the buffered claim in the pending set and releases it with a plain claim.
    await ledger.raiseFence(termA4, 'b', 2);
    // Asked to buffer again (a lane re-deciding the tick), it stays buffered, under the asking term.
    assert.deepEqual(await ledger.claim(termA4, 'j', 2000, 'j@2000', { buffer: true }), { kind: 'buffered' });
    assert.equal(await ledger.tickState('j', 2000), 'buffered|uid-a|4|j@2000');
    assert.deepEqual(await ledger.claim(termA4, 'j', 2000, 'j@2000'), { kind: 'claimed', retry: true });
    assert.equal(await ledger.tickState('j', 2000), 'claimed|uid-a|4|j@2000');
    const state = await ledger.jobState('j');
    assert.equal(state.lastJobId, 'j@2000');
    assert.equal(state.lastJobTick, 2000);
    assert.equal(await ledger.confirm(termA4, 'j', 2000, 'j@2000', 2001), 'enqueued');
    assert.deepEqual(await ledger.pendingTicks('j'), []);
  });

  it('a buffered tick released while the job is paused is recorded as skipped', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    await ledger.claim(termA, 'j', 1000, 'j@1000');
    await ledger.claim(termA, 'j', 2000, 'j@2000', { buffer: true, previousTick: 1000 });
    await ledger.pause('j');
    assert.deepEqual(await ledger.claim(termA, 'j', 2000, 'j@2000'), { kind: 'skipped', reason: 'paused' });
    assert.deepEqual(await ledger.pendingTicks('j'), [1000]);
    assert.equal((await ledger.jobState('j')).lastJobId, 'j@1000');
  });

  // Chaos (aimed Cluster seed 19): a run staged just after its schedule's removal, its add unconfirmed (BullMQ's
  // primary failing over), started on a worker while its lane was taking the claim back: the staging term
  // was current and alive, and that was all a worker asked.
  it('a staged run may start only once its claim is confirmed: an unconfirmed add may yet be taken back', async () => {
    const job = 'staged';
    const [tick, dueAt] = [5_000, 5_000];
    await ledger.raiseFence(termA, 'a', Date.now());
    assert.equal(await ledger.pulse(termA), true);
    const mayStart = () => ledger.stagedRunMayStart({ job, jobId: `${job}@${tick}` }, { tick, dueAt, token: termA, data: undefined, manual: false }, 10_000);
    assert.equal((await ledger.claim(termA, job, tick, `${job}@${tick}`)).kind, 'claimed');
    assert.deepEqual(await mayStart(), { start: false }, 'claimed, its add not confirmed: held');
    await ledger.confirm(termA, job, tick, `${job}@${tick}`, Date.now());
    assert.deepEqual(await mayStart(), { start: true, stop: undefined }, 'confirmed by its live term: it starts');
  });

  it('a staged run that may start gets the stop a leader asked of it in the same check', async () => {
    const job = 'stopped';
    const [tick, dueAt, jobId] = [5_000, 5_000, 'stopped@5000'];
    await ledger.raiseFence(termA, 'a', Date.now());
    assert.equal(await ledger.pulse(termA), true);
    await ledger.claim(termA, job, tick, jobId);
    await ledger.confirm(termA, job, tick, jobId, Date.now());
    assert.equal(await ledger.requestRunStop(termA, { jobId, how: 'cancel', byTick: 10_000 }), true);
    assert.deepEqual(await ledger.stagedRunMayStart({ job, jobId }, { tick, dueAt, token: termA, data: undefined, manual: false }, 10_000), { start: true, stop: { jobId, how: 'cancel', byTick: 10_000 } });
  });

  it('prunes ledger entries older than the retention', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    for (const tick of [100, 200, 300]) {
      await ledger.claim(termA, 'j', tick, `j@${tick}`);
      await ledger.confirm(termA, 'j', tick, `j@${tick}`, tick);
    }
    assert.equal(await ledger.prune('j', 250), 2);
    assert.equal(await ledger.tickState('j', 100), undefined);
    assert.equal(await ledger.tickState('j', 300), 'enqueued|j@300');
  });
});
