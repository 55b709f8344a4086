import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Job } from 'bullmq';
import { producerMetricsByType } from '../../src/producing/lane-term.js';
import { metricName } from '../../src/workers/worker-pool.js';

describe('per-job metrics of runtime schedules', () => {
  it("the producer's are labelled by the job type, file jobs' by their own name", () => {
    const calls: unknown[][] = [];
    const labelOf = (job: string): string => (job.startsWith('tenant-') ? 'send-report' : job);
    const producer = producerMetricsByType(
      {
        enqueued: (job, lag) => void calls.push(['enqueued', job, lag]),
        skipped: (job, reason, count) => void calls.push(['skipped', job, reason, count]),
        fenced: (count) => void calls.push(['fenced', count]),
      },
      labelOf,
    );
    producer.enqueued('tenant-1', 0.5);
    producer.skipped('tenant-2', 'paused', 3);
    producer.enqueued('nightly', 0);
    producer.fenced(2);
    assert.deepEqual(calls, [
      ['enqueued', 'send-report', 0.5],
      ['skipped', 'send-report', 'paused', 3],
      ['enqueued', 'nightly', 0],
      ['fenced', 2],
    ]);
  });

  it("the workers' are labelled by the job type a schedule's run carries, so no instance needs the schedule", () => {
    // The data leasebeat puts in a runtime schedule's run, and in a file job's.
    const run = (name: string, data: object): Job => ({ name, data }) as Job;
    assert.equal(metricName(run('tenant-3', { tick: 1, type: 'send-report' })), 'send-report');
    assert.equal(metricName(run('nightly', { tick: 1 })), 'nightly');
  });
});
