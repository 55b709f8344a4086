import type { FlowJob, FlowJobNode, Job, JobsOptions } from 'bullmq';
import type { Logger } from 'pino';
import { formatDuration, type Duration } from './duration.js';

export type { Duration } from './duration.js';

/** The fencing token of the leadership term under which a tick was enqueued. */
export interface FenceToken {
  readonly generation: string;
  readonly leaderTransitions: number;
}

/** What leasebeat stores in `job.data` of every run it enqueues. */
export interface TickRunData<TData = unknown> {
  /** Nominal tick, epoch ms. */
  tick: number;
  /** The fencing token of the term that enqueued it; manual runs carry generation `''`. */
  token: FenceToken;
  /** The definition's `data`. */
  data: TData;
  manual: boolean;
  /**
   * When the run is due (epoch ms, Redis time), for a run staged: added ahead of its tick as a delayed
   * job. Absent for a run added when due.
   */
  dueAt?: number;
  /**
   * The term that staged it, when that is not the term that added it: a tick an earlier term claimed
   * ahead of its due time and never confirmed, added by the next leader after its due time. Workers hold
   * it as that term's staged run until the next leader has applied its rules to it.
   */
  stagedBy?: FenceToken;
  /**
   * For a run added by a backfill (`leasebeat backfill`): the backfill's id. Its tick is one of the past
   * the ledger had no run of; the run's id is the tick's own (`<job>@<tick-ms>`).
   */
  backfill?: string;
  /** For a run of a runtime schedule (the BullMQ job name is the schedule's id): its job type. */
  type?: string;
  /** The W3C trace context of its enqueue, when the application traces (OpenTelemetry): its run continues the trace. */
  trace?: Record<string, string>;
  /**
   * The content hash (`sha256:<16 hex>`) of the definition that decided the run: which version of a job
   * file or a schedule's spec it ran by. Absent on runs enqueued before leasebeat stamped it.
   */
  definition?: string;
}

/** What a handler gets besides the BullMQ job. */
export interface HandlerContext<TData = unknown> {
  /** The definition's `data` (also at `job.data.data`). */
  data: TData;
  /** The nominal tick this run belongs to (before jitter, however late the run starts). */
  tick: Date;
  /**
   * The run's id, `<job>@<tick-ms>` (`<job>@manual-<uuid>` for a trigger; a flow child's own id): the same
   * on every attempt and every re-run of this run, and no other run's. Use it as the idempotency key of
   * side effects that must happen once: the one case in which a run starts twice is a runner lost mid-run
   * (BullMQ's at-least-once), and the second start carries the same id.
   */
  runId: string;
  /**
   * The fencing token of the term that enqueued the run. It tells which leadership term decided the run,
   * not which attempt is current: every attempt and re-run of a run carries the same token, and tokens of
   * different lease generations are not ordered. Fence side effects with `runId`, not with this.
   */
  token: FenceToken;
  /** Aborted when the instance shuts down or the run should stop. */
  signal: AbortSignal;
  /** A logger bound to this job and tick. */
  log: Logger;
  /** True when the run was triggered by hand ("run now") rather than by the schedule. */
  manual: boolean;
  /** True when a backfill (`leasebeat backfill`) added the run: its tick is in the past (see TickRunData.backfill). */
  backfill: boolean;
}

/** Runs one tick. `job.data` is a {@link TickRunData}; what it returns becomes the BullMQ job's result. */
export type JobHandler<TData = unknown> = (job: Job<TickRunData<TData>>, ctx: HandlerContext<TData>) => unknown;

type WithOptionalQueue<T> = Omit<T, 'queueName' | 'children'> & {
  /** Defaults to the job's own queue. */
  queueName?: string;
};

/** A child of a tick's flow: BullMQ's flow node with `queueName` optional. */
export type TickFlowChild = WithOptionalQueue<FlowJobNode> & { children?: TickFlowChild[] };

/** The flow one tick starts: BullMQ's `FlowJob` (a parent and its children) with `queueName` optional. */
export type TickFlow = WithOptionalQueue<FlowJob> & { children?: TickFlowChild[] };

export interface FlowContext<TData = unknown> {
  tick: Date;
  data: TData;
}

