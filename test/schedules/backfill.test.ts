import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Queue, type Job } from 'bullmq';
import type { BackfillProgress } from '../../src/index.js';
import type { TickJobData } from '../../src/ledger/job-data.js';
import { useRedis } from '../support/redis-server.js';
import { useScheduleInstance } from '../support/schedule-instance.js';
import { until } from '../support/until.js';

const EVERY_MS = 5_000;

describe('backfill of a runtime schedule on a running instance (real Redis and BullMQ)', () => {
  const redis = useRedis();
  const instance = useScheduleInstance(redis);

  it('runs the ticks of its time before the schedule existed (a move from BullMQ), with its data and job type, once each', { timeout: 60_000 }, async () => {
    const { schedules, admin } = instance.scheduler;
    await schedules.upsert('moved', { job: 'work', every: '5s', data: { tenant: 7 } });
    await until('the leader to take the schedule over and record a tick', async () => !(await redis.client.hmget('leasebeat:{leasebeat}:job:moved', 'scheduledSince', 'lastScheduledTick')).includes(null), 30_000);
    const created = Date.parse((await schedules.get('moved'))!.createdAt);
    // The six ticks before its creation: no record, never run (it was scheduled elsewhere then).
    const to = Math.floor((created - 1) / EVERY_MS) * EVERY_MS;
    const from = to - 5 * EVERY_MS;
    const requested = await admin.backfill('moved', { from, to, rate: 100, by: 'tester' });
    const ended = await until('the backfill to end', async () => (await admin.backfills('moved')).find((b: BackfillProgress) => b.id === requested.id && b.state === 'done'), 30_000);
    assert.deepEqual([ended.total, ended.enqueued], [6, 6]);
    const queue = new Queue('leasebeat', { connection: redis.client });
    try {
      const runs = await until('the six backfill runs to complete', async () => {
        const done = (await queue.getJobs(['completed'])) as Array<Job<TickJobData>>;
        const mine = done.filter((job) => job.data.backfill === requested.id);
        return mine.length === 6 ? mine : undefined;
      }, 30_000);
      assert.deepEqual(runs.map((run) => run.data.tick).sort((a, b) => a - b), [0, 1, 2, 3, 4, 5].map((k) => from + k * EVERY_MS));
      for (const run of runs) {
        assert.equal(run.data.type, 'work', "run by the schedule's job type");
        assert.deepEqual(run.returnvalue, { tick: run.data.tick, data: { tenant: 7 } }, "with the schedule's data");
      }
    } finally {
      await queue.close();
    }
    // The same backfill again finds every tick run.
    const again = await admin.backfill('moved', { from, to, rate: 100, by: 'tester' });
    const second = await until('the second backfill to end', async () => (await admin.backfills('moved')).find((b: BackfillProgress) => b.id === again.id && b.state === 'done'), 30_000);
    assert.deepEqual([second.enqueued, second.listed.ran], [0, 6]);
  });
});
