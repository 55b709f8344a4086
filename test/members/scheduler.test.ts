import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import { MemberStore } from '../../src/members/store.js';
import type { TickJobData } from '../../src/ledger/job-data.js';
import { KeySpace } from '../../src/redis/keys.js';
import { createScheduler } from '../../src/scheduler.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

const JOBS = new URL('./fixtures/jobs/', import.meta.url).pathname;

describe('createScheduler and cordons (in process, real Redis)', () => {
  const redis = useRedis();

  it('a cordon stored for its identity is obeyed from the start; it stays Ready; uncordon brings it into service', { timeout: 60_000 }, async () => {
    const scheduler = createScheduler({
      connection: redis.server.url,
      jobsDir: JOBS,
      leaseName: 'restart',
      identity: 'pod-0',
      election: { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 250 },
      members: { heartbeatIntervalMs: 100, graceMs: 500 },
    });
    // A restart under a fixed identity (a StatefulSet pod name) finds the cordon an operator left.
    await scheduler.members.cordon('pod-0', { at: Date.now(), note: 'disk replacement' });
    const queue = new Queue('long', { connection: redis.client });
    try {
      await scheduler.start();
      const record = await scheduler.members.get('pod-0');
      assert.deepEqual([record?.cordoned, record?.workers, record?.role], [true, 'paused', 'follower'], 'the first record already obeys it');

      const run: TickJobData<{ ms: number }> = { tick: Date.now(), token: { generation: '', leaderTransitions: -1 }, data: { ms: 50 }, manual: true };
      await queue.add('long-sleep', run, { jobId: 'after-restart' });
      await sleep(1_500);
      assert.equal(await queue.getJobState('after-restart'), 'waiting', 'no job is taken');
      assert.equal(await redis.client.exists('leasebeat:{restart}:lease'), 0, 'no vote was cast: the lease was never even created');
      const checks = await scheduler.readiness();
      assert.deepEqual(
        checks.map((c) => [c.name, c.ok]),
        [['redis', true], ['jobs', true], ['elector', true], ['workers', true]],
        'a cordoned instance is out of rotation by choice, not unready',
      );
      const status = await scheduler.status();
      assert.equal(status.cluster.members[0]?.cordoned, true);

      assert.equal(await scheduler.members.uncordon('pod-0'), true);
      await until('it to lead and run the job', async () => scheduler.elector.isLeader() && (await queue.getJobState('after-restart')) === 'completed', 20_000);
      await until('the record to show it', async () => (await scheduler.members.get('pod-0'))?.role === 'leader', 30_000);
      assert.deepEqual((await scheduler.members.get('pod-0'))?.workers, 'running');
    } finally {
      await scheduler.stop();
      await queue.close();
    }
    // The scheduler closed the connection it opened: read with this test's own.
    assert.equal(await new MemberStore(redis.client, new KeySpace('leasebeat', 'restart')).get('pod-0'), undefined, 'stop() leaves the registry');
  });
});
