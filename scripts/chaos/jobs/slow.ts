import { setTimeout as sleep } from 'node:timers/promises';
import { defineJob } from '../../../src/job.js';
import { recordRun } from './_record.js';

// Runs longer than its period on its own queue: a tick that finds the previous run unfinished is skipped
// (reason overlap), and a run cut off by a crash is recovered by BullMQ's stalled-job check.
export default defineJob({
  name: 'slow',
  every: '2s',
  queue: 'chaos-slow',
  overlap: 'skip',
  attempts: 1,
  handler: async (job, ctx) => {
    await recordRun(job, ctx);
    await sleep(2500);
  },
});
