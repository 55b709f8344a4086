import type { ScheduledJob } from '../src/scheduling/define-job.js';
import { validateJobDefinition } from '../src/scheduling/schema.js';

/** `count` validated job definitions named `s0…`, each with the cron pattern `pattern(i)`, on one queue. */
export function generateSchedules(count: number, queue: string, pattern: (index: number) => string): Map<string, ScheduledJob> {
  const jobs = new Map<string, ScheduledJob>();
  for (let i = 0; i < count; i++) {
    const result = validateJobDefinition({ name: `s${i}`, schedule: pattern(i), queue, handler: () => undefined }, `/bench/s${i}.ts`);
    if (!result.ok) throw new Error(result.errors.join('\n'));
    jobs.set(result.job.name, result.job);
  }
  return jobs;
}
