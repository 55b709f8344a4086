import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { createAdmin, type BackfillProgress } from '../src/index.js';
import { KeySpace } from '../src/redis/keys.js';
import { validateJobDefinition } from '../src/scheduling/schema.js';
import type { Spread } from '../scripts/chaos/report.js';
import { startChild } from './child.js';
import { readStream, UNTRIMMED_EVENTS } from './precision.js';
import { startProducer } from './producer-harness.js';
import { generateSchedules, perSecondSpread } from './schedules.js';

/** Issue 22's row: this many past ticks of a per-second job, at this rate, beside live per-second jobs. */
export const BACKFILL_TICKS = 100_000;
export const BACKFILL_RATE = 2_000;
const LIVE_SCHEDULES = 100;
const LIVE_QUEUE = 'bench-live';
const BACKFILL_QUEUE = 'bench-backfill';
const PROGRESS_POLL_MS = 100;

export interface BackfillResult {
  ticks: number;
  rate: number;
  /** `admin.backfill` sent → the backfill recorded done (ms, monotonic). */
  elapsedMs: number;
  /** Runs the backfill added (all of its ticks: none had a run). */
  enqueued: number;
  state: BackfillProgress['state'];
  liveSchedules: number;
  /** The live jobs' runs due while the backfill ran: available to workers − nominal tick. */
  liveEnqueueLagMs: Spread | undefined;
  liveDelivered: number;
  liveExpected: number;
}

/**
 * The real Producer leading alone in this process (its backfill desk among its parts) over 100 live
 * per-second jobs, with a BullMQ worker in another process taking their runs, and `backfilled`, a
 * per-second job whose 100,000 seconds before the leader first scheduled it have no run. `admin.backfill`
 * asks for them at 2,000/s, as `leasebeat backfill --rate 2000` does; the runs pile up in a queue no
 * worker takes (the row measures their enqueue).
 */
export async function measureBackfill(redis: Redis, url: string, progress: (line: string) => void): Promise<BackfillResult> {
  await redis.flushall();
  const jobs = generateSchedules(LIVE_SCHEDULES, LIVE_QUEUE, perSecondSpread(LIVE_SCHEDULES));
  const backfilled = validateJobDefinition({ name: 'backfilled', every: '1s', queue: BACKFILL_QUEUE, handler: () => undefined }, '/bench/backfilled.ts');
  if (!backfilled.ok) throw new Error(backfilled.errors.join('\n'));
  jobs.set('backfilled', backfilled.job);
  const worker = startChild('./worker-process.ts', [url, LIVE_QUEUE, '100']);
  await worker.line((l) => l === 'ready');
  const running = startProducer({ redis, jobs });
  await running.queues.get(LIVE_QUEUE).getVersion();
  await redis.hset(`bull:${LIVE_QUEUE}:meta`, 'opts.maxLenEvents', UNTRIMMED_EVENTS);
  const admin = createAdmin({ connection: redis, jobs: () => jobs });
  try {
    await running.looping;
    const state = new KeySpace().jobState('backfilled');
    // Its first tick recorded: the leader has scheduled it, and what came before is the backfill's.
    while ((await redis.hmget(state, 'scheduledSince', 'lastScheduledTick')).includes(null)) await sleep(50);
    const scheduledSince = Number(await redis.hget(state, 'scheduledSince'));
    const to = Math.floor((scheduledSince - 1) / 1000) * 1000;
    const from = to - (BACKFILL_TICKS - 1) * 1000;
    const sentAt = Date.now();
    const started = performance.now();
    const { id } = await admin.backfill('backfilled', { from, to, rate: BACKFILL_RATE, by: 'bench' });
    let done: BackfillProgress | undefined;
    let shown = 0;
    while (!done) {
      await sleep(PROGRESS_POLL_MS);
      const now = (await admin.backfills('backfilled')).find((b) => b.id === id);
      if (now && (now.state === 'done' || now.state === 'failed')) done = now;
      else if (now && performance.now() - shown > 10_000) {
        shown = performance.now();
        progress(`  backfill ${now.done}/${now.total} ticks, ${now.enqueued} enqueued`);
      }
    }
    const elapsedMs = Math.round(performance.now() - started);
    const endedAt = Date.now();
    // The live ticks due while it ran, their last runs given a second to be promoted.
    await sleep(1_000);
    const window = { start: Math.ceil(sentAt / 1000) * 1000, end: Math.floor(endedAt / 1000) * 1000 };
    const live = await readStream(redis, LIVE_QUEUE, (tick) => tick >= window.start && tick < window.end);
    return {
      ticks: BACKFILL_TICKS,
      rate: BACKFILL_RATE,
      elapsedMs,
      enqueued: done.enqueued,
      state: done.state,
      liveSchedules: LIVE_SCHEDULES,
      liveEnqueueLagMs: live.enqueueLagMs,
      liveDelivered: live.delivered,
      liveExpected: (LIVE_SCHEDULES * (window.end - window.start)) / 1000,
    };
  } finally {
    await admin.close();
    await running.stop();
    await worker.stop();
  }
}
