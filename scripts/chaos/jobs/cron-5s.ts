import { defineJob } from '../../../src/job.js';
import { DELIBERATE_FAILURE, handlerReturns, recordRun } from './_record.js';

// A 6-field cron with the default catch-up (latest only: older missed ticks are recorded as skipped).
// Every fourth tick fails in its handler, so "failed by its own handler" is exercised too.
export default defineJob({
  name: 'cron-5s',
  schedule: '*/5 * * * * *',
  attempts: 1,
  handler: async (job, ctx) => {
    await handlerReturns(await recordRun(job, ctx));
    if ((ctx.tick.getTime() / 5000) % 4 === 0) throw new Error(`${DELIBERATE_FAILURE} of tick ${ctx.tick.toISOString()}`);
  },
});
