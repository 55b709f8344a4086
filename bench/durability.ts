/**
 * The cost of durable writes on replicated Redis (issues 13 and 18), in the same run on one Sentinel group
 * started here, with durability off, with `WAIT 1` plus the sentinels' primary check (the Sentinel
 * default), and with `WAIT 2` plus the check:
 * - the real fenced enqueue path (`FencedEnqueue` over the ledger createScheduler builds: claim, the BullMQ
 *   add confirmed on its server, the enqueued record);
 * - the real worker path (`WorkerPool` with the run records createScheduler gives it: the take confirmed,
 *   the handler, its finish recorded and confirmed, BullMQ's finish checked on replicas).
 */
import { Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import { directWrites, replicaWaitFor } from '../src/redis/durability.js';
import { FencedEnqueue } from '../src/producing/fenced-enqueue.js';
import { tickJobId } from '../src/ledger/job-data.js';
import { KeySpace } from '../src/redis/keys.js';
import { QueueSet } from '../src/redis/queue-set.js';
import { RedisConnections } from '../src/redis/redis-topology.js';
import { RunRecords } from '../src/workers/run-records.js';
import { TickLedger, type FencingToken } from '../src/ledger/tick-ledger.js';
import { WorkerPool } from '../src/workers/worker-pool.js';
import { silentLogger } from '../src/util/logger.js';
import { startSentinelGroup } from '../test/support/redis-sentinel.js';
import { cron, generateSchedules } from './schedules.js';

export interface DurabilitySetting {
  label: string;
  minReplicas: number;
  /** Single ticks one after the other: claim, add, confirm (ms per tick). */
  sequentialMs: { p50: number; p99: number };
  /** Ticks per second for a burst due together (claims and confirms batched, adds in bulk). */
  burstPerSecond: number;
  /** WAITs the burst cost. */
  burstWaits: number;
  /** One run at a time, from its add to BullMQ's completion event (ms per run). */
  runMs: { p50: number; p99: number };
  /** Runs per second for a burst added together, on one worker of concurrency {@link RUN_CONCURRENCY}. */
  runsPerSecond: number;
}

export interface DurabilityResult {
  settings: DurabilitySetting[];
  sequentialTicks: number;
  burst: number;
  sequentialRuns: number;
  runBurst: number;
}

const SEQUENTIAL = 300;
const BURST = 5_000;
const ROUNDS = 3;
const QUEUE = 'bench-durability';
const RUN_QUEUE = 'bench-durability-runs';
const SEQUENTIAL_RUNS = 300;
const RUN_BURST = 2_000;
const RUN_CONCURRENCY = 64;
const RUN_JOB = generateSchedules(1, RUN_QUEUE, cron(() => '0 0 1 1 *')).get('s0')!;
const JOB = generateSchedules(1, QUEUE, cron(() => '0 0 1 1 *')).get('s0')!;
const SETTINGS = [
  { label: 'off (minReplicas 0)', minReplicas: 0 },
  { label: 'WAIT 1 + Sentinel check (the default)', minReplicas: 1 },
  { label: 'WAIT 2 + Sentinel check (every replica)', minReplicas: 2 },
];

export async function measureDurability(log: (line: string) => void): Promise<DurabilityResult> {
  const group = await startSentinelGroup();
  const connections = RedisConnections.fromUrl(group.url);
  const redis = connections.open('control') as Redis;
  redis.on('error', () => undefined);
  const queues = new QueueSet({ connection: redis });
  const keys = new KeySpace('bench-durability');
  let base = 0;
  const fresh = (count: number): number => (base += count) - count;
  try {
    const settings: DurabilitySetting[] = [];
    for (const setting of SETTINGS) {
      const durable = replicaWaitFor(connections, redis, { minReplicas: setting.minReplicas });
      const ledger = new TickLedger(redis, keys, durable.wait);
      // A new term per setting, raised (and confirmed) like a leader's.
      const token: FencingToken = { generation: 'bench', leaderTransitions: settings.length + 1 };
      await ledger.raiseFence(token, 'bench', Date.now());
      const enqueue = new FencedEnqueue({ ledger, queues, token, leading: () => true, now: () => Date.now(), writes: durable.wait });
      const one = async (tick: number): Promise<void> => {
        const jobId = tickJobId(JOB.name, tick);
        const claim = await enqueue.claim(JOB.name, tick, jobId);
        if (claim?.kind !== 'claimed') throw new Error(`claim of tick ${tick}: ${claim?.kind ?? 'not leading'}`);
        await enqueue.add(JOB, tick, jobId);
        await enqueue.confirm(JOB.name, tick, jobId);
      };
      const latencies: number[] = [];
      const bursts: number[] = [];
      let waits = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const from = fresh(SEQUENTIAL);
        for (let i = 0; i < SEQUENTIAL; i++) {
          const started = process.hrtime.bigint();
          await one(from + i);
          latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
        }
        const burstFrom = fresh(BURST);
        const waitsBefore = durable.wait.stats.waits;
        const started = process.hrtime.bigint();
        await Promise.all(Array.from({ length: BURST }, (_, i) => one(burstFrom + i)));
        bursts.push(BURST / (Number(process.hrtime.bigint() - started) / 1e9));
        waits = durable.wait.stats.waits - waitsBefore;
      }
      const runs = await measureRuns(connections, durable.wait.enabled);
      durable.close();
      const result = {
        ...setting,
        sequentialMs: percentiles(latencies),
        burstPerSecond: Math.round(bursts.sort((a, b) => a - b)[1]!),
        burstWaits: waits,
        ...runs,
      };
      log(`durability: ${setting.label}: ${JSON.stringify(result.sequentialMs)} ms per tick, burst ${result.burstPerSecond}/s with ${waits} WAITs; ` +
        `${JSON.stringify(result.runMs)} ms per run, ${result.runsPerSecond} runs/s`);
      settings.push(result);
      await queues.get(QUEUE).obliterate({ force: true });
    }
    return { settings, sequentialTicks: SEQUENTIAL * ROUNDS, burst: BURST, sequentialRuns: SEQUENTIAL_RUNS, runBurst: RUN_BURST };
  } finally {
    await queues.close();
    redis.disconnect();
    await group.close();
  }
}

