import { defineJob } from '../src/job.js';

/**
 * Every 5 minutes, on the minute (a 6-field cron with seconds). Uses a queue of its own so a slow
 * cleanup never delays the other jobs, and keeps only the last 100 results.
 */
export default defineJob({
  name: 'cleanup',
  schedule: '0 */5 * * * *',
  queue: 'maintenance',
  concurrency: 1,
  catchup: { window: '30m', mode: 'all', max: 3 },
  removeOnComplete: 100,
  data: { olderThanDays: 30 },
  handler: (_job, ctx) => {
    ctx.log.info({ olderThanDays: ctx.data.olderThanDays, manual: ctx.manual }, 'cleaning up');
    return { removed: 0 };
  },
});
