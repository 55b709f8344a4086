/**
 * Issue 30's takeover row of section 8: the lag of the ticks that fall due while the first leader takes
 * over N just-stored hourly runtime schedules (bench/million-schedules.ts), against BullMQ's over the same
 * N schedules written through `upsertJobScheduler`, in a window as long from the start of its one Worker
 * process. Both from BullMQ's event stream: a run's first `waiting` event (Redis time) − its nominal tick,
 * the tick read from the job id (leasebeat `<id>@<tick>`, BullMQ `repeat:<id>:<tick>`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { spread, type Spread } from '../scripts/chaos/report.js';
import { startChild } from './child.js';
import { EventTail } from './event-tail.js';
import { rate } from './rate.js';

const HOUR_MS = 3_600_000;
/** BullMQ's own queue for its run, beside the leasebeat one of the million rows. */
const BULLMQ_QUEUE = 'bench-takeover';
const WORKER_CONCURRENCY = 100;
/** After the window, its last ticks are given this long to be promoted before the counts. */
const TAIL_MS = 5_000;
/**
 * Both processes are started this long after a whole second: the ticks fall on whole seconds, so the ones
 * due while a process starts (its p99 in a window of seconds) depend on that phase, which must be the same.
 */
const START_PHASE_MS = 100;

/** Waits until the next instant {@link START_PHASE_MS} after a whole second. */
export async function startPhase(): Promise<void> {
  await sleep((START_PHASE_MS - (Date.now() % 1000) + 1000) % 1000);
}

/** Schedule i's second of the hour, and its 6-field cron (`S M * * * *`). */
export const offsetOf = (i: number): number => i % 3600;
export const cronOf = (i: number): string => `${offsetOf(i) % 60} ${Math.floor(offsetOf(i) / 60)} * * * *`;

/** The nominal tick of schedule i within [from, to), if it has one there (the window is at most an hour). */
export function dueTick(i: number, from: number, to: number): number | undefined {
  let tick = from - (from % HOUR_MS) + offsetOf(i) * 1000;
  if (tick < from) tick += HOUR_MS;
  return tick < to ? tick : undefined;
}

/** The ticks due in one window, and how late they became available to workers. */
export interface DueWindowLag {
  /** The window of nominal ticks, epoch ms: [from, to). */
  from: number;
  to: number;
  due: number;
  /** Of those, made available to workers (a `waiting` event) by the end of the reading. */
  available: number;
  /** Available − nominal tick, ms, over the available ones. */
  lagMs: Spread | undefined;
}

/** The lag of every tick of schedules 0…count−1 due in [from, to), from the `waiting` events of their job ids. */
export function dueWindowLag(count: number, from: number, to: number, waiting: ReadonlyMap<string, number>, jobIdOf: (i: number, tick: number) => string): DueWindowLag {
  const lags: number[] = [];
  let due = 0;
  for (let i = 0; i < count; i++) {
    const tick = dueTick(i, from, to);
    if (tick === undefined) continue;
    due++;
    const at = waiting.get(jobIdOf(i, tick));
    if (at !== undefined) lags.push(at - tick);
  }
  return { from, to, due, available: lags.length, lagMs: spread(lags) };
}

/**
 * BullMQ over the same `count` schedules: written through `upsertJobScheduler` (`inFlight` at once) on
 * the emptied Redis, then one Worker process started; the lag of the ticks due in the `windowMs` after
 * its start (the span the first leasebeat leader took over in).
 */
export async function measureBullmqTakeover(redis: Redis, url: string, count: number, inFlight: number, windowMs: number, progress: (line: string) => void): Promise<DueWindowLag> {
  await redis.flushall();
  const queue = new Queue(BULLMQ_QUEUE, { connection: redis });
  try {
    const perSecond = await rate(count, inFlight, (i) => queue.upsertJobScheduler(`t${i}`, { pattern: cronOf(i) }, { name: `t${i}`, data: { tenant: i } }));
    progress(`    BullMQ: ${count.toLocaleString('en-US')} upsertJobScheduler at ${Math.round(perSecond)}/s; a Worker over them for ${windowMs} ms`);
  } finally {
    await queue.close();
  }
  const tail = await EventTail.start(redis, BULLMQ_QUEUE);
  await startPhase();
  const from = Date.now();
  const worker = startChild('./worker-process.ts', [url, BULLMQ_QUEUE, String(WORKER_CONCURRENCY)]);
  try {
    await sleep(from + windowMs + TAIL_MS - Date.now());
  } finally {
    await worker.stop();
    await tail.stop();
  }
  return dueWindowLag(count, from, from + windowMs, tail.waiting, (i, tick) => `repeat:t${i}:${tick}`);
}

const int = (n: number): string => Math.round(n).toLocaleString('en-US');
const show = (lag: DueWindowLag): string =>
  `${lag.lagMs ? `${int(lag.lagMs.median)} / ${int(lag.lagMs.p99)} / ${int(lag.lagMs.max)} ms` : 'n/a'}; ${int(lag.available)} of ${int(lag.due)} due available`;

/**
 * The row of the lag of the ticks due while the first leader takes over `n` just-stored schedules, against
 * BullMQ's (`verdict` words the goal's outcome; `scale` notes a reduced run). None before it was measured.
 */
export function takeoverLagRow(n: string, leasebeat: DueWindowLag | undefined, bullmq: DueWindowLag | undefined, scale: string, verdict: (ok: boolean) => string): string[] {
  if (!leasebeat || !bullmq) return [];
  const windowS = ((leasebeat.to - leasebeat.from) / 1000).toFixed(1);
  const p99 = (lag: DueWindowLag): number => lag.lagMs?.p99 ?? Infinity;
  const ok = p99(leasebeat) <= p99(bullmq) && leasebeat.available === leasebeat.due;
  return [
    `| 8 | Ticks due while the first leader takes over the ${n} just-stored schedules (its process start → taken over and parked, ${windowS} s): run available to workers ` +
      `− nominal tick (median / p99 / max; BullMQ's event stream)${scale} | ${show(leasebeat)} | BullMQ, the same schedules through \`upsertJobScheduler\`, ticks due in the ` +
      `${windowS} s from its one Worker process' start: ${show(bullmq)} | | p99 ≤ BullMQ's; every due tick available | ${verdict(ok)} |`,
  ];
}
