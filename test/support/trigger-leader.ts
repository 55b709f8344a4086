import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { KeySpace } from '../../src/redis/keys.js';
import { Producer } from '../../src/producing/producer.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { loadJobs } from '../../src/scheduling/loader.js';

/** An in-process leader (a producer in one term) over the jobs of `dir`: what a trigger needs to run. */
export async function leadInProcess(redis: Redis, dir: string, transitions = 1): Promise<{ jobs: ReadonlyMap<string, ScheduledJob>; stop(): Promise<void> }> {
  const { jobs } = await loadJobs(dir);
  const queues = new QueueSet({ connection: redis });
  const producer = new Producer({
    redis,
    ledger: new TickLedger(redis, new KeySpace()),
    queues,
    jobs: () => jobs,
    stillLeading: () => true,
    logger: pino({ level: 'silent' }),
  });
  const stop = new AbortController();
  const term = { holderIdentity: 'test-leader', generation: 'test-gen', leaderTransitions: transitions, acquireTime: Date.now() };
  const run = producer.run(term, stop.signal);
  return {
    jobs,
    stop: async () => {
      stop.abort();
      await run;
      await queues.close();
    },
  };
}