/** p50 and p99 of `samples` (ms), to two decimals. */
function percentiles(samples: number[]): { p50: number; p99: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => +sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!.toFixed(2);
  return { p50: at(0.5), p99: at(0.99) };
}

/**
 * The worker path with run records written `durable`ly (confirmed on replicas) or not: runs added one at a
 * time (add → BullMQ's completion event), then a burst added together, on a WorkerPool as createScheduler
 * builds it (its own worker connection, the run records on it).
 */
async function measureRuns(connections: RedisConnections, durable: boolean): Promise<Pick<DurabilitySetting, 'runMs' | 'runsPerSecond'>> {
  const workerRedis = connections.open('worker') as Redis;
  const producerRedis = connections.open('control') as Redis;
  for (const client of [workerRedis, producerRedis]) client.on('error', () => undefined);
  const writes = durable ? replicaWaitFor(connections, workerRedis) : undefined;
  const pool = new WorkerPool({
    connection: workerRedis,
    logger: silentLogger,
    tuning: { concurrency: RUN_CONCURRENCY },
    records: new RunRecords(writes?.wait ?? directWrites(workerRedis), 'bench'),
  });
  const queue = new Queue(RUN_QUEUE, { connection: producerRedis });
  // Its own connection: QueueEvents blocks on it.
  const eventsRedis = connections.open('worker') as Redis;
  eventsRedis.on('error', () => undefined);
  const events = new QueueEvents(RUN_QUEUE, { connection: eventsRedis });
  try {
    await events.waitUntilReady();
    pool.update(new Map([[RUN_JOB.name, { ...RUN_JOB, concurrency: RUN_CONCURRENCY }]]));
    const latencies: number[] = [];
    for (let i = 0; i < SEQUENTIAL_RUNS; i++) {
      const started = process.hrtime.bigint();
      const job = await queue.add(RUN_JOB.name, {}, { jobId: `seq-${durable}-${i}` });
      await job.waitUntilFinished(events);
      latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
    }
    const started = process.hrtime.bigint();
    const burst = await queue.addBulk(Array.from({ length: RUN_BURST }, (_, i) => ({ name: RUN_JOB.name, data: {}, opts: { jobId: `burst-${durable}-${i}` } })));
    await Promise.all(burst.map((job) => job.waitUntilFinished(events)));
    const runsPerSecond = Math.round(RUN_BURST / (Number(process.hrtime.bigint() - started) / 1e9));
    return { runMs: percentiles(latencies), runsPerSecond };
  } finally {
    await pool.close(5_000);
    await events.close();
    await queue.obliterate({ force: true });
    await queue.close();
    writes?.close();
    for (const client of [workerRedis, producerRedis, eventsRedis]) client.disconnect();
  }
}
