import type { JobDefinition, ScheduledJob } from '../src/scheduling/define-job.js';
import { validateJobDefinition } from '../src/scheduling/schema.js';
import { compileSchedule } from '../src/schedules/spec.js';

/** `count` validated job definitions named `s0…` on one queue, each with the trigger `trigger(i)` (`schedule` or `every`, `startAt`). */
export function generateSchedules(count: number, queue: string, trigger: (index: number) => Partial<JobDefinition>): Map<string, ScheduledJob> {
  const jobs = new Map<string, ScheduledJob>();
  for (let i = 0; i < count; i++) {
    const result = validateJobDefinition({ name: `s${i}`, ...trigger(i), queue, handler: () => undefined }, `/bench/s${i}.ts`);
    if (!result.ok) throw new Error(result.errors.join('\n'));
    jobs.set(result.job.name, result.job);
  }
  return jobs;
}

/** A cron pattern for every schedule. */
export const cron = (pattern: (index: number) => string) => (index: number): Partial<JobDefinition> => ({ schedule: pattern(index) });

/** `count` once-a-second schedules whose ticks are spread evenly over the second (offset i × 1000 / count ms). */
export const perSecondSpread = (count: number) => (index: number): Partial<JobDefinition> => ({
  every: '1s',
  startAt: new Date(Math.floor((index * 1000) / count)).toISOString(),
});

/**
 * `count` runtime schedules `s0…` of one job type on `queue`, each on the cron `schedule`, compiled from
 * their stored specs as every instance's catalog compiles them.
 */
export function generateRuntimeSchedules(count: number, queue: string, schedule: string): Map<string, ScheduledJob> {
  const type = validateJobDefinition({ name: 'bench-type', queue, handler: () => undefined }, '/bench/bench-type.ts');
  if (!type.ok) throw new Error(type.errors.join('\n'));
  const createdAt = Date.now();
  const jobs = new Map<string, ScheduledJob>();
  for (let i = 0; i < count; i++) {
    const compiled = compileSchedule(`s${i}`, { job: 'bench-type', schedule, data: { tenant: i } }, type.job, createdAt);
    if (!compiled.ok) throw new Error(compiled.errors.join('\n'));
    jobs.set(compiled.job.name, compiled.job);
  }
  return jobs;
}
