import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { RespCommandCounter } from '../../bench/resp-counter.js';
import type { Term } from '../../src/election/record.js';
import { KeySpace } from '../../src/redis/keys.js';
import { submitTrigger, triggerOutcome } from '../../src/producing/manual-triggers.js';
import { Producer } from '../../src/producing/producer.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { useRedis } from '../support/redis-server.js';
import { scheduledJob } from '../support/scheduled-job.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { until } from '../support/until.js';

/**
 * What a burst of due ticks and a takeover cost in Redis commands, counted on the producer's own
 * connection (a RESP-counting proxy), not timed: the old per-tick path sent three scripts per tick
 * (claim, add, confirm) and five reads per job at takeover.
 */
const logger = pino({ level: 'silent' });
const term: Term = { holderIdentity: 'leader', generation: 'gen-1', leaderTransitions: 1, acquireTime: Date.now() };
const JOBS = 1000;

function schedules(every: string, { count = JOBS, startAt }: { count?: number; startAt?: Date } = {}): Map<string, ScheduledJob> {
  const jobs = new Map<string, ScheduledJob>();
  for (let i = 0; i < count; i++) jobs.set(`j${i}`, scheduledJob({ name: `j${i}`, every, startAt, queue: 'burst', handler: () => undefined }));
  return jobs;
}

describe('Producer batching, by Redis commands', () => {
  const redis = useRedis({ flush: true });
  let proxy: TcpProxy;
  let counter: RespCommandCounter;
  let producerRedis: Redis;
  let queues: QueueSet;
  const keys = new KeySpace();

  beforeEach(async () => {
    counter = new RespCommandCounter();
    proxy = await TcpProxy.start({ port: redis.server.port }, { onClientData: (chunk, connection) => counter.push(chunk, connection) });
    producerRedis = new Redis({ port: proxy.port, host: '127.0.0.1', maxRetriesPerRequest: null });
    queues = new QueueSet({ connection: producerRedis });
  });

  const start = (jobs: Map<string, ScheduledJob>): { stop(): Promise<void> } => {
    const producer = new Producer({ redis: producerRedis, ledger: new TickLedger(producerRedis, keys), queues, jobs: () => jobs, stillLeading: () => true, logger });
    const signal = new AbortController();
    const run = producer.run(term, signal.signal);
    return {
      stop: async () => {
        signal.abort();
        await run;
        await queues.close();
        producerRedis.disconnect();
        await proxy.close();
      },
    };
  };

  /**
   * The commands counted from now until the returned function is called, by name. (The counter itself
   * keeps running: one started afresh could begin in the middle of a command.)
   */
  const countFromNow = (): (() => Record<string, number>) => {
    const before = new Map(counter.byCommand);
    return () => {
      const since: Record<string, number> = {};
      for (const [name, n] of counter.byCommand) if (n > (before.get(name) ?? 0)) since[name] = n - (before.get(name) ?? 0);
      return since;
    };
  };

  const fieldOfAll = async (field: (job: string) => [string, string]): Promise<Array<string | null>> => {
    const pipeline = redis.client.pipeline();
    for (let i = 0; i < JOBS; i++) pipeline.hget(...field(`j${i}`));
    return ((await pipeline.exec()) ?? []).map(([, value]) => value as string | null);
  };
  const takenOver = async (): Promise<boolean> => (await fieldOfAll((job) => [keys.jobState(job), 'scheduledSince'])).every((v) => v !== null);

  it(`a burst of ${JOBS} ticks due together costs a few commands per batch, not three per tick`, { timeout: 60_000 }, async () => {
    // One tick for all, well after the takeover: nothing else is due, so every command counted below is
    // the burst's (a tick every few seconds would count the previous tick's adds, late on a loaded machine).
    const tick = Math.ceil((Date.now() + 10_000) / 1000) * 1000;
    const running = start(schedules('1h', { startAt: new Date(tick) }));
    try {
      await until('every job taken over', takenOver, 30_000, 100);
      // The last reads of a takeover come right after `scheduledSince` is set.
      await sleep(500);
      assert.ok(Date.now() < tick - 500, 'the takeover ended well before the tick');
      const burst = countFromNow();
      await until(
        `every job's tick ${tick} enqueued`,
        async () => (await fieldOfAll((job) => [keys.ledger(job), String(tick)])).every((v) => v?.startsWith('enqueued|')),
        tick - Date.now() + 10_000,
        25,
      );
      const counts = burst();
      const scripts = (counts.EVALSHA ?? 0) + (counts.EVAL ?? 0);
      // One BullMQ add script per tick is unavoidable (addBulk pipelines them); claims and confirms go in batches.
      assert.ok(scripts <= JOBS + 40, `scripts sent for the burst: ${scripts} (${JSON.stringify(counts)})`);
    } finally {
      await running.stop();
    }
  });

  it(`the takeover of ${JOBS} jobs reads them in batches, not one job at a time`, { timeout: 60_000 }, async () => {
    const running = start(schedules('1h'));
    try {
      await until('every job taken over', takenOver, 30_000, 100);
      // The last reads of a takeover come right after `scheduledSince` is set.
      await sleep(500);
      const counts = Object.fromEntries(counter.byCommand);
      assert.ok(counter.total <= 100, `commands sent for the takeover: ${counter.total} (${JSON.stringify(counts)})`);
    } finally {
      await running.stop();
    }
  });

  it('an idle leader waits for trigger requests on a blocking read instead of polling, and still runs a request', { timeout: 30_000 }, async () => {
    const running = start(schedules('1h', { count: 1 }));
    try {
      await until('the job taken over', async () => (await redis.client.hget(keys.jobState('j0'), 'scheduledSince')) !== null, 10_000, 50);
      await sleep(500);
      const idle = countFromNow();
      await sleep(4_000);
      const counts = idle();
      const reads = (counts.XREAD ?? 0) + (counts.XRANGE ?? 0);
      assert.ok(reads <= 2, `stream reads by an idle leader in 4 s: ${reads} (${JSON.stringify(counts)})`);
      const request = await submitTrigger(redis.client, keys, 'j0', 10_000);
      const outcome = await until('the trigger outcome', () => triggerOutcome(redis.client, keys, request.id), 10_000, 25);
      assert.deepEqual(outcome, { jobId: `j0@manual-${request.id}`, queue: 'burst', flow: false });
    } finally {
      await running.stop();
    }
  });
});
