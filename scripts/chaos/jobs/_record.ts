import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Job } from 'bullmq';
import type { HandlerContext, TickRunData } from '../../../src/job.js';

/** One handler invocation, as the chaos suite reads it back from `chaos:runs`. */
export interface RunRecord {
  /**
   * This invocation's own id. A record written twice is one run: ioredis sends an unanswered RPUSH again
   * once it reconnects, and a Redis that applied it but stopped before replying (a restart fault) keeps both.
   */
  runId: string;
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
  /** `ctx.data`: a runtime schedule's data (the chaos client's write it came from); absent for file jobs. */
  data?: unknown;
}

/** The runs of `records` in their order, each once: a record resent by the client (see RunRecord.runId) is dropped. */
export function distinctRuns(records: RunRecord[]): { runs: RunRecord[]; resent: number } {
  const seen = new Set<string>();
  const runs = records.filter((record) => !seen.has(record.runId) && seen.add(record.runId));
  return { runs, resent: records.length - runs.length };
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

/**
 * The handshake by which a fault is aimed at the instant a handler returns (issue 18). While AIM_KEY is
 * set, a handler that started then announces on RETURNING_CHANNEL that it is about to return and waits
 * (at most {@link GO_WAIT_S}) until the fault pushes to the notice's `go` key; it then returns and says
 * so on RETURNED_CHANNEL with the time. Otherwise a handler returns at once, as before.
 */
export const AIM_KEY = 'chaos:aim';
export const RETURNING_CHANNEL = 'chaos:returning';
export const RETURNED_CHANNEL = 'chaos:returned';
const GO_WAIT_S = 2;

export interface ReturningNotice {
  jobId: string;
  /** BullMQ's queue name: its completion is written to that queue's keys. */
  queue: string;
  identity: string;
  startedAt: number;
  /** The list the handler waits on before it returns. */
  go: string;
}

export interface ReturnedNotice {
  go: string;
  /** `Date.now()` just before the handler returned. */
  returnedAt: number;
}

// Straight to Redis, not through the instance's partitionable proxy, so that a record is never the thing
// a fault loses. Created on first use: the suite imports these files only to read the schedules.
let client: Redis | undefined;
/** A second connection for the handshake's BLPOP, which would hold up the other handlers' records. */
let blocking: Redis | undefined;
/** The runs that started while a fault was aiming: they announce their return. */
const aimed = new WeakMap<RunRecord, string>();

function connect(): Redis {
  return new Redis(process.env.CHAOS_RECORD_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
}

function recorder(): Redis {
  client ??= connect();
  return client;
}

/** Appends this run to the suite's log of handler invocations; returns the record (for {@link recordEnd}). */
export async function recordRun(job: Job<TickRunData>, ctx: HandlerContext): Promise<RunRecord> {
  const record: RunRecord = {
    runId: randomUUID(),
    job: job.name,
    jobId: String(job.id),
    tick: ctx.tick.getTime(),
    timestamp: job.timestamp,
    token: { generation: ctx.token.generation, leaderTransitions: ctx.token.leaderTransitions },
    pid: process.pid,
    identity: process.env.LEASEBEAT_IDENTITY ?? '',
    attemptsMade: job.attemptsMade,
    startedAt: Date.now(),
    ...(ctx.data === undefined ? {} : { data: ctx.data }),
  };
  // The aim is read in the same round trip: a run costs no more when no fault is aiming.
  const [, aim] = (await recorder().pipeline().rpush(RUNS_KEY, JSON.stringify(record)).get(AIM_KEY).exec()) ?? [];
  if (aim?.[1]) aimed.set(record, job.queueName);
  return record;
}

/** Called as a handler's last step: announces the return to an aiming fault and waits for its go (see AIM_KEY). */
export async function handlerReturns(start: RunRecord): Promise<void> {
  const queue = aimed.get(start);
  if (queue === undefined) return;
  const notice: ReturningNotice = { jobId: start.jobId, queue, identity: start.identity, startedAt: start.startedAt, go: `chaos:go:${start.identity}:${start.jobId}:${start.startedAt}` };
  await recorder().publish(RETURNING_CHANNEL, JSON.stringify(notice));
  blocking ??= connect();
  await blocking.blpop(notice.go, GO_WAIT_S);
  const returned: ReturnedNotice = { go: notice.go, returnedAt: Date.now() };
  // Not awaited: the handler returns now, and BullMQ writes its completion.
  void recorder().publish(RETURNED_CHANNEL, JSON.stringify(returned));
}

/** Records that a run finished (a run cut off by a crash has none: it ended when its process exited). */
export async function recordEnd(start: RunRecord): Promise<void> {
  const end: RunEndRecord = { jobId: start.jobId, identity: start.identity, startedAt: start.startedAt, finishedAt: Date.now() };
  await recorder().rpush(RUN_ENDS_KEY, JSON.stringify(end));
}
