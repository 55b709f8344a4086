import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { KeySpace } from '../src/redis/keys.js';
import type { ProducerMetrics } from '../src/producing/lane-term.js';
import { Producer } from '../src/producing/producer.js';
import { QueueSet } from '../src/redis/queue-set.js';
import { DEFAULT_STAGE_AHEAD_MS } from '../src/producing/staging.js';
import { TickLedger } from '../src/ledger/tick-ledger.js';
import type { ScheduledJob } from '../src/scheduling/define-job.js';

/** A leasebeat Producer leading alone, in this process, over the given schedules. */
export interface RunningProducer {
  queues: QueueSet;
  /** Resolves with `Date.now()` when every job has been taken over and the tick loop begins. */
  looping: Promise<number>;
  stop(): Promise<void>;
}

/**
 * Starts the real `Producer` for one term, as the leader's scheduler does, minus the elector: it leads
 * until `stop()`. `looping` resolves when the producer reports every job taken over. Pre-staging is on
 * with the scheduler's default horizon unless `stageAheadMs` says otherwise.
 */
export function startProducer(options: { redis: Redis; jobs: Map<string, ScheduledJob>; metrics?: ProducerMetrics; stageAheadMs?: number }): RunningProducer {
  let loopStarted: (at: number) => void = () => undefined;
  const looping = new Promise<number>((resolve) => (loopStarted = resolve));
  const queues = new QueueSet({ connection: options.redis });
  const producer = new Producer({
    redis: options.redis,
    ledger: new TickLedger(options.redis, new KeySpace()),
    queues,
    jobs: () => options.jobs,
    stillLeading: () => true,
    logger: pino({ level: 'silent' }),
    metrics: options.metrics,
    onTakenOver: () => loopStarted(Date.now()),
    stageAheadMs: options.stageAheadMs ?? DEFAULT_STAGE_AHEAD_MS,
  });
  const term = new AbortController();
  const run = producer.run({ holderIdentity: 'bench', generation: 'bench', leaderTransitions: 1, acquireTime: Date.now() }, term.signal);
  return {
    queues,
    looping,
    stop: async () => {
      term.abort();
      await run;
      await queues.close();
    },
  };
}
