import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import { testWorkerPool } from '../support/worker-pool.js';
import { silentLogger } from '../../src/util/logger.js';
import { useRedis } from '../support/redis-server.js';
import { scheduledJob } from '../support/scheduled-job.js';
import { until } from '../support/until.js';

describe('WorkerPool pause and resume (what a cordon does to the workers), on real BullMQ', () => {
  const redis = useRedis();
  const queues: Queue[] = [];
  const queue = (name: string): Queue => {
    const created = new Queue(name, { connection: redis.client });
    queues.push(created);
    return created;
  };
  redis.beforeClose(() => Promise.all(queues.map((q) => q.close())));

  it('finishes the active run, takes no new one until resumed, and starts new queues paused', { timeout: 60_000 }, async () => {
    const gates = new Map<string, () => void>();
    const handler = (job: { id?: string }): Promise<string> => new Promise((resolve) => gates.set(job.id!, () => resolve(`done ${job.id}`)));
    const pool = testWorkerPool({ connection: redis.client, logger: silentLogger, tuning: { lockDurationMs: 5_000, stalledIntervalMs: 2_000 } });
    const first = queue('pause-a');
    pool.update(new Map([['slow', scheduledJob({ name: 'slow', every: '1h', queue: 'pause-a', concurrency: 2, handler })]]));
    try {
      assert.equal(pool.state(), 'running');
      await first.add('slow', {}, { jobId: 'one' });
      await until('run one to start', () => Promise.resolve(gates.has('one')), 30_000);
      assert.deepEqual(pool.activeJobIds(), ['pause-a/one']);

      let drained = false;
      const pausing = pool.pause().then(() => (drained = true));
      assert.equal(pool.state(), 'draining', 'stopped taking jobs, one still running');
      await sleep(500);
      assert.equal(drained, false, 'the active run keeps the pool draining');
      assert.deepEqual(pool.activeJobIds(), ['pause-a/one']);

      gates.get('one')!();
      await pausing;
      assert.equal(pool.state(), 'paused');
      assert.equal(pool.activeCount(), 0);
      assert.equal(await first.getJobState('one'), 'completed');
      await first.add('slow', {}, { jobId: 'two' });

      // A queue that appears while paused (a hot-reloaded job file) must not start taking jobs.
      const second = queue('pause-b');
      pool.update(
        new Map([
          ['slow', scheduledJob({ name: 'slow', every: '1h', queue: 'pause-a', concurrency: 2, handler })],
          ['other', scheduledJob({ name: 'other', every: '1h', queue: 'pause-b', handler })],
        ]),
      );
      await second.add('other', {}, { jobId: 'three' });
      await sleep(1_000);
      assert.equal(await first.getJobState('two'), 'waiting');
      assert.equal(await second.getJobState('three'), 'waiting');
      assert.equal(pool.state(), 'paused');

      pool.resume();
      await until('both waiting runs to start', () => Promise.resolve(gates.has('two') && gates.has('three')), 30_000);
      assert.equal(pool.state(), 'running');
      gates.get('two')!();
      gates.get('three')!();
      await until('both to complete', async () => (await first.getJobState('two')) === 'completed' && (await second.getJobState('three')) === 'completed', 30_000);
    } finally {
      for (const release of gates.values()) release();
      await pool.close(5_000);
    }
    assert.equal(pool.state(), 'stopped');
  });
});
