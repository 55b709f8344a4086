import { Redis } from 'ioredis';
import type { Job } from 'bullmq';
import type { HandlerContext, TickRunData } from '../../../src/job.js';

/** One handler invocation, as the chaos suite reads it back from `chaos:runs`. */
export interface RunRecord {
  job: string;
  jobId: string;
  tick: number;
  /** BullMQ's job timestamp: two adds of one tick would show two different values. */
  timestamp: number;
  token: { generation: string; leaderTransitions: number };
  pid: number;
  attemptsMade: number;
  startedAt: number;
}

export const RUNS_KEY = 'chaos:runs';
export const DELIBERATE_FAILURE = 'chaos: deliberate failure';

// Straight to Redis, not through the instance's partitionable proxy, so that a record is never the thing
// a fault loses. Created on first use: the suite imports these files only to read the schedules.
let client: Redis | undefined;

/** Appends this run to the suite's log of handler invocations. */
export async function recordRun(job: Job<TickRunData>, ctx: HandlerContext): Promise<void> {
  client ??= new Redis(process.env.CHAOS_RECORD_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
  const record: RunRecord = {
    job: job.name,
    jobId: String(job.id),
    tick: ctx.tick.getTime(),
    timestamp: job.timestamp,
    token: { generation: ctx.token.generation, leaderTransitions: ctx.token.leaderTransitions },
    pid: process.pid,
    attemptsMade: job.attemptsMade,
    startedAt: Date.now(),
  };
  await client.rpush(RUNS_KEY, JSON.stringify(record));
}
