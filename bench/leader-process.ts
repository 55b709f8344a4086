/**
 * A leader alone in its process: the real Producer over `count` generated schedules, no workers. Once it
 * has taken every schedule over, it measures its own CPU time and memory over a window and prints them
 * as one JSON line.
 *
 *   node --import tsx bench/leader-process.ts <redis url> <count> <window ms>
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { startProducer } from './producer-harness.js';
import { generateSchedules } from './schedules.js';

/** Once a minute each, spread evenly over the seconds of the minute. */
const SPREAD_PER_MINUTE = (index: number): string => `${index % 60} * * * * *`;
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
}

const [url, count, windowMs] = process.argv.slice(2);
const redis = new Redis(url!, { maxRetriesPerRequest: null });
let enqueued = 0;
const started = Date.now();
const running = startProducer({
  redis,
  jobs: generateSchedules(Number(count), 'bench-leader', SPREAD_PER_MINUTE),
  metrics: { enqueued: () => void enqueued++, skipped: () => undefined, fenced: () => undefined },
});
const takeoverMs = (await running.looping) - started;
await sleep(WARMUP_MS);
const cpuBefore = process.cpuUsage();
const enqueuedBefore = enqueued;
const from = process.hrtime.bigint();
await sleep(Number(windowMs));
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
};
console.log(JSON.stringify(cost));
await running.stop();
redis.disconnect();
