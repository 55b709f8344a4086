import { setTimeout as sleep } from 'node:timers/promises';
import { defineJob } from '../src/job.js';

/**
 * At 02:30 Berlin time. The time falls into the spring-forward gap once a year (see docs/jobs.md, "Daylight-saving time").
 * A run never overlaps the previous one, a missed night is caught up within 6 hours, and runs spread
 * over up to a minute so that many such jobs do not hit the database at once.
 */
export default defineJob({
  name: 'nightly-report',
  schedule: '30 2 * * *',
  timezone: 'Europe/Berlin',
  overlap: 'skip',
  catchup: { window: '6h', mode: 'latest' },
  jitter: '1m',
  attempts: 3,
  backoff: { type: 'exponential', delay: 10_000 },
  removeOnFail: { age: 7 * 24 * 3600 },
  handler: async (_job, ctx) => {
    ctx.log.info({ day: ctx.tick.toISOString().slice(0, 10) }, 'building the nightly report');
    await sleep(2_000, undefined, { signal: ctx.signal });
    return { rows: 42 };
  },
});
