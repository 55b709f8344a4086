import type { ProducerMetrics } from '../producing/lane-term.js';
import type { WorkerMetrics } from '../workers/worker-pool.js';

/**
 * The per-job metric hooks with a runtime schedule's runs labelled by its job type (`job="<type>"`): one
 * series per job type, not per schedule, so that 100,000 schedules do not make 100,000 × reasons series
 * on every instance. File jobs keep their own name. `labelOf` maps a job name to its label.
 */
export function producerMetricsByType(hooks: ProducerMetrics, labelOf: (job: string) => string): ProducerMetrics {
  return {
    enqueued: (job, lagSeconds) => hooks.enqueued(labelOf(job), lagSeconds),
    skipped: (job, reason, count) => hooks.skipped(labelOf(job), reason, count),
    fenced: (count) => hooks.fenced(count),
  };
}

export function workerMetricsByType(hooks: WorkerMetrics, labelOf: (job: string) => string): WorkerMetrics {
  return {
    started: (job, kind, run) => hooks.started(labelOf(job), kind, run),
    notRunAgain: (job, reason) => hooks.notRunAgain(labelOf(job), reason),
    finishUnrecorded: (job) => hooks.finishUnrecorded(labelOf(job)),
  };
}
