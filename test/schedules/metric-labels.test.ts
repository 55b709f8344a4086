import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { producerMetricsByType, workerMetricsByType } from '../../src/schedules/metric-labels.js';

describe('per-job metrics of runtime schedules', () => {
  const labelOf = (job: string): string => (job.startsWith('tenant-') ? 'send-report' : job);

  it('are labelled by the job type, file jobs by their own name', () => {
    const calls: unknown[][] = [];
    const producer = producerMetricsByType(
      { enqueued: (...args) => void calls.push(['enqueued', ...args]), skipped: (...args) => void calls.push(['skipped', ...args]), fenced: (...args) => void calls.push(['fenced', ...args]) },
      labelOf,
    );
    producer.enqueued('tenant-1', 0.5);
    producer.skipped('tenant-2', 'paused', 3);
    producer.enqueued('nightly', 0);
    producer.fenced(2);
    const workers = workerMetricsByType(
      { started: (...args) => void calls.push(['started', ...args]), notRunAgain: (...args) => void calls.push(['notRunAgain', ...args]), finishUnrecorded: (...args) => void calls.push(['finishUnrecorded', ...args]) },
      labelOf,
    );
    workers.started('tenant-3', 'first', { tick: 1, startedAt: 2 });
    workers.notRunAgain('tenant-3', 'finish-lost');
    workers.finishUnrecorded('nightly');
    assert.deepEqual(calls, [
      ['enqueued', 'send-report', 0.5],
      ['skipped', 'send-report', 'paused', 3],
      ['enqueued', 'nightly', 0],
      ['fenced', 2],
      ['started', 'send-report', 'first', { tick: 1, startedAt: 2 }],
      ['notRunAgain', 'send-report', 'finish-lost'],
      ['finishUnrecorded', 'nightly'],
    ]);
  });
});
