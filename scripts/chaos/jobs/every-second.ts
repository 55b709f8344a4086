import { defineJob } from '../../../src/job.js';
import { handlerReturns, recordRun } from './_record.js';

// Every tick must run: missed ticks are all caught up after a failover.
export default defineJob({
  name: 'every-second',
  every: '1s',
  catchup: { window: '10m', mode: 'all', max: 1000 },
  attempts: 1,
  handler: async (job, ctx) => {
    await handlerReturns(await recordRun(job, ctx));
  },
});
