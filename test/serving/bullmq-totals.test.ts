import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Queue, QueueEvents } from 'bullmq';
import { pino } from 'pino';
import { testWorkerPool } from '../support/worker-pool.js';
import { scrapeMetrics } from '../../src/serving/exposition.js';
import { createMetrics } from '../../src/serving/metrics.js';
import { startRedis } from '../support/redis-server.js';
import { scheduledJob, tickJobData } from '../support/scheduled-job.js';

describe("BullMQ's completed and failed totals with leasebeat's workers", () => {
  it('count the runs the WorkerPool finished and failed', async () => {
    const redis = await startRedis();
    const connection = redis.client();
    const queue = new Queue('counted', { connection });
    const eventsConnection = redis.client();
    const events = new QueueEvents('counted', { connection: eventsConnection });
    const pool = testWorkerPool({ connection, logger: pino({ level: 'silent' }) });
    try {
      await events.waitUntilReady();
      pool.update(new Map([
        ['fine', scheduledJob({ name: 'fine', queue: 'counted', handler: () => 'ok' })],
        ['broken', scheduledJob({ name: 'broken', queue: 'counted', handler: () => { throw new Error('boom'); } })],
      ]));
      const runs = [
        await queue.add('fine', tickJobData({}, Date.UTC(2026, 0, 1))),
        await queue.add('fine', tickJobData({}, Date.UTC(2026, 0, 2))),
        await queue.add('broken', tickJobData(), { attempts: 1 }),
      ];
      await Promise.allSettled(runs.map((job) => job.waitUntilFinished(events, 10_000)));
      const text = await scrapeMetrics(createMetrics(), [queue]);
      // BullMQ counts finished jobs only in workers created with its `metrics` option.
      assert.match(text, /^bullmq_job_completed_total\{queue="counted"\} 2$/m);
      assert.match(text, /^bullmq_job_failed_total\{queue="counted"\} 1$/m);
    } finally {
      await pool.close(1000);
      await events.close();
      await queue.close();
      eventsConnection.disconnect();
      connection.disconnect();
      await redis.close();
    }
  });
});
