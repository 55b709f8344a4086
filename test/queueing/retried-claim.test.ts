import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { KeySpace } from '../../src/queueing/keys.js';
import { TickLedger } from '../../src/queueing/tick-ledger.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';

/**
 * A claim whose reply was lost (a connection reset after the script ran, or a replica WAIT that timed
 * out: `DurabilityError`) is decided again by the lane. By then the tick's own claim is the job's newest
 * run, so a `skip` or `bufferOne` job sees "the previous run is still waiting" and asks to skip or buffer
 * its own tick. The ledger must keep the first decision, or the tick stays claimed and never added, and
 * every later tick of the job is skipped behind it (found by the chaos run on Redis Cluster).
 */
describe('a retried claim keeps its first decision', () => {
  let server: TestRedis;
  let redis: Redis;
  let ledger: TickLedger;
  const term = { generation: 'uid', leaderTransitions: 1 };
  const tick = 1_000_000;

  before(async () => {
    server = await startRedis();
    redis = server.client();
  });
  after(async () => {
    redis.disconnect();
    await server.close();
  });
  beforeEach(async () => {
    await redis.flushall();
    ledger = new TickLedger(redis, new KeySpace('test', 'retry'));
    await ledger.raiseFence(term, 'a', 0);
  });

  it('a tick claimed to run, asked again as skipped for overlap, is still to be added', async () => {
    assert.deepEqual(await ledger.claimTicks(term, [{ job: 'j', tick, jobId: 'j@1' }]), [{ kind: 'claimed', retry: false }]);
    const again = await ledger.claimTicks(term, [{ job: 'j', tick, jobId: 'j@1', request: { skip: 'overlap' } }]);
    assert.deepEqual(again, [{ kind: 'claimed', retry: true }]);
    assert.match((await ledger.tickState('j', tick)) ?? '', /^claimed\|/);
  });

  it('a tick claimed as buffered, asked again as buffered, is buffered (the lane holds it again)', async () => {
    assert.deepEqual(await ledger.claimTicks(term, [{ job: 'j', tick, jobId: 'j@1', request: { buffer: true } }]), [{ kind: 'buffered' }]);
    assert.deepEqual(await ledger.claimTicks(term, [{ job: 'j', tick, jobId: 'j@1', request: { buffer: true } }]), [{ kind: 'buffered' }]);
  });

  it('a tick already skipped or enqueued stays settled', async () => {
    await ledger.claimTicks(term, [{ job: 'j', tick, jobId: 'j@1', request: { skip: 'overlap' } }]);
    assert.deepEqual(await ledger.claimTicks(term, [{ job: 'j', tick, jobId: 'j@1' }]), [{ kind: 'settled', state: 'skipped|overlap' }]);
  });
});
