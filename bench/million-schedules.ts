/**
 * Issue 21's million rows of section 8: a leader over 1,000,000 hourly runtime schedules spread over the
 * hour (schedule i fires at second i mod 3600 of every hour: `S M * * * *`), against the same process over
 * none. Its memory and takeover are measured in its own process (bench/million-leader-process.ts); what it
 * enqueued is read from BullMQ, from the queue's event stream as it grows and the job hashes (ground
 * truth, not its logs). The measured leader is the second over the schedules: the first one, right after
 * the bulk write, meets schedules no leader has looked at yet (how much of them it takes over at once is
 * the due index's business: once all but the due soon wait in the index, it is stopped); a new leader
 * (a failover, a deploy) then finds them as a previous leader left them. The ticks due while the first one
 * takes over are issue 30's takeover row, against BullMQ's (bench/takeover-lag.ts), measured last.
 *
 * `LEASEBEAT_BENCH_MILLION_SCHEDULES` and `LEASEBEAT_BENCH_MILLION_WINDOW_S` shrink the run for a quick check
 * (the rows then say so, and claim no goal).
 */
import { createInterface } from 'node:readline';
import { rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { createAdmin } from '../src/index.js';
import { spread, type Spread } from '../scripts/chaos/report.js';
import { startChild, type BenchChild } from './child.js';
import type { MemorySample } from './million-leader-process.js';
import { rate } from './rate.js';
import { EventTail, firstEvent } from './event-tail.js';
import { cronOf, dueTick, dueWindowLag, measureBullmqTakeover, startPhase, type DueWindowLag } from './takeover-lag.js';
import { BENCH_JOB_TYPE, jobTypeFolder } from './schedules-leader-process.js';

/** The issue's scale and window. */
export const MILLION = 1_000_000;
export const MILLION_WINDOW_S = 600;
const HOUR_MS = 3_600_000;
/** The queue the bench's job type runs on (no `queue` in its definition: leasebeat's default), with BullMQ's default prefix. */
const QUEUE = 'leasebeat';
const QUEUE_KEY = `bull:${QUEUE}`;
/** The ledger of a job, for the diagnosis of a tick that was due and not enqueued (read only). */
const ledgerKey = (job: string): string => `leasebeat:{leasebeat}:ledger:${job}`;
/** The due index (schedule id → when a leader must look at it again), read only to see the first leader done. */
const DUE_INDEX = 'leasebeat:{leasebeat}:schedule-due';
/**
 * The first leader is done once the due index holds, within this horizon, about what the ticks make due
 * there (it parked the rest): a lane parks with the instant it must act again, before its tick, and a
 * schedule with a lane keeps its entry until it parks, so PARKED_SLACK_MS of ticks more are allowed.
 */
const PARKED_HORIZON_MS = 60_000;
const PARKED_SLACK_MS = 30_000;
const PARK_WAIT_MS = 10 * 60_000;
const WORKER_CONCURRENCY = 100;
const SAMPLE_MS = 5_000;
/** After the takeover, the measured window starts this much later (on a whole second). */
export const SETTLE_MS = 10_000;
/** After the window, the last runs are given this long to be promoted before the leader stops. */
const TAIL_MS = 5_000;
/** The leader over no schedules is sampled this long after it settled (at most the window). */
const IDLE_WINDOW_MS = 120_000;
/** How long a takeover may take before the run gives up on the log line and looks for the first enqueue. */
const TAKEOVER_WAIT_MS = 20 * 60_000;
const MISSING_EXAMPLES = 20;
const SLOWEST = 10;

export interface MillionLeaderRun {
  schedules: number;
  /** Process start → the producer's log "every job taken over", ms; undefined if it never logged it. */
  takeoverMs: number | undefined;
  /** Process start → the first run it added to BullMQ (the first job event of the queue's stream), ms. */
  firstEnqueueMs: number | undefined;
  /** Its memory at the start of the measured window (takeover + 10 s), and at its end. */
  settled: MemorySample;
  end: MemorySample;
  /** Its CPU time per second between those two samples, ms. */
  cpuMsPerSecond: number;
}

export interface MissingTick {
  id: string;
  tick: number;
  /** What Redis holds for it: the job hash (`job`, `none`), its ledger record (or `none`). */
  job: string;
  ledger: string;
}

/**
 * The first leader over the schedules just written, which no leader has looked at yet: until the due
 * index holds only the due soon. The measured leader comes after it, as a new leader (a failover, a
 * deploy) comes after a previous one.
 */
export interface FirstLeaderRun {
  /** Process start → "every job taken over" and → its first run in BullMQ, ms. */
  takeoverMs: number | undefined;
  firstEnqueueMs: number | undefined;
  /** Process start → the due index holds only the schedules due within a minute (the rest parked), ms. */
  parkedMs: number | undefined;
  /** The most RSS and heap of its samples. */
  peakRssMiB: number;
  peakHeapUsedMiB: number;
  /** It exited on SIGTERM by itself (false: killed after 10 s). */
  stoppedCleanly: boolean;
  /**
   * The ticks due from its process start until it was done (taken over and parked): how late they became
   * available to workers. Absent from results stored before it was measured.
   */
  takeoverLag?: DueWindowLag;
  /** BullMQ's over the same schedules and a window as long from its Worker's start (see takeover-lag.ts). */
  bullmqTakeoverLag?: DueWindowLag;
}

export interface MillionSchedulesResult {
  schedules: number;
  /** The setup: `schedules.upsert` of every schedule, this many in flight, per second. */
  inFlight: number;
  upsertsPerSecond: number;
  /** Redis' `used_memory` with the schedules stored, before any leader ran over them. */
  redisUsedMiB: number;
  idle: MillionLeaderRun;
  first: FirstLeaderRun;
  loaded: MillionLeaderRun;
  /** The measured window of nominal ticks, epoch ms: [windowStart, windowEnd). */
  windowStart: number;
  windowEnd: number;
  /** Ticks of the window due by the specs written (ground truth: computed from the offsets). */
  due: number;
  /** Due ticks whose run was added to BullMQ (its `added` event, or its job hash), and those of them made available to workers (`waiting`). */
  enqueued: number;
  available: number;
  /** Runs made available for a tick of the window that no schedule had due (wrong ticks). */
  unexpected: number;
  /** Due ticks not made available, the first few, with what Redis holds for them. */
  missing: MissingTick[];
  /** The event stream was read whole while the leader ran (else entries were trimmed first, and the counts from it are low). */
  streamWhole: boolean;
  /** Available to workers (its `waiting` event, Redis time) − nominal tick, ms, over the due ticks of the window. */
  enqueueLagMs: Spread | undefined;
  /** Due ticks made available within 100 ms of their tick. */
  within100Ms: number;
  /** The latest of them: job id, its lag, and when its run was first added (its first event − tick; negative: staged ahead), ms. */
  slowest: Array<{ jobId: string; lagMs: number; addedMs: number }>;
}

/** A leader process, with every line it printed so far parsed. */
interface LeaderChild {
  child: BenchChild;
  started: number;
  takenOver(): number | undefined;
  samples: MemorySample[];
  /** The first sample taken at or after `at` (waits for it). */
  sampleAfter(at: number): Promise<MemorySample>;
}

async function startLeader(url: string): Promise<LeaderChild> {
  const child = startChild('./million-leader-process.ts', [url, String(SAMPLE_MS)]);
  const samples: MemorySample[] = [];
  let takenOver: number | undefined;
  let started: number | undefined;
  createInterface({ input: child.child.stdout! }).on('line', (text) => {
    if (!text.startsWith('{')) return;
    const line = JSON.parse(text) as { started?: number; takenOver?: number; sample?: MemorySample };
    if (line.started !== undefined) started = line.started;
    if (line.takenOver !== undefined) takenOver = line.takenOver;
    if (line.sample) samples.push(line.sample);
  });
  await child.line((l) => l.startsWith('{"started"'), 60_000);
  while (started === undefined) await sleep(10);
  return {
    child,
    started,
    takenOver: () => takenOver,
    samples,
    sampleAfter: async (at) => {
      for (;;) {
        const sample = samples.find((s) => s.at >= at);
        if (sample) return sample;
        if (child.child.exitCode !== null || child.child.signalCode !== null) throw new Error('million-leader-process exited');
        await sleep(200);
      }
    },
  };
}

/**
 * Waits until the leader logs its takeover and (over schedules) has added its first run; answers both, from
 * the process start, and the Redis time of that first run. A leader that adds runs and does not log the
 * line within TAKEOVER_WAIT_MS is taken as producing from its first run.
 */
async function awaitTakeover(
  firstRun: () => Promise<number | undefined>,
  leader: LeaderChild,
  count: number,
): Promise<{ takeoverMs: number | undefined; firstEnqueueMs: number | undefined; firstEventAt: number | undefined; producingAt: number }> {
  const deadline = Date.now() + TAKEOVER_WAIT_MS;
  let first: number | undefined;
  for (;;) {
    if (leader.child.child.exitCode !== null || leader.child.child.signalCode !== null) throw new Error('million-leader-process exited before its takeover');
    if (count > 0 && first === undefined && (first = await firstRun()) !== undefined) continue;
    const logged = leader.takenOver() !== undefined;
    if (logged && (count === 0 || first !== undefined)) break;
    if (count === 0 && Date.now() > leader.started + 60_000) break;
    if (Date.now() > deadline) {
      if (first !== undefined) break;
      throw new Error(`the leader over ${count} schedules neither logged its takeover nor added a run in ${TAKEOVER_WAIT_MS / 60_000} min`);
    }
    await sleep(100);
  }
  const takeoverMs = leader.takenOver();
  const firstEnqueueMs = first === undefined ? undefined : Math.round(first - leader.started);
  const producingAt = leader.started + Math.max(takeoverMs ?? 0, firstEnqueueMs ?? 0);
  return { takeoverMs, firstEnqueueMs, firstEventAt: first, producingAt };
}

/** Runs a leader over what is stored, measures it from the settled instant for `windowMs`, and stops it. */
async function leaderRun(
  tail: EventTail | undefined,
  url: string,
  count: number,
  windowMs: number,
  progress: (line: string) => void,
): Promise<{ run: MillionLeaderRun; windowStart: number; windowEnd: number }> {
  const leader = await startLeader(url);
  try {
    const firstRun = (): Promise<number | undefined> => Promise.resolve(tail?.firstAddedFrom(leader.started));
    const { takeoverMs, firstEnqueueMs, producingAt } = await awaitTakeover(firstRun, leader, count);
    progress(`    leader over ${count}: takeover log ${takeoverMs ?? 'never'} ms, first enqueue ${firstEnqueueMs ?? 'none'} ms after its process start`);
    const windowStart = Math.ceil((producingAt + SETTLE_MS) / 1000) * 1000;
    const windowEnd = windowStart + windowMs;
    const settled = await leader.sampleAfter(windowStart);
    progress(`    settled: RSS ${settled.rssMiB.toFixed(0)} MiB, heap ${settled.heapUsedMiB.toFixed(0)} MiB; window of ${windowMs / 1000} s until ${new Date(windowEnd).toISOString()}`);
    for (let at = windowStart + 60_000; at < windowEnd; at += 60_000) {
      const s = await leader.sampleAfter(at);
      progress(`    ${Math.round((s.at - windowStart) / 1000)} s: RSS ${s.rssMiB.toFixed(0)} MiB, heap ${s.heapUsedMiB.toFixed(0)} MiB`);
    }
    const end = await leader.sampleAfter(windowEnd);
    await sleep(Math.max(0, windowEnd + TAIL_MS - Date.now()));
    const cpuMsPerSecond = ((end.cpuMs - settled.cpuMs) / (end.at - settled.at)) * 1000;
    return { run: { schedules: count, takeoverMs, firstEnqueueMs, settled, end, cpuMsPerSecond }, windowStart, windowEnd };
  } finally {
    await leader.child.stop();
  }
}

/**
 * The first leader over freshly written schedules: until it has parked those not due soon; then it stops.
 * What reached the queue meanwhile is read from its event stream, followed from before its start.
 */
export async function firstLeaderRun(redis: Redis, url: string, count: number, progress: (line: string) => void): Promise<FirstLeaderRun> {
  const tail = await EventTail.start(redis, QUEUE);
  await startPhase();
  const leader = await startLeader(url);
  try {
    // The stream was emptied before it started: its first event is this leader's first run.
    const { takeoverMs, firstEnqueueMs } = await awaitTakeover(() => firstEvent(redis, QUEUE), leader, count);
    progress(`    first leader: takeover log ${takeoverMs ?? 'never'} ms, first enqueue ${firstEnqueueMs ?? 'none'} ms after its process start`);
    let parkedMs: number | undefined;
    let shown = Date.now();
    for (const deadline = Date.now() + PARK_WAIT_MS; Date.now() < deadline; await sleep(1000)) {
      const { parked, soon, dueByTicks } = await firstLeaderParked(redis, count);
      if (parked) {
        parkedMs = Math.round(Date.now() - leader.started);
        break;
      }
      if (Date.now() - shown >= 30_000) {
        shown = Date.now();
        progress(`    first leader: ${soon} schedules due within ${PARKED_HORIZON_MS / 1000} s (done at ${dueByTicks}); takeover log ${leader.takenOver() ?? 'not yet'}`);
      }
    }
    progress(`    first leader: ${parkedMs === undefined ? 'never parked' : `parked all but the due soon ${parkedMs} ms`} after its process start`);
    await sleep(SAMPLE_MS);
    const peak = (pick: (s: MemorySample) => number): number => Math.max(...leader.samples.map(pick));
    const done = Math.max(leader.takenOver() ?? takeoverMs ?? 0, parkedMs ?? PARK_WAIT_MS);
    const run = { takeoverMs: leader.takenOver() ?? takeoverMs, firstEnqueueMs, parkedMs, peakRssMiB: peak((s) => s.rssMiB), peakHeapUsedMiB: peak((s) => s.heapUsedMiB) };
    await leader.child.stop();
    await tail.stop();
    // The ticks due from its process start until it was done: the takeover's (what a failover meets too).
    const from = Math.round(leader.started);
    const takeoverLag = dueWindowLag(count, from, from + done, tail.waiting, (i, tick) => `t${i}@${tick}`);
    const lag = takeoverLag.lagMs;
    progress(`    first leader: ${takeoverLag.available} of ${takeoverLag.due} ticks due in its first ${done} ms available; lag ${lag ? `${lag.median} / ${lag.p99} / ${lag.max} ms` : 'n/a'}`);
    return { ...run, stoppedCleanly: leader.child.child.exitCode === 0, takeoverLag };
  } finally {
    await leader.child.stop();
    await tail.stop();
  }
}

/** Writes `count` hourly schedules through `schedules.upsert`, `inFlight` at once; answers upserts per second. */
export async function writeSchedules(url: string, dir: string, count: number, inFlight: number): Promise<number> {
  const admin = createAdmin({ connection: url, jobsDir: dir });
  try {
    return await rate(count, inFlight, (i) => admin.schedules.upsert(`t${i}`, { job: BENCH_JOB_TYPE, schedule: cronOf(i), data: { tenant: i } }));
  } finally {
    await admin.close();
  }
}

export function millionScale(): { schedules: number; windowS: number } {
  const schedules = Number(process.env.LEASEBEAT_BENCH_MILLION_SCHEDULES ?? MILLION);
  const windowS = Number(process.env.LEASEBEAT_BENCH_MILLION_WINDOW_S ?? MILLION_WINDOW_S);
  if (!Number.isInteger(schedules) || schedules <= 0) throw new Error(`LEASEBEAT_BENCH_MILLION_SCHEDULES: not a positive integer: ${schedules}`);
  if (!Number.isInteger(windowS) || windowS <= 0 || windowS > 3600) throw new Error(`LEASEBEAT_BENCH_MILLION_WINDOW_S: not an integer in 1…3600: ${windowS}`);
  return { schedules, windowS };
}

/**
 * On `redis` (emptied): a leader over no schedules, then `schedules` hourly schedules written through
 * `schedules.upsert`, a BullMQ worker in its own process, and a leader over them for `windowS` seconds
 * after its takeover settled; then every due tick of the window against BullMQ's event stream.
 */
export async function measureMillionSchedules(
  redis: Redis,
  url: string,
  { schedules, windowS, inFlight }: { schedules: number; windowS: number; inFlight: number },
  progress: (line: string) => void,
): Promise<MillionSchedulesResult> {
  const windowMs = windowS * 1000;
  const dir = await jobTypeFolder();
  try {
    await redis.flushall();
    progress(`  million: a leader over no schedules, ${Math.min(windowMs, IDLE_WINDOW_MS) / 1000} s`);
    const idle = (await leaderRun(undefined, url, 0, Math.min(windowMs, IDLE_WINDOW_MS), progress)).run;

    await redis.flushall();
    progress(`  million: ${schedules.toLocaleString('en-US')} hourly schedules through schedules.upsert, ${inFlight} in flight`);
    const upsertsPerSecond = await writeSchedules(url, dir, schedules, inFlight);
    const redisUsedMiB = Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? NaN) / 2 ** 20;
    progress(`    ${Math.round(upsertsPerSecond)} upserts/s; Redis used_memory ${redisUsedMiB.toFixed(0)} MiB`);

    const worker = startChild('./worker-process.ts', [url, QUEUE, String(WORKER_CONCURRENCY)]);
    let measured: Awaited<ReturnType<typeof leaderRun>>;
    let first: FirstLeaderRun;
    let tail: EventTail | undefined;
    try {
      await worker.line((l) => l === 'ready');
      progress('  million: the first leader over them, until it parked those not due soon');
      first = await firstLeaderRun(redis, url, schedules, progress);
      progress(`  million: a new leader over them, ${windowS} s`);
      tail = await EventTail.start(redis, QUEUE);
      measured = await leaderRun(tail, url, schedules, windowMs, progress);
    } finally {
      await tail?.stop();
      await worker.stop();
    }
    const { run: loaded, windowStart, windowEnd } = measured;
    const { added, waiting } = tail;
    const lags: number[] = [];
    let due = 0;
    let enqueued = 0;
    const missing: Array<{ id: string; tick: number }> = [];
    let notAvailable = 0;
    const dueIds = new Set<string>();
    const slow: MillionSchedulesResult['slowest'] = [];
    /** Due runs the stream never named: looked up in BullMQ itself (the stream could have lost them). */
    const unseen: string[] = [];
    for (let i = 0; i < schedules; i++) {
      const tick = dueTick(i, windowStart, windowEnd);
      if (tick === undefined) continue;
      due++;
      const jobId = `t${i}@${tick}`;
      dueIds.add(jobId);
      const at = waiting.get(jobId);
      if (added.has(jobId) || at !== undefined) enqueued++;
      else unseen.push(jobId);
      if (at === undefined) {
        notAvailable++;
        if (missing.length < MISSING_EXAMPLES) missing.push({ id: `t${i}`, tick });
        continue;
      }
      lags.push(at - tick);
      slow.push({ jobId, lagMs: at - tick, addedMs: (added.get(jobId) ?? NaN) - tick });
      if (slow.length > 4 * SLOWEST) slow.sort((a, b) => b.lagMs - a.lagMs).length = SLOWEST;
    }
    let unexpected = 0;
    for (const jobId of waiting.keys()) {
      const tick = Number(jobId.slice(jobId.lastIndexOf('@') + 1));
      if (tick >= windowStart && tick < windowEnd && !dueIds.has(jobId)) unexpected++;
    }
    for (let i = 0; i < unseen.length; i += 1000) {
      const pipeline = redis.pipeline();
      for (const jobId of unseen.slice(i, i + 1000)) pipeline.exists(`${QUEUE_KEY}:${jobId}`);
      for (const [, exists] of (await pipeline.exec()) ?? []) if (exists === 1) enqueued++;
    }
    const examples: MissingTick[] = [];
    for (const { id, tick } of missing) {
      const [exists, record] = await Promise.all([redis.exists(`${QUEUE_KEY}:${id}@${tick}`), redis.hget(ledgerKey(id), String(tick))]);
      examples.push({ id, tick, job: exists ? 'job' : 'none', ledger: record ?? 'none' });
    }
    const lag = spread(lags);
    // Last: it empties Redis for BullMQ's schedulers.
    const bullmqTakeoverLag = first.takeoverLag && (await measureBullmqTakeover(redis, url, schedules, inFlight, first.takeoverLag.to - first.takeoverLag.from, progress));
    progress(`    ${due} due, ${enqueued} enqueued, ${due - notAvailable} available, ${unexpected} unexpected; enqueue lag ${lag ? `${lag.median} / ${lag.p99} / ${lag.max} ms` : 'n/a'}`);
    return {
      schedules,
      inFlight,
      upsertsPerSecond,
      redisUsedMiB,
      idle,
      first: { ...first, ...(bullmqTakeoverLag ? { bullmqTakeoverLag } : {}) },
      loaded,
      windowStart,
      windowEnd,
      due,
      enqueued,
      available: due - notAvailable,
      unexpected,
      missing: examples,
      streamWhole: !tail.gap,
      enqueueLagMs: lag,
      within100Ms: lags.filter((ms) => ms <= 100).length,
      slowest: slow.sort((a, b) => b.lagMs - a.lagMs).slice(0, SLOWEST),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Whether the first leader over `count` just-written schedules has parked all but the due soon: the due
 * index holds, within PARKED_HORIZON_MS, no more than what the ticks make due there (with PARKED_SLACK_MS).
 */
export async function firstLeaderParked(redis: Redis, count: number): Promise<{ parked: boolean; soon: number; dueByTicks: number }> {
  const dueByTicks = Math.ceil((count * (PARKED_HORIZON_MS + PARKED_SLACK_MS)) / HOUR_MS);
  const soon = await redis.zcount(DUE_INDEX, '-inf', String(Date.now() + PARKED_HORIZON_MS));
  return { parked: soon <= dueByTicks, soon, dueByTicks };
}
