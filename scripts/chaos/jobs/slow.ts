import { setTimeout as sleep } from 'node:timers/promises';
import { defineJob } from '../../../src/job.js';
import { handlerReturns, recordEnd, recordRun } from './_record.js';

// Runs longer than its period on its own queue: a tick that finds the previous run unfinished is skipped
// (reason overlap), and a run cut off by a crash is recovered by BullMQ's stalled-job check. Its runs
// must never overlap and must come in tick order.
export default defineJob({
  name: 'slow',
  every: '2s',
  queue: 'chaos-slow',
  overlap: 'skip',
  attempts: 1,
  handler: async (job, ctx) => {
    const start = await recordRun(job, ctx);
    await sleep(2500);
    await recordEnd(start);
    await handlerReturns(start);
  },
});
