import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { useRedis } from '../support/redis-server.js';
import { auditTicks } from '../support/topology-audit.js';

const token = { generation: 'g1', leaderTransitions: 1 };
// A leader first saw the job at T0 + 400 ms: it owes T0 + 1 s, T0 + 2 s, …
const T0 = Date.UTC(2026, 0, 1);
const OWED = [1, 2, 3, 4, 5].map((s) => T0 + s * 1_000);

/**
 * The topology tests' audit must catch what it exists for: a tick owed that neither ran nor has a
 * record, wherever it lies in the range (the first owed tick too), and runs the lease never owed.
 */
describe('the topology tests’ tick audit (auditTicks) on a ledger written by the real scripts', () => {
  const redis = useRedis();

  /**
   * A ledger where a leader took `job` over at T0 + 400 ms and claimed every owed tick. Claims only: a
   * claim counts as a record for the audit as `enqueued` does, and so this test depends on no more of the
   * ledger's API than the audit does.
   */
  async function ledgerOf(lease: string, job: string): Promise<KeySpace> {
    const keys = new KeySpace('leasebeat', lease);
    const ledger = new TickLedger(redis.client, keys);
    assert.deepEqual(await ledger.raiseFence(token, 'a', T0), { ok: true });
    await ledger.takeOverStates([{ job, stagedWithinMs: 0 }], T0 + 400);
    let previousTick: number | undefined;
    for (const tick of OWED) {
      assert.equal((await ledger.claim(token, job, tick, `${job}@${tick}`, { previousTick })).kind, 'claimed');
      previousTick = tick;
    }
    return keys;
  }

  const runsOf = (job: string, ticks: number[]): string[] => ticks.map((tick) => `${job}@${tick}`);

  it('passes every owed tick run once, and a tick unrun but recorded', async () => {
    const keys = await ledgerOf('all-ran', 'job');
    assert.deepEqual(await auditTicks(redis.client, keys, ['job'], runsOf('job', OWED)), {
      duplicates: [], silentGaps: [], unowed: [], summary: { job: { owedSince: T0 + 400, runs: 5, ticks: 5, skipped: 0 } },
    });
    // Recorded, its run not seen (e.g. a claim the next leader finishes): counted, not a gap.
    assert.deepEqual((await auditTicks(redis.client, keys, ['job'], runsOf('job', OWED.filter((t) => t !== OWED[2])))).silentGaps, []);
  });

  it('reports a lost tick (no run, no record) in the middle and at the first owed tick', async () => {
    for (const [lease, lost] of [['lost-middle', OWED[2]!], ['lost-first', OWED[0]!]] as const) {
      const keys = await ledgerOf(lease, 'job');
      await redis.client.hdel(keys.ledger('job'), String(lost));
      const report = await auditTicks(redis.client, keys, ['job'], runsOf('job', OWED.filter((t) => t !== lost)));
      assert.deepEqual(report.silentGaps, [`job@${lost}`]);
    }
  });

  it("reports runs the lease never owed (before scheduledSince, or of a job never taken over) and duplicates", async () => {
    const keys = await ledgerOf('foreign', 'job');
    // What an earlier test's staged runs looked like in issue 18: older ticks, run by this test's workers.
    const report = await auditTicks(redis.client, keys, ['job', 'other'], [...runsOf('job', [T0 - 1_000, T0, ...OWED, OWED[4]!]), 'other@1000']);
    assert.deepEqual(report.unowed, [`job@${T0 - 1_000}`, `job@${T0}`, 'other@1000']);
    assert.deepEqual(report.duplicates, [`job@${OWED[4]} ×2`]);
    assert.deepEqual(report.silentGaps, [], 'the foreign runs do not move the start of the range');
  });
});
