import { setTimeout as sleep } from 'node:timers/promises';
import { defineJob } from '../../../src/job.js';
import { handlerReturns, recordEnd, recordRun } from './_record.js';

// Runs longer than its period with `bufferOne`: a tick that finds the previous run unfinished waits for it
// (one at most; older buffered ticks are skipped). Its runs must never overlap and must come in tick order,
// across processes and across terms.
export default defineJob({
  name: 'buffered',
  every: '2s',
  queue: 'chaos-buffered',
  overlap: 'bufferOne',
  attempts: 1,
  handler: async (job, ctx) => {
    const start = await recordRun(job, ctx);
    await sleep(2300);
    await recordEnd(start);
    await handlerReturns(start);
  },
});
