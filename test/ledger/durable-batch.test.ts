import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DurabilityError, ReplicaWait } from '../../src/redis/durability.js';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { useRedis } from '../support/redis-server.js';

const token = { generation: 'g1', leaderTransitions: 3 };

describe('batched claims and confirmations on a durable ledger (WAIT)', () => {
  const lonely = useRedis();

  it('a batch that no replica acknowledged counts as failed, with one WAIT for the whole batch', async () => {
    const keys = new KeySpace('leasebeat', 'batch');
    await new TickLedger(lonely.client, keys, new ReplicaWait(lonely.client, { minReplicas: 0 })).raiseFence(token, 'me', Date.now());
    const wait = new ReplicaWait(lonely.client, { minReplicas: 1, timeoutMs: 50 });
    const ledger = new TickLedger(lonely.client, keys, wait);
    const claims = Array.from({ length: 20 }, (_, i) => ({ job: `job-${i}`, tick: 1_000, jobId: `job-${i}@1000` }));
    await assert.rejects(ledger.claimTicks(token, claims), DurabilityError);
    assert.match((await ledger.tickState('job-19', 1_000)) ?? '', /^claimed\|/, 'the claims stand on the primary');
    assert.deepEqual(wait.stats, { waits: 1, confirmed: 0, unconfirmed: 1 });
    await assert.rejects(ledger.confirmTicks(token, claims, 2_000), DurabilityError);
    assert.equal(wait.stats.waits, 2);
  });

  it('a fenced batch decides nothing and waits for nothing', async () => {
    const keys = new KeySpace('leasebeat', 'fenced');
    const wait = new ReplicaWait(lonely.client, { minReplicas: 1, timeoutMs: 50 });
    const ledger = new TickLedger(lonely.client, keys, wait);
    const outcomes = await ledger.claimTicks(token, [{ job: 'a', tick: 1_000, jobId: 'a@1000' }]);
    assert.deepEqual(outcomes, [{ kind: 'fenced' }]);
    assert.equal(wait.stats.waits, 0);
  });
});
