import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { FencedEnqueue } from '../src/producing/fenced-enqueue.js';
import { KeySpace } from '../src/redis/keys.js';
import type { TickJobData } from '../src/ledger/job-data.js';
import { tickJobId } from '../src/ledger/job-data.js';
import { QueueSet } from '../src/redis/queue-set.js';
import { TickLedger, type FencingToken } from '../src/ledger/tick-ledger.js';
import { rate } from './rate.js';
import { cron, generateSchedules } from './schedules.js';

/** Jobs per second of each way to enqueue, measured in the same process on the same Redis. */
export interface ThroughputResult {
  rawSequential: number;
  rawInFlight: number;
  addBulk: number;
  fencedSequential: number;
  /** The fenced path for a burst of ticks due together (claims and confirms batched, adds in bulk). */
  fencedBurst: number;
  /** Ticks in that burst. */
  burst: number;
  inFlight: number;
  bulkSize: number;
}

const IN_FLIGHT = 64;
const BULK = 500;
const SEQUENTIAL_JOBS = 3000;
const PARALLEL_JOBS = 20_000;
/** Each way is measured this many times, interleaved; the median counts, so one noisy moment does not. */
const ROUNDS = 3;
const QUEUE = 'bench-throughput';
const JOB = generateSchedules(1, QUEUE, cron(() => '0 0 1 1 *')).get('s0')!;
const TOKEN: FencingToken = { generation: 'bench', leaderTransitions: 1 };

/**
 * One tick through the Producer's own fenced path (`FencedEnqueue`, as a lane calls it): claim it in
 * the fenced ledger, add it with its deterministic id and deduplication, confirm it. Calls made in the
 * same turn share their round trips.
 */
async function fencedEnqueue(enqueue: FencedEnqueue, tick: number): Promise<void> {
  const jobId = tickJobId(JOB.name, tick);
  const claim = await enqueue.claim(JOB.name, tick, jobId);
  if (claim?.kind !== 'claimed') throw new Error(`claim of tick ${tick}: ${claim?.kind ?? 'not leading'}`);
  if (!(await enqueue.add(JOB, tick, jobId))) throw new Error('not leading');
  await enqueue.confirm(JOB.name, tick, jobId);
}

function rawEnqueue(queue: Queue, tick: number): Promise<unknown> {
  const data: TickJobData = { tick, token: TOKEN, data: undefined, manual: false };
  return queue.add(JOB.name, data);
}

export async function measureThroughput(redis: Redis): Promise<ThroughputResult> {
  const queues = new QueueSet({ connection: redis });
  const queue = queues.get(QUEUE);
  const ledger = new TickLedger(redis, new KeySpace('bench'));
  const enqueue = new FencedEnqueue({ ledger, queues, token: TOKEN, leading: () => true, now: () => Date.now() });
  await queue.waitUntilReady();
  // Ticks never repeat across measurements, so every fenced claim is a first claim.
  let base = 0;
  const ticks = (count: number): number => {
    base += count;
    return base - count;
  };
  const fresh = async (): Promise<void> => {
    await queue.obliterate({ force: true });
    await redis.del(ledger.keys.ledger(JOB.name), ledger.keys.ledgerIndex(JOB.name), ledger.keys.pending(JOB.name), ledger.keys.jobState(JOB.name));
  };
  const measures: Record<Exclude<keyof ThroughputResult, 'inFlight' | 'bulkSize' | 'burst'>, () => Promise<number>> = {
    rawSequential: () => rate(SEQUENTIAL_JOBS, 1, (i) => rawEnqueue(queue, i)),
    rawInFlight: () => rate(PARALLEL_JOBS, IN_FLIGHT, (i) => rawEnqueue(queue, i)),
    addBulk: () => {
      const data: TickJobData = { tick: 0, token: TOKEN, data: undefined, manual: false };
      return rate(PARALLEL_JOBS / BULK, 1, () => queue.addBulk(Array.from({ length: BULK }, () => ({ name: JOB.name, data })))).then((r) => r * BULK);
    },
    fencedSequential: () => {
      const from = ticks(SEQUENTIAL_JOBS);
      return rate(SEQUENTIAL_JOBS, 1, (i) => fencedEnqueue(enqueue, from + i));
    },
    // Every tick of the burst is due at once, as when thousands of schedules fire together.
    fencedBurst: () => {
      const from = ticks(PARALLEL_JOBS);
      return rate(PARALLEL_JOBS, PARALLEL_JOBS, (i) => fencedEnqueue(enqueue, from + i));
    },
  };
  await ledger.raiseFence(TOKEN, 'bench', Date.now());
  const samples = new Map<string, number[]>();
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, measure] of Object.entries(measures)) {
        await fresh();
        samples.set(name, [...(samples.get(name) ?? []), await measure()]);
      }
    }
  } finally {
    await fresh();
    await queues.close();
  }
  const median = (name: string): number => [...samples.get(name)!].sort((a, b) => a - b)[Math.floor(ROUNDS / 2)]!;
  return {
    rawSequential: median('rawSequential'),
    rawInFlight: median('rawInFlight'),
    addBulk: median('addBulk'),
    fencedSequential: median('fencedSequential'),
    fencedBurst: median('fencedBurst'),
    burst: PARALLEL_JOBS,
    inFlight: IN_FLIGHT,
    bulkSize: BULK,
  };
}
