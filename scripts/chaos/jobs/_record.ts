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
  /** The instance that ran it (`LEASEBEAT_IDENTITY`). */
  identity: string;
  attemptsMade: number;
  startedAt: number;
}

/** The end of a run, for jobs whose runs must not overlap: matched to its start by jobId, identity and startedAt. */
export interface RunEndRecord {
  jobId: string;
  identity: string;
  startedAt: number;
  finishedAt: number;
}

export const RUNS_KEY = 'chaos:runs';
export const RUN_ENDS_KEY = 'chaos:runs:ends';
export const DELIBERATE_FAILURE = 'chaos: deliberate failure';

// Straight to Redis, not through the instance's partitionable proxy, so that a record is never the thing
// a fault loses. Created on first use: the suite imports these files only to read the schedules.
let client: Redis | undefined;

function recorder(): Redis {
  client ??= new Redis(process.env.CHAOS_RECORD_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
  return client;
}

/** Appends this run to the suite's log of handler invocations; returns the record (for {@link recordEnd}). */
export async function recordRun(job: Job<TickRunData>, ctx: HandlerContext): Promise<RunRecord> {
  const record: RunRecord = {
    job: job.name,
    jobId: String(job.id),
    tick: ctx.tick.getTime(),
    timestamp: job.timestamp,
    token: { generation: ctx.token.generation, leaderTransitions: ctx.token.leaderTransitions },
    pid: process.pid,
    identity: process.env.LEASEBEAT_IDENTITY ?? '',
    attemptsMade: job.attemptsMade,
    startedAt: Date.now(),
  };
  await recorder().rpush(RUNS_KEY, JSON.stringify(record));
  return record;
}

/** Records that a run finished (a run cut off by a crash has none: it ended when its process exited). */
export async function recordEnd(start: RunRecord): Promise<void> {
  const end: RunEndRecord = { jobId: start.jobId, identity: start.identity, startedAt: start.startedAt, finishedAt: Date.now() };
  await recorder().rpush(RUN_ENDS_KEY, JSON.stringify(end));
}