/** Builds the flow for one tick. With a flow and no handler, the parent completes once its children have. */
export type FlowBuilder<TData = unknown> = (ctx: FlowContext<TData>) => TickFlow | Promise<TickFlow>;

/** What happens to a tick while the previous run of the same job is still waiting or active. */
export type OverlapPolicy = 'allow' | 'skip' | 'bufferOne' | 'bufferAll' | 'cancelOther' | 'terminateOther';

/**
 * The policies that hold ticks back, claimed as buffered, until the run before them has finished
 * (`cancelOther`: until the run it cancelled has stopped).
 */
export const BUFFERING_POLICIES: ReadonlySet<OverlapPolicy> = new Set(['bufferOne', 'bufferAll', 'cancelOther']);

/** Which missed ticks run after a period without a leader. */
export type CatchupMode = 'latest' | 'all' | 'none';

/** How long finished runs are kept: BullMQ's `removeOnComplete` / `removeOnFail`. */
export type JobRetention = boolean | number | { age: number; count?: number } | { count: number };

export type BackoffSetting = number | { type: 'fixed' | 'exponential'; delay: number };

interface JobDefinitionFields<TData> {
  /** Unique; becomes part of BullMQ job ids and Redis keys, so letters, digits, `.`, `_` and `-` only. */
  name: string;
  /** IANA time zone the cron schedule is read in; default `UTC`. */
  timezone?: string;
  /** JSON-serialisable data passed to every run. */
  data?: TData;
  /** Queue the runs go to; default `'leasebeat'`. */
  queue?: string;
  /** Runs of this job at once per instance; default 1. */
  concurrency?: number;
  /**
   * How long a run may take (at least 1 s): at the deadline its `ctx.signal` aborts, and the run fails with
   * a RunTimeoutError (retried per `attempts`) once its handler stops; if it has not stopped when
   * `timeoutGrace` ends, the run fails for good (RunTimeoutFinalError) and the handler is let go. No
   * deadline by default.
   */
  timeout?: Duration;
  /**
   * How long a run whose deadline passed (or that a newer tick cancelled) may take to stop; default 10 s.
   * Its worker holds the run until then, so no retry of it starts while its handler runs.
   */
  timeoutGrace?: Duration;
  /** Pauses the job (at run time, with a note saying why) after this many of its runs in a row failed for good. */
  pauseOnFailure?: number;
  /** A run that starts later than this after its tick counts as late (`leasebeat_runs_late_total`). */
  lateAfter?: Duration;
  attempts?: number;
  backoff?: BackoffSetting;
  removeOnComplete?: JobRetention;
  removeOnFail?: JobRetention;
  priority?: number;
  /** Default `'allow'`. */
  overlap?: OverlapPolicy;
  /** With overlap `bufferAll`: how many ticks may wait at once; default 10. Ticks beyond it are skipped (`overlap`). */
  bufferMax?: number;
  /** Ticks missed while no leader enqueued; defaults `{ window: '5m', mode: 'latest', max: 10 }`. */
  catchup?: { window?: Duration; mode?: CatchupMode; max?: number };
  /** Deterministic per tick, and never as long as the gap to the next tick. */
  jitter?: Duration;
  paused?: boolean;
  startAt?: Date | string;
  endAt?: Date | string;
}

type Timing =
  | { /** Cron: 5 fields, or 6 with seconds first. */ schedule: string; every?: never }
  | { /** An interval, aligned to the Unix epoch (or to `startAt`). */ every: Duration; schedule?: never }
  | {
      /**
       * Neither: a job type. It never ticks by itself; runtime schedules (`scheduler.schedules.upsert`)
       * name it as their `job`, and it can be triggered by hand.
       */
      schedule?: never;
      every?: never;
    };

type Work<TData> =
  | { handler: JobHandler<TData>; flow?: FlowBuilder<TData> }
  | { handler?: JobHandler<TData>; flow: FlowBuilder<TData> };

/** A job definition as written in a `jobs/` file: a schedule, an interval or neither (a job type), and a handler or a flow. */
export type JobDefinition<TData = unknown> = JobDefinitionFields<TData> & Timing & Work<TData>;

