import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { QueueSet } from '../../src/redis/queue-set.js';
import { busyFor } from '../support/busy-redis.js';
import { useRedis } from '../support/redis-server.js';

describe('QueueSet on a real Redis', () => {
  const redis = useRedis();

  // BullMQ opens a connection with an INFO (its version check); a refusal of it (BUSY, LOADING after a
  // restart, CLUSTERDOWN mid-failover) used to fail that Queue for good: every add after it was refused
  // with the same error, though Redis was back.
  it('a queue first opened while Redis answers BUSY adds once Redis is back', { timeout: 30_000 }, async () => {
    const queues = new QueueSet({ connection: redis.client, onError: () => undefined });
    try {
      const busy = await busyFor(redis.server, 1_000);
      // As the producer does: a queue is asked for by name at each use.
      const failed = await queues.get('opened-busy').add('job', { n: 0 }).then(() => undefined, (error: Error) => error);
      assert.match(failed?.message ?? '', /^BUSY/, 'the add while Redis is busy fails');
      await queues.flows().waitUntilReady().catch(() => undefined);
      await busy.over;
      const added = await queues.get('opened-busy').add('job', { n: 1 }, { jobId: 'after-busy' });
      assert.equal(added.id, 'after-busy');
      const flow = await queues.flows().add({ name: 'parent', queueName: 'opened-busy', children: [{ name: 'child', queueName: 'opened-busy' }] });
      assert.ok(flow.job.id);
    } finally {
      await queues.close();
    }
  });
});
