import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Cluster, Redis } from 'ioredis';
import { RedisConnections, keySlot } from '../../src/redis/redis-topology.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { createAdmin } from '../../src/admin/admin.js';
import { createScheduler } from '../../src/scheduler.js';
import { useRedisCluster } from '../support/redis-cluster.js';
import { assertExactlyOnce } from '../support/topology-audit.js';
import { until } from '../support/until.js';
import { JOBS_DIR, TopologyRun } from './fixtures/runs.js';


describe('Redis Cluster (3 primaries + 3 replicas; real processes)', () => {
  const cluster = useRedisCluster();

  it('runs jobs and a runtime schedule on several queues, and keeps every tick exactly once across a failover of the primary holding the lease and ledger', { timeout: 120_000 }, async (t) => {
    const connections = RedisConnections.fromUrl(cluster.current.url);
    const bullPrefix = connections.bullPrefix(undefined);
    const observer = connections.open('control');
    observer.on('error', () => undefined);
    // Only the URL: the hash-tagged BullMQ prefix (the default, which no other test of this file may
    // take), the durable lock and ledger (WAIT on the node serving the keys' slot) are createScheduler's.
    // The elector, fence and ledger scripts all run on the Cluster client: a CROSSSLOT anywhere fails the run.
    const run = new TopologyRun(cluster.current.url, 'cluster', { defaultBullPrefix: true });
    const keys = run.keys;
    const scheduler = createScheduler(run.scheduler());
    const waitsOnLedgerNode = async (): Promise<number> => {
      const node = (observer as Cluster).nodes('master').find((n) => `${n.options.host}:${n.options.port}` === (observer as Cluster).slots[keySlot(keys.fence)]?.[0]);
      return Number(/cmdstat_wait:calls=(\d+)/.exec(await node!.info('commandstats'))?.[1] ?? 0);
    };
    try {
      await scheduler.start();
      // A runtime schedule: its spec, version and change feed live under the cluster's hash tag, written
      // with a WAIT on the node of that slot, and it is audited like the file jobs across the failover.
      await scheduler.schedules.upsert('tenant-1', { job: 'tenant', every: '1s', catchup: { window: '1m', mode: 'all', max: 120 } });
      await until('every job to run a few times', () => run.ranAtLeast(3), 30_000);
      await until('the schedule to run', () => run.runs.some((r) => r.startsWith('tenant-1@')), 30_000);
      assert.ok((await waitsOnLedgerNode()) > 0, 'deciding writes wait for a replica (WAIT on the node holding the lease and ledger)');
      // The queues Bull Board is built from see the runs, in the hash-tagged prefix.
      for (const queue of scheduler.queues()) {
        assert.equal(queue.opts.prefix, bullPrefix);
        // A run is recorded as its handler starts; BullMQ counts it completed once its finish is confirmed.
        await until(`queue ${queue.name} to show its completed runs`, async () => ((await queue.getJobCounts('completed')).completed ?? 0) >= 3, 10_000);
      }
      assert.deepEqual(new Set(scheduler.queues().map((q) => keySlot(`${bullPrefix}:${q.name}:wait`))).size, 1, 'every queue in the one tagged slot');

      const slot = keySlot(keys.fence);
      const old = await cluster.current.primaryOf(slot);
      const faultAt = Date.now();
      const runsBefore = run.runs.length;
      await old.kill();
      const promoted = await cluster.current.waitForFailover(old, slot);
      // The promoted node has no replica of its own, so with minReplicas 1 nothing can be confirmed on it
      // until one follows it: the killed node restarts (as an orchestrator would) and rejoins as its replica.
      await old.launch();
      const failedOverAt = Date.now();
      await until('runs of ticks after the failover', () => run.ranSince(failedOverAt), 30_000);
      const resumedMs = Date.now() - faultAt;
      const resumedAt = Date.now();
      await until('three more seconds of ticks', () => run.ranSince(resumedAt + 3_000), 30_000);
      await until('the schedule to run after the failover', () => run.runs.some((r) => r.startsWith('tenant-1@') && Number(r.split('@')[1]) >= resumedAt), 30_000);
      assert.equal((await scheduler.schedules.get('tenant-1'))?.version, 1, 'the acknowledged schedule survived the promotion');
      assert.ok(run.runs.length > runsBefore);
      await scheduler.stop();

      // The admin API (what the CLI runs) from the same URL finds the runs under the same prefix.
      const admin = createAdmin({ connection: cluster.current.url, leaseName: run.leaseName, jobsDir: JOBS_DIR });
      try {
        const completed = (await admin.runs('alpha')).filter((entry) => entry.state === 'completed');
        assert.ok(completed.length >= 3, 'leasebeat runs alpha sees its runs completed in BullMQ, under the hash-tagged prefix');
      } finally {
        await admin.close();
      }
      const ledger = new TickLedger(observer as unknown as Redis, keys);
      const report = await run.audit(observer, ['tenant-1']);
      assert.ok((report.summary['tenant-1']?.runs ?? 0) >= 3, JSON.stringify(report.summary['tenant-1']));
      const fence = await ledger.fence();
      t.diagnostic(`failover ${old.port} → ${promoted.port}; fault → runs resumed ${resumedMs} ms; term ${fence.leaderTransitions}; ${JSON.stringify(report.summary)}`);
      assertExactlyOnce(report);
    } finally {
      await scheduler.stop();
      observer.disconnect();
    }
  });
});
