/**
 * A leader alone in its process: the real Producer over `count` generated schedules, no workers. Once it
 * has taken every schedule over, it measures its own CPU time and memory over a window and prints them
 * as one JSON line.
 *
 *   node --import tsx bench/leader-process.ts <redis url> <count> <window ms>
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { spread, type Spread } from '../scripts/chaos/report.js';
import { startProducer } from './producer-harness.js';
import { cron, generateSchedules } from './schedules.js';

/** Once a minute each, spread evenly over the seconds of the minute. */
const SPREAD_PER_MINUTE = cron((index) => `${index % 60} * * * * *`);
const WARMUP_MS = 3000;

export interface LeaderCost {
  schedules: number;
  takeoverMs: number;
  windowMs: number;
  /** CPU time (user + system) per second of wall time, in milliseconds. */
  cpuMsPerSecond: number;
  rssMiB: number;
  heapUsedMiB: number;
  enqueued: number;
  /** The producer's own enqueue lag over the window (its add done − nominal tick), ms. */
  enqueueLagMs?: Spread | undefined;
}

const [url, count, windowMs] = process.argv.slice(2);
const redis = new Redis(url!, { maxRetriesPerRequest: null });
let enqueued = 0;
/** Lags of the enqueues in the measured window. */
const lags: number[] = [];
let measuring = false;
const jobs = generateSchedules(Number(count), 'bench-leader', SPREAD_PER_MINUTE);
const started = Date.now();
const running = startProducer({
  redis,
  jobs,
  metrics: {
    enqueued: (_job, lagSeconds) => {
      enqueued++;
      if (measuring) lags.push(Math.round(lagSeconds * 1000));
    },
    skipped: () => undefined,
    fenced: () => undefined,
  },
});
const takeoverMs = (await running.looping) - started;
await sleep(WARMUP_MS);
const cpuBefore = process.cpuUsage();
const enqueuedBefore = enqueued;
measuring = true;
const from = process.hrtime.bigint();
await sleep(Number(windowMs));
measuring = false;
const cpu = process.cpuUsage(cpuBefore);
const wallMs = Number(process.hrtime.bigint() - from) / 1e6;
const memory = process.memoryUsage();
const cost: LeaderCost = {
  schedules: Number(count),
  takeoverMs,
  windowMs: Math.round(wallMs),
  cpuMsPerSecond: (cpu.user + cpu.system) / 1000 / (wallMs / 1000),
  rssMiB: memory.rss / 2 ** 20,
  heapUsedMiB: memory.heapUsed / 2 ** 20,
  enqueued: enqueued - enqueuedBefore,
  enqueueLagMs: spread(lags),
};
console.log(JSON.stringify(cost));
await running.stop();
redis.disconnect();
