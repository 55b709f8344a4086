import { rm } from 'node:fs/promises';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { createAdmin } from '../src/index.js';
import { startChild } from './child.js';
import { rate } from './rate.js';
import type { MillionSchedulesResult } from './million-schedules.js';
import { BENCH_JOB_TYPE, jobTypeFolder, type ScheduleLeaderReport } from './schedules-leader-process.js';

export interface RuntimeSchedulesResult {
  /** Distinct ids written, and how many writes were in flight at once. */
  upserts: number;
  inFlight: number;
  /** `schedules.upsert` (the admin API: checks, durable script, change feed), per second. */
  leasebeatPerSecond: number;
  /** BullMQ's `Queue.upsertJobScheduler` on the same Redis, per second. */
  bullmqPerSecond: number;
  /** A leader with no schedules, and one with `upserts` stored. */
  idle: ScheduleLeaderReport;
  loaded: ScheduleLeaderReport;
  /** The million rows (bench/million-schedules.ts); absent from results stored before they were measured. */
  million?: MillionSchedulesResult;
}

const EDITS = 500;

async function leaderReport(url: string): Promise<ScheduleLeaderReport> {
  const child = startChild('./schedules-leader-process.ts', [url, String(EDITS)]);
  try {
    return JSON.parse(await child.line((l) => l.startsWith('{"schedules"'), 600_000)) as ScheduleLeaderReport;
  } finally {
    await child.stop();
  }
}

/**
 * Issue 21's rows: the throughput of `schedules.upsert` against BullMQ's `upsertJobScheduler` (the same
 * hourly schedules, distinct ids, the same number in flight, on the same emptied Redis), then a leader's
 * takeover time and memory over those schedules against none, and how long an edit takes to go live on it.
 */
export async function measureRuntimeSchedules(redis: Redis, url: string, upserts: number, inFlight: number, progress: (line: string) => void): Promise<RuntimeSchedulesResult> {
  const dir = await jobTypeFolder();
  try {
    await redis.flushall();
    const queue = new Queue('bench-schedulers', { connection: redis });
    const bullmqPerSecond = await rate(upserts, inFlight, (i) => queue.upsertJobScheduler(`t${i}`, { every: 3_600_000 }, { name: BENCH_JOB_TYPE, data: { tenant: i } }));
    await queue.close();
    progress(`  BullMQ upsertJobScheduler: ${Math.round(bullmqPerSecond)}/s`);

    await redis.flushall();
    const idle = await leaderReport(url);
    progress(`  leader with no schedules: ${JSON.stringify(idle)}`);

    await redis.flushall();
    const admin = createAdmin({ connection: url, jobsDir: dir });
    const leasebeatPerSecond = await rate(upserts, inFlight, (i) => admin.schedules.upsert(`t${i}`, { job: BENCH_JOB_TYPE, every: '1h', data: { tenant: i } }));
    await admin.close();
    progress(`  schedules.upsert: ${Math.round(leasebeatPerSecond)}/s`);

    const loaded = await leaderReport(url);
    progress(`  leader with ${loaded.schedules} schedules: ${JSON.stringify(loaded)}`);
    return { upserts, inFlight, leasebeatPerSecond, bullmqPerSecond, idle, loaded };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
