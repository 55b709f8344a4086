import type { Logger } from 'pino';
import type { RunStopHow } from '../ledger/run-stops.js';
import type { FencingToken, TakeOverState, TickLedger } from '../ledger/tick-ledger.js';
import type { ScheduledJob } from '../scheduling/define-job.js';
import type { RunState } from '../scheduling/plan.js';
import type { Clock } from '../util/clock.js';
import type { DueTimer } from './due-timer.js';
import type { FencedEnqueue } from './fenced-enqueue.js';
import type { RunTakeBack } from './staging.js';
import type { ReplacedSchedule } from './runtime-schedules.js';

/** What the producer reports as it goes (the scheduler's Prometheus counters). */
export interface ProducerMetrics {
  enqueued(job: string, lagSeconds: number): void;
  skipped(job: string, reason: string, count: number): void;
  fenced(count: number): void;
}

/**
 * The metric hooks with a runtime schedule's ticks counted under its job type (`labelOf` maps a job name
 * to its label): one series per job type, not per schedule. File jobs keep their own name.
 */
export function producerMetricsByType(hooks: ProducerMetrics, labelOf: (job: string) => string): ProducerMetrics {
  return {
    enqueued: (job, lagSeconds) => hooks.enqueued(labelOf(job), lagSeconds),
    skipped: (job, reason, count) => hooks.skipped(labelOf(job), reason, count),
    fenced: (count) => hooks.fenced(count),
  };
}

/** What the takeover of a job reads, and when: the instant (authoritative time) its answers describe. */
export interface TakeoverRead extends TakeOverState {
  readAt: number;
}

/** What a lane needs from the leadership term it runs in. */
export interface LaneTerm {
  readonly token: FencingToken;
  /** Aborts when the term ends. */
  readonly signal: AbortSignal;
  readonly log: Logger;
  readonly ledger: TickLedger;
  readonly clock: Clock;
  /** The term's one timer: every lane sleeps on it. */
  readonly timer: DueTimer;
  /** The term's fenced claim, add and confirm, batched with the other lanes' calls of the same turn. */
  readonly enqueue: FencedEnqueue;
  /**
   * How long before its due time a tick of a job that may be staged is claimed and added to BullMQ as a
   * delayed job, so that at the tick only BullMQ's promotion remains; 0 stages nothing.
   */
  readonly stageAheadMs: number;
  /**
   * When the term raised the fence (authoritative time): from then on workers hold the runs earlier terms
   * staged until this term has reviewed their job (stagedRunMayStart.lua).
   */
  readonly fencedAt: number;
  /** Takes back staged runs that a pause, a removal or a new schedule no longer wants. */
  readonly takeBack: RunTakeBack;
  readonly metrics: ProducerMetrics | undefined;
  /** The authoritative time (Redis-corrected), in whole ms. */
  now(): number;
  /** The job's current definition; undefined once it was removed. */
  job(name: string): ScheduledJob | undefined;
  /** The local self-fence, checked right before every claim and every BullMQ add. */
  leading(): boolean;
  /** Waits until the self-fence allows writes again; false if the term ended first. */
  waitLeading(): Promise<boolean>;
  /**
   * The versions of runtime schedule `name` that writes replaced or removed, oldest first, while their
   * ticks may lack a record (none for a file job, or once accounted for).
   */
  replacedVersions(name: string): Promise<ReplacedSchedule[]>;
  /** The ticks of the versions replaced or removed by writes up to `endedAt` are recorded: they may be forgotten. */
  forgetReplaced(name: string, endedAt: number): Promise<void>;
  /** What the takeover of a job reads (batched with the other lanes' takeovers). */
  takeOverState(job: string): Promise<TakeoverRead>;
  /**
   * Records that this term applied its rules to the runs earlier terms staged for the job, so that
   * workers may start them (batched with the other lanes'); for a runtime schedule, that its lane
   * decided them by `revision`, which it approves if still stored. False when fenced.
   */
  markReviewed(job: string, revision?: string): Promise<boolean>;
  /**
   * For a job removed during this term: takes back the runs its ledger says it may have left in BullMQ
   * (see takeBackRemovedJob); `queue` is its last definition's, when known. True once done; false when the
   * term cannot write; throws to be retried.
   */
  takeBackRemoved(job: string, queue: string | undefined): Promise<boolean>;
  /** The state of the job's newest run (a claimed run not yet in BullMQ counts as waiting). */
  previousRun(job: ScheduledJob): Promise<RunState>;
  /**
   * Asks the job's newest run to stop, wherever it runs, because tick `byTick` came due (overlap
   * `cancelOther`: `cancel`, `terminateOther`: `terminate`). False when fenced.
   */
  stopPreviousRun(job: ScheduledJob, how: RunStopHow, byTick: number): Promise<boolean>;
  /** A Redis round trip succeeded (feeds the unreachability check). */
  reached(): void;
  /** The fence is past this term: ends it. */
  fenced(): void;
}
