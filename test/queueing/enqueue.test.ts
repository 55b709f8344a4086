import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { addRun } from '../../src/queueing/enqueue.js';
import { QueueSet } from '../../src/queueing/queue-set.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { scheduledJob, tickJobData } from '../support/scheduled-job.js';

describe('addRun on a real Redis and BullMQ', () => {
  let server: TestRedis;
  let redis: Redis;
  let queues: QueueSet;

  before(async () => {
    server = await startRedis();
    redis = server.client();
    queues = new QueueSet({ connection: redis });
  });
  after(async () => {
    await queues.close();
    redis.disconnect();
    await server.close();
  });

  it('a repeated add of a flow run (a retried claim) adds its parent and children once, with ids derived from the run', async () => {
    const job = scheduledJob({
      name: 'fan',
      flow: () => ({ name: 'fan', data: {}, children: [{ name: 'shard', data: { shard: 0 }, children: [{ name: 'leaf', data: {} }] }, { name: 'shard', data: { shard: 1 } }] }),
    });
    const opts = { jobId: 'fan@1000', deduplication: { id: 'fan@1000', ttl: 60_000 } };
    assert.equal(await addRun(queues, job, tickJobData({}, 1000), opts), 'fan@1000');
    assert.equal(await addRun(queues, job, tickJobData({}, 1000), opts), 'fan@1000');
    const queue = new Queue('leasebeat', { connection: redis });
    try {
      const all = await queue.getJobs(['waiting', 'waiting-children', 'delayed', 'prioritized']);
      assert.deepEqual(all.map((j) => j.id).sort(), ['fan@1000', 'fan@1000/0', 'fan@1000/0/0', 'fan@1000/1']);
    } finally {
      await queue.close();
    }
  });
});
