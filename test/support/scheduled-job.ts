import type { JobDefinition, ScheduledJob } from '../../src/scheduling/define-job.js';
import { validateJobDefinition } from '../../src/scheduling/schema.js';
import type { TickJobData } from '../../src/ledger/job-data.js';

/** A job definition validated as the loader would (default trigger: every minute), for WorkerPool tests. */
export function scheduledJob(definition: Partial<JobDefinition> & { name: string }): ScheduledJob {
  const result = validateJobDefinition({ every: '1m', ...definition }, `/jobs/${definition.name}.ts`);
  if (!result.ok) throw new Error(result.errors.join('\n'));
  return result.job;
}

/** The data of a tick's BullMQ job, as the producer writes it. */
export function tickJobData(data: unknown = {}, tick = Date.UTC(2026, 0, 1)): TickJobData {
  return { tick, token: { generation: 'g', leaderTransitions: 4 }, data, manual: false };
}
