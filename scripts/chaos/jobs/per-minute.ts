import { defineJob } from '../../../src/job.js';
import { recordRun } from './_record.js';

// Once a minute, at second 30.
export default defineJob({
  name: 'per-minute',
  schedule: '30 * * * * *',
  attempts: 1,
  handler: async (job, ctx) => {
    await recordRun(job, ctx);
  },
});
