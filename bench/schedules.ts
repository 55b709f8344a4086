import type { JobDefinition, ScheduledJob } from '../src/scheduling/define-job.js';
import { validateJobDefinition } from '../src/scheduling/schema.js';

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
