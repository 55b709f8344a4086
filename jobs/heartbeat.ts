import { defineJob } from '../src/job.js';

/** Every 10 seconds: shows who enqueued each tick (the term) and who ran it. */
export default defineJob({
  name: 'heartbeat',
  every: '10s',
  data: { message: 'still here' },
  removeOnComplete: { age: 3600, count: 1000 },
  handler: (job, ctx) => {
    ctx.log.info({ tick: ctx.tick.toISOString(), term: ctx.token, runner: process.pid }, 'heartbeat');
    return { tick: ctx.tick.toISOString(), ranOn: process.pid };
  },
});