/** Declares a job; a file in `jobs/` default-exports the result. Returns its argument, typed. */
export function defineJob<TData = unknown>(definition: JobDefinition<TData>): JobDefinition<TData> {
  return definition;
}

/**
 * When a job ticks: a cron expression read in the job's timezone, a fixed interval, once at an instant
 * (a runtime schedule's `at`), or never by itself (`none`: a job type, run by schedules and by hand).
 */
export type Trigger =
  | { kind: 'cron'; expression: string }
  | { kind: 'every'; everyMs: number }
  | { kind: 'once'; at: number }
  | { kind: 'none' };

/** A job's trigger as status reports show it: `0 3 * * *`, `every 10m`, `at 2027-01-01T00:00:00.000Z` or `job type`. */
export function describeTrigger(job: Pick<ScheduledJob, 'trigger'>): string {
  const { trigger } = job;
  switch (trigger.kind) {
    case 'cron':
      return trigger.expression;
    case 'every':
      return `every ${formatDuration(trigger.everyMs)}`;
    case 'once':
      return `at ${new Date(trigger.at).toISOString()}`;
    case 'none':
      return 'job type';
  }
}

/** True for a definition that ticks by itself (a file job with a schedule, or a runtime schedule). */
export function isScheduled(job: Pick<ScheduledJob, 'trigger'>): boolean {
  return job.trigger.kind !== 'none';
}

/** The BullMQ options a definition may set, in BullMQ's own shapes. */
export type ScheduledJobOptions = Pick<JobsOptions, 'attempts' | 'backoff' | 'removeOnComplete' | 'removeOnFail' | 'priority'>;

/** A validated job definition with defaults applied and durations in milliseconds. */
export interface ScheduledJob<TData = unknown> {
  readonly name: string;
  /** Absolute path of the file it came from. */
  readonly file: string;
  readonly trigger: Trigger;
  readonly timezone: string;
  readonly data: TData | undefined;
  readonly handler: JobHandler<TData> | undefined;
  readonly flow: FlowBuilder<TData> | undefined;
  readonly queue: string;
  readonly concurrency: number;
  /** How long a run may take; undefined when it has no deadline. */
  readonly timeoutMs: number | undefined;
  /** How long a run past its deadline may take to stop before it is failed anyway. */
  readonly timeoutGraceMs: number;
  /** Failed runs in a row after which the job is paused; undefined: never. */
  readonly pauseOnFailure: number | undefined;
  /** A run starting later than this after its tick is late; undefined: none is counted. */
  readonly lateAfterMs: number | undefined;
  readonly jobOptions: ScheduledJobOptions;
  readonly overlap: OverlapPolicy;
  /** How many ticks may wait behind an unfinished run: the definition's `bufferMax` for `bufferAll`, 1 for `bufferOne` and `cancelOther`, else 0. */
  readonly bufferMax: number;
  readonly catchup: { readonly windowMs: number; readonly mode: CatchupMode; readonly max: number };
  /** 0 when the job has no jitter. */
  readonly maxJitterMs: number;
  readonly paused: boolean;
  /** Epoch ms of the first allowed tick, inclusive. */
  readonly startAt: number | undefined;
  /** Epoch ms of the last allowed tick, inclusive. */
  readonly endAt: number | undefined;
  /**
   * For a runtime schedule: the job type (a `jobs/` definition) whose handler or flow runs its ticks;
   * `name` is then the schedule's id. Undefined for a file job.
   */
  readonly type?: string;
  /**
   * For a runtime schedule: when it was created (Redis time, ms; the first write, or the first after a
   * removal). Its ticks at or before then are not owed, so a re-created schedule does not catch up the
   * ticks of the time it did not exist. An edit keeps it: ticks owed before the edit stay owed.
   */
  readonly owedAfter?: number;
  /**
   * For a runtime schedule: when its current version was written (Redis time, ms). A lane that takes up
   * the new version walks its ticks from there on: a tick of it before the write was owed by no version.
   */
  readonly definedAt?: number;
  /**
   * For a runtime schedule: its stored version as `<version>|<updatedAt>`, which names one write across
   * removals and re-creates. Workers start a staged run of the schedule only while a leader has approved
   * the version stored (see stagedRunMayStart.lua).
   */
  readonly revision?: string;
}
