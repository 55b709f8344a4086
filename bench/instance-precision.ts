/**
 * Issue 30's whole-instance rows: handler-start lag as users see it. leasebeat is one real `leasebeat start`
 * of a code tree with its own workers; BullMQ is its Job Schedulers driven by one Worker in one process;
 * both at concurrency 100, each run on a fresh redis-server of its own. Both are read the same way: a run's
 * job hash `processedOn` (the worker's clock when it took the run) minus the nominal tick in its job id.
 */
import { rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { spread, type Spread } from '../scripts/chaos/report.js';
import { startRedis } from '../test/support/redis-server.js';
import { startChild, type BenchChild } from './child.js';
import { LEASEBEAT_QUEUE_KEY, startLeasebeat, tenantsFolder, WORKER_CONCURRENCY } from './leasebeat-start.js';
import { BULLMQ_QUEUE, BURST_PATTERN, upsertSchedules } from './schedule-upserts.js';
import { jobTypeFolder } from './schedules-leader-process.js';
import type { System, Tree, Trees } from './trees.js';

export const INSTANCE_SIZES = [1000, 10_000];
/** Each row is measured this many times, the systems alternating; the median ratio counts. */
export const INSTANCE_ROUNDS = 3;
const PERIOD_MS = 5000;
const MEASURED_BURSTS = 3;
/** How long the first full burst may take to come (the start-up, or BullMQ's upserts, and a burst). */
const WARM_UP_BOUND_MS = 240_000;
/** How long after the last measured tick its runs may take to start. */
const LAST_BURST_BOUND_MS = 30_000;
const UPSERTS_IN_FLIGHT = 32;

/** `file`: definitions in a job file; `runtime`: runtime schedules of one job type (BullMQ runs `file`'s). */
export type InstanceScenario = 'file' | 'runtime';

/**
 * `floor`: BullMQ's own Worker (the same process as BullMQ's run) starting plain delayed jobs that a feeder
 * added ahead of each tick, with no schedulers and no leasebeat: the least lag anything whose runs go
 * through BullMQ's Worker can have on this machine, so the rows can say how far a goal is below it.
 */
export type InstanceSystem = System | 'floor';

export interface InstanceRun {
  system: InstanceSystem;
  scenario: InstanceScenario;
  schedules: number;
  /** Handler start (`processedOn`) − nominal tick, over the measured bursts. */
  startLagMs: Spread | undefined;
  /** Runs started for the measured ticks, out of schedules × bursts. */
  delivered: number;
  expected: number;
  /** From the process start (leasebeat) or the first upsert (BullMQ) to the first burst fully started. */
  setupMs: number;
  /** The measured process' high-water mark of resident memory: the instance, or BullMQ's worker process. */
  peakRssMiB: number | undefined;
  /** Set when the tree cannot run the scenario (then nothing else is measured). */
  unsupported?: string;
  /** Set when the run failed (no burst fully started in time, the process died): the row then misses its goal. */
  failed?: string;
}

/** What one run measured, or why the tree cannot run it. */
type Measured = Pick<InstanceRun, 'startLagMs' | 'delivered' | 'expected' | 'setupMs' | 'peakRssMiB'> | { unsupported: string };

export interface InstancePrecisionResult {
  commit: string;
  baseline?: Pick<Tree, 'label' | 'commit'>;
  sizes: number[];
  rounds: number;
  runs: InstanceRun[];
}

/** The runtime row is measured at the largest size, against BullMQ's run of that size. */
export const runtimeSize = (sizes: number[]): number => Math.max(...sizes);

/** Every row, `rounds` times, the systems alternating within each round. */
export async function measureInstancePrecision(trees: Trees, sizes: number[], rounds: number, progress: (line: string) => void): Promise<InstancePrecisionResult> {
  const runs: InstanceRun[] = [];
  const unsupported = new Set<string>();
  // A failed run is recorded and the others go on: one bad run should not cost the other half hour.
  const measure = async (system: InstanceSystem, scenario: InstanceScenario, size: number, run: () => Promise<Measured>): Promise<void> => {
    const none = { system, scenario, schedules: size, startLagMs: undefined, delivered: 0, expected: size * MEASURED_BURSTS, setupMs: 0, peakRssMiB: undefined };
    let result: InstanceRun;
    try {
      result = { ...none, ...(await run()) };
    } catch (error) {
      result = { ...none, failed: (error as Error).message.split('\n')[0] };
    }
    runs.push(result);
    const figures =
      result.unsupported ?? result.failed ?? `start lag ${show(result.startLagMs)}, ${result.delivered}/${result.expected} runs, set-up ${(result.setupMs / 1000).toFixed(1)} s, peak RSS ${result.peakRssMiB?.toFixed(0) ?? 'n/a'} MiB`;
    progress(`  ${system} ${scenario} ${size}: ${figures}`);
    if (result.unsupported) unsupported.add(`${system} ${scenario}`);
  };
  const leasebeatRuns = async (scenario: InstanceScenario, size: number): Promise<void> => {
    await measure('leasebeat', scenario, size, () => leasebeatRun(trees.current, scenario, size));
    const { baseline } = trees;
    if (baseline && !unsupported.has(`baseline ${scenario}`)) await measure('baseline', scenario, size, () => leasebeatRun(baseline, scenario, size));
  };
  for (let round = 1; round <= rounds; round++) {
    progress(` round ${round}/${rounds}`);
    for (const size of sizes) {
      await leasebeatRuns('file', size);
      await measure('bullmq', 'file', size, () => bullmqRun(size));
      await measure('floor', 'file', size, () => floorRun(size));
    }
    await leasebeatRuns('runtime', runtimeSize(sizes));
  }
  return {
    commit: trees.current.label,
    ...(trees.baseline ? { baseline: { label: trees.baseline.label, commit: trees.baseline.commit } } : {}),
    sizes,
    rounds,
    runs,
  };
}

const show = (s: Spread | undefined): string => (s ? `${s.median} / ${s.p99} / ${s.max} ms` : 'n/a');

/** One `leasebeat start` of `tree` over `count` schedules of the scenario, on a fresh redis-server. */
async function leasebeatRun(tree: Tree, scenario: InstanceScenario, count: number): Promise<Measured> {
  const server = await startRedis();
  const redis = server.client();
  const jobsDir = scenario === 'file' ? await tenantsFolder(count, BURST_PATTERN) : await jobTypeFolder();
  let instance: BenchChild | undefined;
  try {
    if (scenario === 'runtime') {
      const stored = await upsertSchedules(tree.dir, server.url, 'burst', count, UPSERTS_IN_FLIGHT, jobsDir);
      if (stored.unsupported) return { unsupported: stored.unsupported };
    }
    const started = Date.now();
    const running = await startLeasebeat(tree, server.url, jobsDir);
    instance = running;
    const { warmAt, ...lag } = await measureBursts(redis, LEASEBEAT_QUEUE_KEY, (i, tick) => `s${i}@${tick}`, count, running);
    return { ...lag, setupMs: warmAt - started, peakRssMiB: running.peakRssMiB() };
  } finally {
    await instance?.stop();
    redis.disconnect();
    await server.close();
    await rm(jobsDir, { recursive: true, force: true });
  }
}

/** BullMQ's Job Schedulers for the same pattern, upserted as leasebeat's runtime ones are, and one worker process. */
async function bullmqRun(count: number): Promise<Measured> {
  const server = await startRedis();
  const redis = server.client();
  let worker: BenchChild | undefined;
  try {
    const started = Date.now();
    await upsertSchedules('bullmq', server.url, 'burst', count, UPSERTS_IN_FLIGHT);
    const running = startChild('./worker-process.ts', [server.url, BULLMQ_QUEUE, String(WORKER_CONCURRENCY)]);
    worker = running;
    await running.line((l) => l === 'ready');
    const { warmAt, ...lag } = await measureBursts(redis, `bull:${BULLMQ_QUEUE}`, (i, tick) => `repeat:s${i}:${tick}`, count, running);
    return { ...lag, setupMs: warmAt - started, peakRssMiB: running.peakRssMiB() };
  } finally {
    await worker?.stop();
    redis.disconnect();
    await server.close();
  }
}

/** How long before its tick the floor's feeder adds a burst's jobs: leasebeat stages its runs as far ahead. */
const FLOOR_FEED_AHEAD_MS = 2500;
const FLOOR_QUEUE = 'floor';
const FLOOR_BULK = 500;

/** BullMQ's Worker alone over `count` plain delayed jobs per tick, added {@link FLOOR_FEED_AHEAD_MS} ahead by this process. */
async function floorRun(count: number): Promise<Measured> {
  const server = await startRedis();
  const redis = server.client();
  // BullMQ leaves a connection it was given open: it is closed here, before the server is.
  const feeder = server.client();
  const queue = new Queue(FLOOR_QUEUE, { connection: feeder });
  const feeding = new AbortController();
  let worker: BenchChild | undefined;
  try {
    const started = Date.now();
    const running = startChild('./worker-process.ts', [server.url, FLOOR_QUEUE, String(WORKER_CONCURRENCY)]);
    worker = running;
    await running.line((l) => l === 'ready');
    const fed = feed(queue, count, feeding.signal);
    const { warmAt, ...lag } = await measureBursts(redis, `bull:${FLOOR_QUEUE}`, floorJobId, count, running);
    feeding.abort();
    await fed;
    return { ...lag, setupMs: warmAt - started, peakRssMiB: running.peakRssMiB() };
  } finally {
    feeding.abort();
    await worker?.stop();
    await queue.close();
    feeder.disconnect();
    redis.disconnect();
    await server.close();
  }
}

const floorJobId = (i: number, tick: number): string => `s${i}@${tick}`;

/** Adds every tick's `count` delayed jobs {@link FLOOR_FEED_AHEAD_MS} before it, until aborted. */
async function feed(queue: Queue, count: number, signal: AbortSignal): Promise<void> {
  let tick = Math.ceil((Date.now() + FLOOR_FEED_AHEAD_MS) / PERIOD_MS) * PERIOD_MS;
  while (!signal.aborted) {
    await sleep(Math.max(0, tick - FLOOR_FEED_AHEAD_MS - Date.now()), undefined, { signal }).catch(() => undefined);
    for (let from = 0; from < count && !signal.aborted; from += FLOOR_BULK) {
      const jobs = Array.from({ length: Math.min(FLOOR_BULK, count - from) }, (_, j) => ({
        name: 'floor',
        data: { tenant: from + j },
        opts: { jobId: floorJobId(from + j, tick), delay: Math.max(0, tick - Date.now()) },
      }));
      await queue.addBulk(jobs);
    }
    tick += PERIOD_MS;
  }
}

/** When each run of `tick` started (`processedOn`), or null for a run not started (or not there). */
async function startedAt(redis: Redis, queueKey: string, jobId: (i: number, tick: number) => string, count: number, tick: number): Promise<Array<number | null>> {
  const pipeline = redis.pipeline();
  for (let i = 0; i < count; i++) pipeline.hget(`${queueKey}:${jobId(i, tick)}`, 'processedOn');
  const replies = (await pipeline.exec()) ?? [];
  return replies.map(([, value]) => (value === null || value === undefined ? null : Number(value)));
}

/**
 * Waits for the first burst whose every run started (the set-up is behind), then measures the next
 * `MEASURED_BURSTS` bursts: each run's start − its tick.
 */
async function measureBursts(
  redis: Redis,
  queueKey: string,
  jobId: (i: number, tick: number) => string,
  count: number,
  measured: BenchChild,
): Promise<{ startLagMs: Spread | undefined; delivered: number; expected: number; warmAt: number }> {
  const alive = (): void => {
    const { exitCode, signalCode } = measured.child;
    if (exitCode !== null || signalCode !== null) throw new Error(`the measured process exited (${signalCode ?? exitCode}): ${measured.lastLine() ?? 'no output'}`);
  };
  const warmDeadline = Date.now() + WARM_UP_BOUND_MS;
  for (;;) {
    alive();
    const tick = Math.floor((Date.now() - 1500) / PERIOD_MS) * PERIOD_MS;
    if ((await startedAt(redis, queueKey, jobId, count, tick)).every((at) => at !== null)) break;
    if (Date.now() > warmDeadline) throw new Error(`no burst of ${count} runs fully started within ${WARM_UP_BOUND_MS / 1000} s`);
    await sleep(1000);
  }
  const warmAt = Date.now();
  const first = Math.ceil((warmAt + 1000) / PERIOD_MS) * PERIOD_MS;
  const ticks = Array.from({ length: MEASURED_BURSTS }, (_, i) => first + i * PERIOD_MS);
  await sleep(ticks.at(-1)! + 1000 - Date.now());
  const deadline = ticks.at(-1)! + LAST_BURST_BOUND_MS;
  const lags: number[] = [];
  for (const tick of ticks) {
    let started = await startedAt(redis, queueKey, jobId, count, tick);
    while (started.some((at) => at === null) && Date.now() < deadline) {
      alive();
      await sleep(250);
      started = await startedAt(redis, queueKey, jobId, count, tick);
    }
    for (const at of started) if (at !== null) lags.push(at - tick);
  }
  return { startLagMs: spread(lags), delivered: lags.length, expected: count * ticks.length, warmAt };
}
