import type { Redis } from 'ioredis';
import { startChild } from './child.js';
import type { InstanceProcessReport, InstanceSample } from './instance-process.js';

export interface InstanceCostOptions {
  /** Schedules, all firing every minute (a burst of this many runs each minute). Default 10,000. */
  schedules?: number;
  /** How long RSS is sampled after the bursts; the row asks 10 minutes. */
  windowMs: number;
  /** Default every 10 s. */
  sampleEveryMs?: number;
  /** Bursts run before the window begins. Default 2. */
  bursts?: number;
}

export interface InstanceCost {
  schedules: number;
  /** From the instance's process start until it led. */
  startupMs: number;
  /** Of which `scheduler.start()`: jobs loaded, member registered, workers started. */
  startMs: number;
  bursts: number;
  windowMs: number;
  rssMiB: { first: number; last: number; min: number; max: number };
  /** Least-squares slope of RSS over the window: flat is about 0. */
  rssSlopeMiBPerMinute: number;
  heapUsedMiB: { first: number; last: number; max: number };
  /** Runs finished during the window (each burst is `schedules` runs). */
  runsInWindow: number;
  samples: InstanceSample[];
}

/**
 * A whole instance (leader with its workers, through `createScheduler`) in a process of its own, on an
 * emptied Redis: its start-up time until it leads, then its RSS sampled over `windowMs` after `bursts`
 * bursts of `schedules` runs.
 */
export async function measureInstanceCost(redis: Redis, url: string, options: InstanceCostOptions): Promise<InstanceCost> {
  const schedules = options.schedules ?? 10_000;
  const bursts = options.bursts ?? 2;
  const sampleEveryMs = options.sampleEveryMs ?? 10_000;
  await redis.flushall();
  const child = startChild('./instance-process.ts', [url, String(schedules), String(options.windowMs), String(sampleEveryMs), String(bursts)]);
  try {
    const line = await child.line((l) => l.startsWith('{"schedules"'), options.windowMs + (bursts + 3) * 60_000);
    return summarise(JSON.parse(line) as InstanceProcessReport, options.windowMs);
  } finally {
    await child.stop();
  }
}

function summarise(report: InstanceProcessReport, windowMs: number): InstanceCost {
  const { samples } = report;
  const rss = samples.map((sample) => sample.rssMiB);
  const heap = samples.map((sample) => sample.heapUsedMiB);
  return {
    schedules: report.schedules,
    startupMs: Math.round(report.startupMs),
    startMs: Math.round(report.startMs),
    bursts: report.bursts,
    windowMs,
    rssMiB: { first: rss[0]!, last: rss.at(-1)!, min: Math.min(...rss), max: Math.max(...rss) },
    rssSlopeMiBPerMinute: slope(samples.map((sample) => [sample.atMs / 60_000, sample.rssMiB])),
    heapUsedMiB: { first: heap[0]!, last: heap.at(-1)!, max: Math.max(...heap) },
    runsInWindow: samples.at(-1)!.runs - samples[0]!.runs,
    samples,
  };
}

function slope(points: Array<[number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  const meanX = points.reduce((sum, [x]) => sum + x, 0) / n;
  const meanY = points.reduce((sum, [, y]) => sum + y, 0) / n;
  const covariance = points.reduce((sum, [x, y]) => sum + (x - meanX) * (y - meanY), 0);
  const variance = points.reduce((sum, [x]) => sum + (x - meanX) ** 2, 0);
  return variance === 0 ? 0 : covariance / variance;
}
