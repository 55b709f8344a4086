import { Queue, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { KeySpace } from '../src/queueing/keys.js';
import type { TickJobData } from '../src/queueing/job-data.js';
import { tickJobId } from '../src/queueing/job-data.js';
import { TickLedger, type FencingToken } from '../src/queueing/tick-ledger.js';

/** Jobs per second of each way to enqueue, measured in the same process on the same Redis. */
export interface ThroughputResult {
  rawSequential: number;
  rawInFlight: number;
  addBulk: number;
  fencedSequential: number;
  fencedInFlight: number;
  inFlight: number;
  bulkSize: number;
}

const IN_FLIGHT = 64;
const BULK = 500;
const SEQUENTIAL_JOBS = 3000;
const PARALLEL_JOBS = 20_000;
/** Each way is measured this many times, interleaved; the median counts, so one noisy moment does not. */
const ROUNDS = 3;
const JOB = 'tick';
const TOKEN: FencingToken = { generation: 'bench', leaderTransitions: 1 };

/**
 * The fenced exactly-once path exactly as the Producer takes it for one tick: claim it in the fenced
 * ledger, add it with its deterministic id and deduplication, confirm it.
 */
async function fencedEnqueue(ledger: TickLedger, queue: Queue, tick: number): Promise<void> {
  const jobId = tickJobId(JOB, tick);
  const claim = await ledger.claim(TOKEN, JOB, tick, jobId);
  if (claim.kind !== 'claimed') throw new Error(`claim of tick ${tick}: ${claim.kind}`);
  const data: TickJobData = { tick, token: TOKEN, data: undefined, manual: false };
  const opts: JobsOptions = { jobId, deduplication: { id: jobId, ttl: 3_600_000 } };
  await queue.add(JOB, data, opts);
  await ledger.confirm(JOB, tick, jobId, Date.now());
}

function rawEnqueue(queue: Queue, tick: number): Promise<unknown> {
  const data: TickJobData = { tick, token: TOKEN, data: undefined, manual: false };
  return queue.add(JOB, data);
}

/** Runs `count` operations with at most `concurrency` in flight; returns operations per second. */
async function rate(count: number, concurrency: number, operation: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await operation(next++);
    }),
  );
  return count / (Number(process.hrtime.bigint() - started) / 1e9);
}

export async function measureThroughput(redis: Redis): Promise<ThroughputResult> {
  const queue = new Queue('bench-throughput', { connection: redis });
  const ledger = new TickLedger(redis, new KeySpace('bench'));
  await queue.waitUntilReady();
  // Ticks never repeat across measurements, so every fenced claim is a first claim.
  let base = 0;
  const ticks = (count: number): number => {
    base += count;
    return base - count;
  };
  const fresh = async (): Promise<void> => {
    await queue.obliterate({ force: true });
    await redis.del(ledger.keys.ledger(JOB), ledger.keys.ledgerIndex(JOB), ledger.keys.pending(JOB), ledger.keys.jobState(JOB));
  };
  const measures: Record<Exclude<keyof ThroughputResult, 'inFlight' | 'bulkSize'>, () => Promise<number>> = {
    rawSequential: () => rate(SEQUENTIAL_JOBS, 1, (i) => rawEnqueue(queue, i)),
    rawInFlight: () => rate(PARALLEL_JOBS, IN_FLIGHT, (i) => rawEnqueue(queue, i)),
    addBulk: () => {
      const data: TickJobData = { tick: 0, token: TOKEN, data: undefined, manual: false };
      return rate(PARALLEL_JOBS / BULK, 1, () => queue.addBulk(Array.from({ length: BULK }, () => ({ name: JOB, data })))).then((r) => r * BULK);
    },
    fencedSequential: () => {
      const from = ticks(SEQUENTIAL_JOBS);
      return rate(SEQUENTIAL_JOBS, 1, (i) => fencedEnqueue(ledger, queue, from + i));
    },
    fencedInFlight: () => {
      const from = ticks(PARALLEL_JOBS);
      return rate(PARALLEL_JOBS, IN_FLIGHT, (i) => fencedEnqueue(ledger, queue, from + i));
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
    await queue.close();
  }
  const median = (name: string): number => [...samples.get(name)!].sort((a, b) => a - b)[Math.floor(ROUNDS / 2)]!;
  return {
    rawSequential: median('rawSequential'),
    rawInFlight: median('rawInFlight'),
    addBulk: median('addBulk'),
    fencedSequential: median('fencedSequential'),
    fencedInFlight: median('fencedInFlight'),
    inFlight: IN_FLIGHT,
    bulkSize: BULK,
  };
}
