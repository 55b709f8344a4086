import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { spread, type Spread } from '../scripts/chaos/report.js';
import { startChild } from './child.js';
import { startProducer } from './producer-harness.js';
import { cron, generateRuntimeSchedules, generateSchedules, perSecondSpread } from './schedules.js';

/** Every schedule fires at the same instants, as cron jobs written by people tend to. */
export const PRECISION_PATTERN = '*/5 * * * * *';
const PERIOD_MS = 5000;
/** The per-second row: schedules each once a second, spread evenly over the second, measured this long. */
const PER_SECOND_WINDOW_MS = 5000;
/** Bursts measured per run, after the first one (which may overlap the setup). */
const MEASURED_BURSTS = 3;
const WORKER_CONCURRENCY = 100;
/** Event streams are kept whole for the measurement (BullMQ trims them to 10,000 entries by default). */
export const UNTRIMMED_EVENTS = 100_000_000;

export interface PrecisionResult {
  /** `naive`: a setTimeout per schedule and `Queue.add` at the tick, in this process. */
  system: 'leasebeat' | 'bullmq' | 'naive';
  /**
   * `burst`: every schedule due at once every 5 s; `runtime`: the same with runtime schedules of one job
   * type; `per-second`: each once a second, spread over the second.
   */
  scenario: 'burst' | 'runtime' | 'per-second';
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
export async function leasebeatPrecision(redis: Redis, url: string, count: number, scenario: PrecisionResult['scenario'] = 'burst'): Promise<PrecisionResult> {
  await redis.flushall();
  const queueName = 'bench-lb';
  const worker = startChild('./worker-process.ts', [url, queueName, String(WORKER_CONCURRENCY)]);
  await worker.line((l) => l === 'ready');
  const started = Date.now();
  const jobs =
    scenario === 'runtime'
      ? generateRuntimeSchedules(count, queueName, PRECISION_PATTERN)
      : generateSchedules(count, queueName, scenario === 'burst' ? cron(() => PRECISION_PATTERN) : perSecondSpread(count));
  const running = startProducer({ redis, jobs });
  await running.queues.get(queueName).getVersion();
  await redis.hset(`bull:${queueName}:meta`, 'opts.maxLenEvents', UNTRIMMED_EVENTS);
  const looping = await running.looping;
  try {
    if (scenario === 'per-second') {
      const window = await perSecondWindow(looping);
      const samples = await readStream(redis, queueName, window.includes);
      return { system: 'leasebeat', scenario, schedules: count, ...samples, expected: window.expected(count), setupMs: looping - started };
    }
    const bursts = burstsAfter(looping);
    await sleep(bursts.at(-1)! - Date.now());
    await waitForCompletion(redis, queueName, Array.from({ length: count }, (_, i) => `s${i}@${bursts.at(-1)!}`));
    const samples = await readStream(redis, queueName, (tick) => bursts.includes(tick));
    return { system: 'leasebeat', scenario, schedules: count, ...samples, expected: count * bursts.length, setupMs: looping - started };
  } finally {
    await running.stop();
    await worker.stop();
  }
}

/**
 * The naive baseline of the per-second row: one `setTimeout` per schedule to its next tick, then
 * `Queue.add` (no fencing, no ledger), in this process, with the same worker.
 */
export async function naivePrecision(redis: Redis, url: string, count: number): Promise<PrecisionResult> {
  await redis.flushall();
  const queueName = 'bench-naive';
  const queue = new Queue(queueName, { connection: redis, streams: { events: { maxLen: UNTRIMMED_EVENTS } } });
  const worker = startChild('./worker-process.ts', [url, queueName, String(WORKER_CONCURRENCY)]);
  await worker.line((l) => l === 'ready');
  const offset = (i: number): number => Math.floor((i * 1000) / count);
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  const schedule = (i: number): void => {
    const tick = Math.ceil((Date.now() - offset(i) + 1) / 1000) * 1000 + offset(i);
    const timer = setTimeout(() => {
      timers.delete(timer);
      if (stopped) return;
      void queue.add(`s${i}`, {}, { jobId: `s${i}@${tick}` }).catch(() => undefined);
      schedule(i);
    }, tick - Date.now());
    timers.add(timer);
  };
  const started = Date.now();
  for (let i = 0; i < count; i++) schedule(i);
  try {
    const window = await perSecondWindow(started);
    const samples = await readStream(redis, queueName, window.includes);
    return { system: 'naive', scenario: 'per-second', schedules: count, ...samples, expected: window.expected(count), setupMs: 0 };
  } finally {
    stopped = true;
    for (const timer of timers) clearTimeout(timer);
    await worker.stop();
    await queue.close();
  }
}

/** Waits out a window of whole seconds starting at least 1 s after `from`, and a second for its last runs. */
async function perSecondWindow(from: number): Promise<{ includes: (tick: number) => boolean; expected: (count: number) => number }> {
  const start = Math.ceil((from + 1000) / 1000) * 1000;
  const end = start + PER_SECOND_WINDOW_MS;
  await sleep(end + 1000 - Date.now());
  return { includes: (tick) => tick >= start && tick < end, expected: (count) => (count * PER_SECOND_WINDOW_MS) / 1000 };
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
    const samples = await readStream(redis, queueName, (tick) => bursts.includes(tick));
    return { system: 'bullmq', scenario: 'burst', schedules: count, ...samples, expected: count * bursts.length, setupMs: upserted - started };
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

/** The nominal tick of a run from its job id: leasebeat's `<job>@<tick>`, BullMQ schedulers' `repeat:<id>:<tick>`. */
const tickOf = (jobId: string): number => Number(jobId.slice(Math.max(jobId.lastIndexOf('@'), jobId.lastIndexOf(':')) + 1));

/**
 * Reads a queue's event stream: for every job of the measured ticks, the Redis time of its first
 * `waiting` event (available to workers) and of its first `active` event (taken by a worker).
 */
export async function readStream(
  redis: Redis,
  queue: string,
  measured: (tick: number) => boolean,
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
      if (!measured(tick)) continue;
      if (event === 'waiting' && !waiting.has(jobId)) waiting.set(jobId, at - tick);
      if (event === 'active' && !active.has(jobId)) active.set(jobId, at - tick);
    }
    if (entries.length < 10_000) break;
    cursor = `(${entries.at(-1)![0]}`;
  }
  return { enqueueLagMs: spread([...waiting.values()]), startLagMs: spread([...active.values()]), delivered: waiting.size };
}
