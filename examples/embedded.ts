/**
 * Embedding leasebeat in an existing BullMQ application, with its own Redis client:
 *
 *   REDIS_URL=redis://127.0.0.1:6379 node --import tsx examples/embedded.ts
 *
 * Start it twice: one process leads and enqueues, both process the runs. Ctrl-C stops it gracefully.
 */
import { Redis } from 'ioredis';
import { createLogger } from '../src/util/logger.js';
import { createScheduler } from '../src/index.js';

const connection = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
const scheduler = createScheduler({
  connection,
  jobsDir: new URL('../jobs', import.meta.url).pathname,
  leaseName: 'embedded-example',
  election: { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 },
  logger: createLogger({ level: 'warn' }),
});

await scheduler.start();
const timer = setInterval(() => {
  void scheduler.status().then((status) => {
    const jobs = status.jobs.map((job) => `${job.name}: ${job.enqueued} enqueued, next ${job.nextRuns[0] ?? '-'}`).join('; ');
    console.log(`${status.instance.identity} is ${status.instance.role}; leader ${status.cluster.leader}; ${jobs}`);
  });
}, 5_000);

process.once('SIGINT', () => {
  clearInterval(timer);
  void scheduler.stop().then(() => connection.quit());
});
