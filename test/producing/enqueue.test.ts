import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { addRun } from '../../src/producing/enqueue.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import { useRedis } from '../support/redis-server.js';
import { scheduledJob, tickJobData } from '../support/scheduled-job.js';
import { until } from '../support/until.js';
import { testWorkerPool } from '../support/worker-pool.js';
import { silentLogger } from '../../src/util/logger.js';

describe('addRun on a real Redis and BullMQ', () => {
  const redis = useRedis();
  let queues: QueueSet;

  before(() => {
    queues = new QueueSet({ connection: redis.client });
  });
  redis.beforeClose(() => queues.close());

  it('a repeated add of a flow run (a retried claim) adds its parent and children once, with ids derived from the run', async () => {
    const job = scheduledJob({
      name: 'fan',
      flow: () => ({ name: 'fan', data: {}, children: [{ name: 'shard', data: { shard: 0 }, children: [{ name: 'leaf', data: {} }] }, { name: 'shard', data: { shard: 1 } }] }),
    });
    const opts = { jobId: 'fan@1000', deduplication: { id: 'fan@1000', ttl: 60_000 } };
    assert.equal(await addRun(queues, job, tickJobData({}, 1000), opts), 'fan@1000');
    assert.equal(await addRun(queues, job, tickJobData({}, 1000), opts), 'fan@1000');
    const queue = new Queue('leasebeat', { connection: redis.client });
    try {
      const all = await queue.getJobs(['waiting', 'waiting-children', 'delayed', 'prioritized']);
      assert.deepEqual(all.map((j) => j.id).sort(), ['fan@1000', 'fan@1000/0', 'fan@1000/0/0', 'fan@1000/1']);
    } finally {
      await queue.close();
    }
  });

  it('a flow that ran (removeOnComplete: true) is kept, so a next term finishing its pending claim adds nothing and nothing runs twice', async () => {
    const runs: string[] = [];
    const job = scheduledJob({
      name: 'kept',
      queue: 'kept',
      removeOnComplete: true,
      removeOnFail: 3,
      handler: (run) => void runs.push(String(run.id)),
      flow: () => ({ name: 'kept', data: {}, children: [{ name: 'kept', data: {} }] }),
    });
    const opts = { ...job.jobOptions, jobId: 'kept@1000', deduplication: { id: 'kept@1000', ttl: 3_600_000 } };
    await addRun(queues, job, tickJobData({}, 1000), opts);
    const pool = testWorkerPool({ connection: redis.client, logger: silentLogger });
    const queue = new Queue('kept', { connection: redis.client });
    try {
      pool.update(new Map([[job.name, job]]));
      await until('the flow to complete', async () => (await queue.getJobState('kept@1000')) === 'completed', 10_000);
      const parent = await queue.getJob('kept@1000');
      assert.deepEqual(parent?.opts.removeOnComplete, { age: 3600 }, 'kept for the ledger\'s retention, as an age');
      assert.deepEqual(parent?.opts.removeOnFail, { age: 3600 }, 'a count would remove it whatever its age');
      // The term that claimed it died before its confirm; the next one adds it again, with the same ids.
      await addRun(queues, job, tickJobData({}, 1000), opts);
      // A run added after the re-add is taken after anything the re-add put in the queue.
      await queue.add('kept', tickJobData({}, 2000), { jobId: 'after' });
      await until('the run added after it to run', () => runs.includes('after'), 10_000);
      assert.deepEqual(runs.sort(), ['after', 'kept@1000', 'kept@1000/0'], 'parent and child ran once each');
      assert.equal(await queue.getJobState('kept@1000'), 'completed');
    } finally {
      await pool.close(1_000);
      await queue.close();
    }
  });
});
