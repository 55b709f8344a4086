import type { JobDefinition, ScheduledJob } from '../../src/scheduling/define-job.js';
import { validateJobDefinition } from '../../src/scheduling/schema.js';
import type { TickJobData } from '../../src/ledger/job-data.js';

/**
 * A job definition validated as the loader would, from `/jobs/<name>.ts`; throws what the loader would
 * report. The trigger is every minute unless the definition sets `schedule` or `every`.
 */
export function scheduledJob(definition: Partial<JobDefinition> & { name: string }): ScheduledJob {
  const trigger = definition.schedule === undefined && definition.every === undefined ? { every: '1m' } : {};
  const result = validateJobDefinition({ ...trigger, ...definition }, `/jobs/${definition.name}.ts`);
  if (!result.ok) throw new Error(result.errors.join('\n'));
  return result.job;
}

/** A job type (a definition with neither `schedule` nor `every`), validated as the loader would. */
export function jobType(name: string, handler: JobDefinition['handler'] = () => undefined): ScheduledJob {
  const result = validateJobDefinition({ name, handler }, `/jobs/${name}.ts`);
  if (!result.ok) throw new Error(result.errors.join('\n'));
  return result.job;
}

/** {@link scheduledJob} with fields a test's jobs share (such as `every` and `handler`); a job's own win. */
export function scheduledJobWith(defaults: Partial<JobDefinition>): (definition: Partial<JobDefinition> & { name: string }) => ScheduledJob {
  return (definition) => scheduledJob({ ...defaults, ...definition } as Partial<JobDefinition> & { name: string });
}

/** The data of a tick's BullMQ job, as the producer writes it. */
export function tickJobData(data: unknown = {}, tick = Date.UTC(2026, 0, 1)): TickJobData {
  return { tick, token: { generation: 'g', leaderTransitions: 4 }, data, manual: false };
}
