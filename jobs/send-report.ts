import { defineJob } from '../src/job.js';

/**
 * A job type: no `schedule` and no `every`, so it runs only on the ticks of runtime schedules that name it
 * (one per tenant, say: `npx leasebeat schedules upsert tenant-42.daily --job send-report …`), or on a
 * trigger. Each schedule's `data` reaches the handler as `ctx.data`.
 */
export default defineJob<{ tenant?: number }>({
  name: 'send-report',
  attempts: 3,
  handler: (_job, ctx) => {
    ctx.log.info({ tenant: ctx.data.tenant, runId: ctx.runId }, 'sending the report');
    return { sent: true };
  },
});
