import { defineJob } from '../../../src/job.js';
import { handlerReturns, recordRun } from './_record.js';

// Once a minute. The suite picks the second (CHAOS_MINUTE_SECOND) so that the first tick comes soon after
// the cluster starts, and a one-minute run sees two of them.
export default defineJob({
  name: 'per-minute',
  schedule: `${Number(process.env.CHAOS_MINUTE_SECOND ?? 30)} * * * * *`,
  attempts: 1,
  handler: async (job, ctx) => {
    await handlerReturns(await recordRun(job, ctx));
  },
});
