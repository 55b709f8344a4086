import { defineJob } from '../../../src/job.js';
import { handlerReturns, recordRun } from './_record.js';

// A job type (neither schedule nor every): it never ticks by itself. The chaos run's schedules client
// (schedules-client.ts) upserts runtime schedules of it during the faults; each run records its data,
// which names the client's write it was scheduled by, so the audit can tell which version ran each tick.
export default defineJob({
  name: 'tenant',
  queue: 'chaos-tenants',
  attempts: 1,
  handler: async (job, ctx) => {
    await handlerReturns(await recordRun(job, ctx));
  },
});
