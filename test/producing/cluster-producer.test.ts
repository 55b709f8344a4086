import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { pino } from 'pino';
import type { Term } from '../../src/election/record.js';
import { KeySpace } from '../../src/redis/keys.js';
import { submitTrigger, triggerOutcome } from '../../src/producing/manual-triggers.js';
import { Producer } from '../../src/producing/producer.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import { RedisConnections } from '../../src/redis/redis-topology.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { useRedisCluster } from '../support/redis-cluster.js';
import { scheduledJob } from '../support/scheduled-job.js';
import { until } from '../support/until.js';

/**
 * The batched scripts (claims, confirmations, takeover reads of many jobs in one script) and the trigger
 * desk's blocking read on its own connection, on Redis Cluster: every key of a script in one slot, and a
 * duplicated Cluster client for the desk.
 */
const logger = pino({ level: 'silent' });
const term: Term = { holderIdentity: 'leader', generation: 'gen-1', leaderTransitions: 1, acquireTime: Date.now() };
const JOBS = 600;

describe('Producer on Redis Cluster', () => {
  const cluster = useRedisCluster();

  it(`${JOBS} jobs ticking together (batches over 500) and a manual trigger, all on one slot`, { timeout: 120_000 }, async () => {
    const connections = RedisConnections.fromUrl(cluster.current.url);
    const redis = connections.open('control') as Redis;
    redis.on('error', () => undefined);
    const keys = new KeySpace('leasebeat', 'cluster-producer');
    const ledger = new TickLedger(redis, keys);
    const queues = new QueueSet({ connection: redis, prefix: connections.bullPrefix(undefined) });
    const jobs = new Map<string, ScheduledJob>();
    for (let i = 0; i < JOBS; i++) jobs.set(`j${i}`, scheduledJob({ name: `j${i}`, every: '1s', queue: 'cluster', handler: () => undefined }));
    // The takeover reads of one term may straddle a tick (batches read apart under load), and a job no term
    // ticked yet owes its ticks only from when a leader first saw it. Made certain here: the ledger says a
    // leader first saw the last third 1.5 s from now, so they owe none of the first ticks the others run.
    const seenLater = Date.now() + 1_500;
    for (let i = (JOBS * 2) / 3; i < JOBS; i++) await redis.hset(keys.jobState(`j${i}`), 'scheduledSince', seenLater);
    const stop = new AbortController();
    const run = new Producer({ redis, ledger, queues, jobs: () => jobs, stillLeading: () => true, logger }).run(term, stop.signal);
    try {
      // Every job owes the newest of their first ticks.
      const tick = await until(
        'a tick recorded for every job',
        async () => {
          const ticks = (await Promise.all([...jobs.keys()].map((job) => ledger.jobState(job)))).map((state) => state.lastScheduledTick);
          return ticks.every((tick) => tick !== undefined) && Math.max(...ticks);
        },
        30_000,
        100,
      );
      assert.ok(tick > seenLater, 'the jobs seen later start after the others');
      await until(
        `every job's tick ${tick} enqueued`,
        async () => (await Promise.all([...jobs.keys()].map((job) => ledger.tickState(job, tick)))).every((state) => state?.startsWith('enqueued|')),
        15_000,
        100,
      );
      const request = await submitTrigger(redis, keys, 'j7', 10_000);
      const outcome = await until('the trigger outcome', () => triggerOutcome(redis, keys, request.id), 10_000, 50);
      assert.deepEqual(outcome, { jobId: `j7@manual-${request.id}`, queue: 'cluster', flow: false });
    } finally {
      stop.abort();
      await run;
      await queues.close();
      redis.disconnect();
    }
  });
});
