import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { spread, type Spread } from '../scripts/chaos/report.js';
import { startChild } from './child.js';
import { startProducer } from './producer-harness.js';
import { generateSchedules } from './schedules.js';

/** Every schedule fires at the same instants, as cron jobs written by people tend to. */
export const PRECISION_PATTERN = '*/5 * * * * *';
const PERIOD_MS = 5000;
/** Bursts measured per run, after the first one (which may overlap the setup). */
const MEASURED_BURSTS = 3;
const WORKER_CONCURRENCY = 100;
/** Event streams are kept whole for the measurement (BullMQ trims them to 10,000 entries by default). */
const UNTRIMMED_EVENTS = 100_000_000;

export interface PrecisionResult {
  system: 'leasebeat' | 'bullmq';
  schedules: number;
  /** When each run became available to workers (its `waiting` event), minus its nominal tick. */
  enqueueLagMs: Spread | undefined;
  /** When a worker took it (its `active` event), minus its nominal tick. */
  startLagMs: Spread | undefined;
  /** Runs that came to exist for the measured ticks, out of schedules × ticks. */
  delivered: number;
  expected: number;
  /** Setup: leasebeat's takeover of every schedule, or BullMQ's upserts. */
  setupMs: number;
}

/** Nominal ticks of the measured bursts: the next few firing instants at least `leadMs` from now. */
function burstsAfter(at: number): number[] {
  const first = Math.ceil((at + 1000) / PERIOD_MS) * PERIOD_MS;
  return Array.from({ length: MEASURED_BURSTS }, (_, i) => first + i * PERIOD_MS);
}

/**
 * leasebeat: the real Producer leading alone in this process over `count` generated schedules, with a
 * BullMQ worker in another process.
 */
export async function leasebeatPrecision(redis: Redis, url: string, count: number): Promise<PrecisionResult> {
  await redis.flushall();
  const queueName = 'bench-lb';
  const worker = startChild('./worker-process.ts', [url, queueName, String(WORKER_CONCURRENCY)]);
  await worker.line((l) => l === 'ready');
  const started = Date.now();
  const running = startProducer({ redis, jobs: generateSchedules(count, queueName, () => PRECISION_PATTERN) });
  await running.queues.get(queueName).getVersion();
  await redis.hset(`bull:${queueName}:meta`, 'opts.maxLenEvents', UNTRIMMED_EVENTS);
  const looping = await running.looping;
  const bursts = burstsAfter(looping);
  try {
    await sleep(bursts.at(-1)! - Date.now());
    await waitForCompletion(redis, queueName, Array.from({ length: count }, (_, i) => `s${i}@${bursts.at(-1)!}`));
  } finally {
    await running.stop();
    await worker.stop();
  }
  const samples = await readStream(redis, queueName, new Set(bursts), (jobId) => Number(jobId.slice(jobId.lastIndexOf('@') + 1)));
  return { system: 'leasebeat', schedules: count, ...samples, expected: count * bursts.length, setupMs: looping - started };
}

/** BullMQ's own Job Schedulers for the same patterns, driven by the same worker. */
export async function bullmqPrecision(redis: Redis, url: string, count: number): Promise<PrecisionResult> {
  await redis.flushall();
  const queueName = 'bench-bull';
  const queue = new Queue(queueName, { connection: redis, streams: { events: { maxLen: UNTRIMMED_EVENTS } } });
  const worker = startChild('./worker-process.ts', [url, queueName, String(WORKER_CONCURRENCY)]);
  await worker.line((l) => l === 'ready');
  const started = Date.now();
  try {
    for (let i = 0; i < count; i += 64) {
      const batch = Array.from({ length: Math.min(64, count - i) }, (_, j) =>
        queue.upsertJobScheduler(`s${i + j}`, { pattern: PRECISION_PATTERN }, { name: `s${i + j}`, data: {} }));
      await Promise.all(batch);
    }
    const upserted = Date.now();
    const bursts = burstsAfter(upserted);
    await sleep(bursts.at(-1)! - Date.now());
    await waitForCompletion(redis, queueName, Array.from({ length: count }, (_, i) => `repeat:s${i}:${bursts.at(-1)!}`));
    // Scheduler job ids are `repeat:<scheduler id>:<scheduled millis>`.
    const samples = await readStream(redis, queueName, new Set(bursts), (jobId) => Number(jobId.slice(jobId.lastIndexOf(':') + 1)));
    return { system: 'bullmq', schedules: count, ...samples, expected: count * bursts.length, setupMs: upserted - started };
  } finally {
    await worker.stop();
    await queue.close();
  }
}

/** Waits (up to 30 s) until the worker has finished every run of the last measured burst. */
async function waitForCompletion(redis: Redis, queue: string, jobIds: string[]): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const scores = (await redis.call('ZMSCORE', `bull:${queue}:completed`, ...jobIds)) as Array<string | null>;
    if (scores.every((score) => score !== null)) return;
    await sleep(250);
  }
}

/**
 * Reads a queue's event stream: for every job of the measured ticks, the Redis time of its first
 * `waiting` event (available to workers) and of its first `active` event (taken by a worker).
 */
async function readStream(
  redis: Redis,
  queue: string,
  ticks: Set<number>,
  tickOf: (jobId: string) => number,
): Promise<{ enqueueLagMs: Spread | undefined; startLagMs: Spread | undefined; delivered: number }> {
  const waiting = new Map<string, number>();
  const active = new Map<string, number>();
  let cursor = '-';
  for (;;) {
    const entries = (await redis.xrange(`bull:${queue}:events`, cursor, '+', 'COUNT', 10_000));
    for (const [id, fields] of entries) {
      const at = Number(id.split('-')[0]);
      const event = fields[fields.indexOf('event') + 1];
      const jobId = fields[fields.indexOf('jobId') + 1];
      if (jobId === undefined) continue;
      const tick = tickOf(jobId);
      if (!ticks.has(tick)) continue;
      if (event === 'waiting' && !waiting.has(jobId)) waiting.set(jobId, at - tick);
      if (event === 'active' && !active.has(jobId)) active.set(jobId, at - tick);
    }
    if (entries.length < 10_000) break;
    cursor = `(${entries.at(-1)![0]}`;
  }
  return { enqueueLagMs: spread([...waiting.values()]), startLagMs: spread([...active.values()]), delivered: waiting.size };
}
