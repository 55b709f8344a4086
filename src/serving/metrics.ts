import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { LeaderElectionMetrics } from '../election/config.js';
import { CONDITIONS, type DisruptionState } from '../members/health.js';
import type { MemberMetrics } from '../members/monitor.js';
import type { SkipReason } from '../scheduling/plan.js';
import type { ScheduleMetrics } from '../schedules/feed.js';
import type { RunOutcome } from '../workers/worker-pool.js';

/**
 * The producer's metric hooks. Structurally the same as the queueing producer's `ProducerMetrics`, so
 * `producerMetrics` can be handed to it as is.
 */
export interface ProducerMetricsHooks {
  /** A tick was enqueued `lagSeconds` after its nominal time. */
  enqueued(job: string, lagSeconds: number): void;
  /** `count` ticks of `job` were deliberately not enqueued, for `reason`. */
  skipped(job: string, reason: string, count: number): void;
  /** `count` enqueue attempts were refused because this instance's term was no longer current. */
  fenced(count: number): void;
}

/**
 * The workers' metric hooks. Structurally the same as the worker pool's `WorkerMetrics`, so
 * `workerMetrics` can be handed to it as is.
 */
export interface WorkerMetricsHooks {
  /**
   * A handler started; `run` is the run's tick (a manual run's: its request) and when BullMQ moved it to
   * active (`processedOn`), both epoch ms, for `leasebeat_run_start_lag_seconds`.
   */
  started(job: string, kind: RunStartKind, run?: { tick: number; startedAt: number }): void;
  notRunAgain(job: string, reason: NotRunAgainReason): void;
  finishUnrecorded(job: string): void;
  finished(job: string, outcome: RunOutcome, run: { durationSeconds: number; endedAt: number }): void;
  late(job: string): void;
  letGo(job: string): void;
  letGoStopped(job: string): void;
}

export const RUN_OUTCOMES: RunOutcome[] = ['completed', 'failed', 'timed-out', 'retried', 'stopped'];
/** Buckets of `leasebeat_run_duration_seconds`: 10 ms to an hour. */
export const RUN_DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600];

/** Why a handler started (`leasebeat_run_starts_total{kind}`): `runner-lost` is BullMQ's at-least-once re-run. */
export type RunStartKind = 'first' | 'retry' | 'operator-retry' | 'runner-lost' | 'continued';
export const RUN_START_KINDS: RunStartKind[] = ['first', 'retry', 'operator-retry', 'runner-lost', 'continued'];
/** Why a finished run that came back was not run again (`leasebeat_runs_not_run_again_total{reason}`). */
export type NotRunAgainReason = 'finish-lost' | 'completed-retry-refused';
export const NOT_RUN_AGAIN_REASONS: NotRunAgainReason[] = ['finish-lost', 'completed-retry-refused'];

/** Buckets of `leasebeat_schedule_lag_seconds` and `leasebeat_run_start_lag_seconds`: 1 ms to 60 s. */
export const SCHEDULE_LAG_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** The instruments leasebeat exports, besides Node's default process metrics. */
export interface LeasebeatInstruments {
  masterStatus: Gauge<'name'>;
  slowpath: Counter<'name'>;
  renewFailures: Counter<'name'>;
  leaderTransitions: Counter;
  ticksEnqueued: Counter<'job'>;
  ticksSkipped: Counter<'job' | 'reason'>;
  enqueueFenced: Counter;
  scheduleLag: Histogram;
  runStartLag: Histogram;
  scheduleApplyLag: Histogram;
  queueMetricsErrors: Counter<'queue'>;
  members: Gauge<'condition'>;
  disruptionState: Gauge;
  runStarts: Counter<'job' | 'kind'>;
  runsNotRunAgain: Counter<'job' | 'reason'>;
  finishUnrecorded: Counter<'job'>;
  runsFinished: Counter<'job' | 'outcome'>;
  runDuration: Histogram<'job'>;
  lastSuccess: Gauge<'job'>;
  lastFailure: Gauge<'job'>;
  runsLate: Counter<'job'>;
  handlersLetGo: Gauge<'job'>;
}

/** Every reason a tick is skipped for; `satisfies` makes adding a reason to `SkipReason` fail here until listed. */
const SKIP_REASON_SET = {
  'missed-window': true, 'catchup-limit': true, paused: true, overlap: true, 'no-handler': true, rescheduled: true, removed: true,
} satisfies Record<SkipReason, true>;
export const SKIP_REASONS = Object.keys(SKIP_REASON_SET) as SkipReason[];

/** Label values known ahead of their first event, so their series exist (at 0) from the first scrape. */
export interface KnownLabels {
  /** The election's name (`leader_election_*{name}`). */
  election?: string;
  /** Loaded job names (`leasebeat_ticks_*{job}`, with every skip reason). */
  jobs?: Iterable<string>;
  /** Queue names (`leasebeat_queue_metrics_errors_total{queue}`). */
  queues?: Iterable<string>;
}

/** A private Prometheus registry with leasebeat's instruments and the adapters that feed them. */
export interface LeasebeatMetrics {
  registry: Registry;
  instruments: LeasebeatInstruments;
  /**
   * Creates the series of these label values at 0 (idempotent; existing counts are kept). A counter that
   * only appears at its first increment breaks `rate()` and `increase()` over that increment and hides
   * "never happened" from alerts, so every labelled counter is declared as soon as its labels are known.
   */
  declare: (labels: KnownLabels) => void;
  /** Pass to `LeaderElectionConfig.metrics`. */
  electionMetrics: LeaderElectionMetrics;
  /** Pass to the producer. */
  producerMetrics: ProducerMetricsHooks;
  /** Pass to the member health monitor (`SchedulerOptions.metrics.members`). */
  memberMetrics: MemberMetrics;
  /** Pass to the workers (`SchedulerOptions.metrics.workers`). */
  workerMetrics: WorkerMetricsHooks;
  /** Pass to `SchedulerOptions.metrics.schedules`. */
  scheduleMetrics: ScheduleMetrics;
}

/** The value of `leasebeat_disruption_state` for each state. */
export const DISRUPTION_STATE_VALUES: Record<DisruptionState, number> = { Normal: 0, PartialDisruption: 1, FullDisruption: 2 };

/** Counters only go up; a hook called with a bad count must not throw into the scheduler. */
function isPositiveCount(count: number): boolean {
  return Number.isFinite(count) && count > 0;
}

/** Creates a fresh registry (never prom-client's global one, so several instances can share a process). */
export function createMetrics(): LeasebeatMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];

  const instruments: LeasebeatInstruments = {
    masterStatus: new Gauge({
      name: 'leader_election_master_status',
      help: 'Whether this instance leads the named election: 1 leading, 0 not',
      labelNames: ['name'] as const,
      registers,
    }),
    slowpath: new Counter({
      name: 'leader_election_slowpath_total',
      help: "Leader renewals that read the lock before updating it (client-go's slow path)",
      labelNames: ['name'] as const,
      registers,
    }),
    renewFailures: new Counter({
      name: 'leasebeat_lease_renew_failures_total',
      help: 'Failed attempts of the leader to renew its lease',
      labelNames: ['name'] as const,
      registers,
    }),
    leaderTransitions: new Counter({
      name: 'leasebeat_leader_transitions_total',
      help: 'Times this instance became leader',
      registers,
    }),
    ticksEnqueued: new Counter({
      name: 'leasebeat_ticks_enqueued_total',
      help: 'Cron ticks enqueued into BullMQ by this instance while leading',
      labelNames: ['job'] as const,
      registers,
    }),
    ticksSkipped: new Counter({
      name: 'leasebeat_ticks_skipped_total',
      help: 'Cron ticks deliberately not enqueued, by reason',
      labelNames: ['job', 'reason'] as const,
      registers,
    }),
    enqueueFenced: new Counter({
      name: 'leasebeat_enqueue_fenced_total',
      help: 'Enqueue attempts refused because the leadership term was no longer current',
      registers,
    }),
    scheduleLag: new Histogram({
      name: 'leasebeat_schedule_lag_seconds',
      help: 'Enqueue time minus the nominal tick time; 0 for a run added ahead of its tick (staged): its lateness is leasebeat_run_start_lag_seconds',
      buckets: SCHEDULE_LAG_BUCKETS,
      registers,
    }),
    runStartLag: new Histogram({
      name: 'leasebeat_run_start_lag_seconds',
      help: "Run start (BullMQ's processedOn) minus its nominal tick (a manual run: minus its request), at each run's first start, observed by the instance that starts it",
      buckets: SCHEDULE_LAG_BUCKETS,
      registers,
    }),
    scheduleApplyLag: new Histogram({
      name: 'leasebeat_schedule_apply_lag_seconds',
      help: 'From the write of a runtime schedule (Redis time) until this instance runs by it (by the local clock)',
      buckets: SCHEDULE_LAG_BUCKETS,
      registers,
    }),
    queueMetricsErrors: new Counter({
      name: 'leasebeat_queue_metrics_errors_total',
      help: "Scrapes that could not include a queue's BullMQ metrics",
      labelNames: ['queue'] as const,
      registers,
    }),
    members: new Gauge({
      name: 'leasebeat_members',
      help: 'Members by condition (Ready, NotReady, Unknown) as this instance judges them; exported by the leader only',
      labelNames: ['condition'] as const,
      registers,
    }),
    disruptionState: new Gauge({
      name: 'leasebeat_disruption_state',
      help: 'Disruption state of the members: 0 Normal, 1 PartialDisruption, 2 FullDisruption; exported by the leader only',
      registers,
    }),
    runStarts: new Counter({
      name: 'leasebeat_run_starts_total',
      help: 'Handler starts on this instance, by why: first, retry (BullMQ retries a failed attempt), operator-retry (a failed run retried by hand), runner-lost (the last start never finished: its process died or lost its lock; BullMQ runs a run at least once), continued (the handler moved its job and it came back)',
      labelNames: ['job', 'kind'] as const,
      registers,
    }),
    runsNotRunAgain: new Counter({
      name: 'leasebeat_runs_not_run_again_total',
      help: 'Finished runs that came back and had their finish recorded again instead of running: finish-lost (a Redis failover lost the record of the finish), completed-retry-refused (a completed run put back by hand)',
      labelNames: ['job', 'reason'] as const,
      registers,
    }),
    finishUnrecorded: new Counter({
      name: 'leasebeat_run_finish_unrecorded_total',
      help: 'Runs whose finish could not be recorded before their lock was lost or the instance stopped: a failover or stalled-job recovery may run them again',
      labelNames: ['job'] as const,
      registers,
    }),
    runsFinished: new Counter({
      name: 'leasebeat_runs_finished_total',
      help:
        'Handlers that ended on this instance, by outcome: completed, failed (for good), timed-out (failed for good by its timeout), ' +
        'retried (a failed attempt BullMQ runs again) or stopped (by a newer tick: overlap cancelOther, terminateOther)',
      labelNames: ['job', 'outcome'] as const,
      registers,
    }),
    runDuration: new Histogram({
      name: 'leasebeat_run_duration_seconds',
      help: 'How long a handler ran on this instance, from its start to its end (any outcome)',
      labelNames: ['job'] as const,
      buckets: RUN_DURATION_BUCKETS,
      registers,
    }),
    lastSuccess: new Gauge({
      name: 'leasebeat_run_last_success_timestamp_seconds',
      help: 'When a run of the job last completed on this instance (Unix time); max by (job) over instances is the newest',
      labelNames: ['job'] as const,
      registers,
    }),
    lastFailure: new Gauge({
      name: 'leasebeat_run_last_failure_timestamp_seconds',
      help: 'When a run of the job last failed for good on this instance (Unix time)',
      labelNames: ['job'] as const,
      registers,
    }),
    runsLate: new Counter({
      name: 'leasebeat_runs_late_total',
      help: "Runs whose first start came later after their tick than the job's lateAfter",
      labelNames: ['job'] as const,
      registers,
    }),
    handlersLetGo: new Gauge({
      name: 'leasebeat_handlers_let_go',
      help: 'Handlers still running on this instance after their run ended without them: past timeoutGrace after a timeout or a cancelOther, or terminated (terminateOther). Each may run beside its job\'s next run',
      labelNames: ['job'] as const,
      registers,
    }),
  };
  // Only the leader judges members: the others export no sample rather than a misleading 0 (Normal).
  instruments.disruptionState.remove();

  const declare = (labels: KnownLabels): void => {
    if (labels.election !== undefined) {
      const name = labels.election;
      // A gauge has a value from the start (not leading), the counters start at 0; inc(0) keeps any count.
      instruments.masterStatus.inc({ name }, 0);
      instruments.slowpath.inc({ name }, 0);
      instruments.renewFailures.inc({ name }, 0);
    }
    for (const job of labels.jobs ?? []) {
      instruments.ticksEnqueued.inc({ job }, 0);
      for (const reason of SKIP_REASONS) instruments.ticksSkipped.inc({ job, reason }, 0);
      for (const kind of RUN_START_KINDS) instruments.runStarts.inc({ job, kind }, 0);
      for (const reason of NOT_RUN_AGAIN_REASONS) instruments.runsNotRunAgain.inc({ job, reason }, 0);
      instruments.finishUnrecorded.inc({ job }, 0);
      for (const outcome of RUN_OUTCOMES) instruments.runsFinished.inc({ job, outcome }, 0);
      instruments.runsLate.inc({ job }, 0);
      instruments.handlersLetGo.inc({ job }, 0);
    }
    for (const queue of labels.queues ?? []) instruments.queueMetricsErrors.inc({ queue }, 0);
  };

  const electionMetrics: LeaderElectionMetrics = {
    leaderOn: (name) => {
      instruments.masterStatus.set({ name }, 1);
      instruments.leaderTransitions.inc();
    },
    leaderOff: (name) => instruments.masterStatus.set({ name }, 0),
    slowpathExercised: (name) => instruments.slowpath.inc({ name }),
    renewFailed: (name) => instruments.renewFailures.inc({ name }),
  };

  const producerMetrics: ProducerMetricsHooks = {
    enqueued: (job, lagSeconds) => {
      instruments.ticksEnqueued.inc({ job });
      // An early enqueue (a run staged ahead of its tick, or clock skew) is no lag at all: a staged run's
      // lateness is its start's, which the workers observe.
      if (Number.isFinite(lagSeconds)) instruments.scheduleLag.observe(Math.max(0, lagSeconds));
    },
    skipped: (job, reason, count) => {
      if (isPositiveCount(count)) instruments.ticksSkipped.inc({ job, reason }, count);
    },
    fenced: (count) => {
      if (isPositiveCount(count)) instruments.enqueueFenced.inc(count);
    },
  };

  const memberMetrics: MemberMetrics = {
    observed: (counts, disruption) => {
      for (const condition of CONDITIONS) instruments.members.set({ condition }, counts[condition]);
      instruments.disruptionState.set(DISRUPTION_STATE_VALUES[disruption]);
    },
    cleared: () => {
      instruments.members.reset();
      instruments.disruptionState.remove();
    },
  };

  const workerMetrics: WorkerMetricsHooks = {
    started: (job, kind, run) => {
      instruments.runStarts.inc({ job, kind });
      // The first start only: a retry starts when its backoff says, which is no lateness. An early start
      // (a worker's clock ahead of the tick) stays negative, so that it shows in the sum.
      if (kind === 'first' && run && Number.isFinite(run.startedAt - run.tick)) instruments.runStartLag.observe((run.startedAt - run.tick) / 1000);
    },
    notRunAgain: (job, reason) => instruments.runsNotRunAgain.inc({ job, reason }),
    finishUnrecorded: (job) => instruments.finishUnrecorded.inc({ job }),
    finished: (job, outcome, run) => {
      instruments.runsFinished.inc({ job, outcome });
      if (Number.isFinite(run.durationSeconds)) instruments.runDuration.observe({ job }, Math.max(0, run.durationSeconds));
      if (outcome === 'completed') instruments.lastSuccess.set({ job }, run.endedAt / 1000);
      // A timeout is the job's failure (its work was not done); a stop by a newer tick is its policy at work.
      if (outcome === 'failed' || outcome === 'timed-out') instruments.lastFailure.set({ job }, run.endedAt / 1000);
    },
    late: (job) => instruments.runsLate.inc({ job }),
    letGo: (job) => instruments.handlersLetGo.inc({ job }),
    letGoStopped: (job) => instruments.handlersLetGo.dec({ job }),
  };

  const scheduleMetrics: ScheduleMetrics = {
    // A clock behind Redis' would make a fresh write look older than its own future: no negative lag.
    applied: (lagSeconds) => Number.isFinite(lagSeconds) && instruments.scheduleApplyLag.observe(Math.max(0, lagSeconds)),
  };

  return { registry, instruments, declare, electionMetrics, producerMetrics, memberMetrics, workerMetrics, scheduleMetrics };
}
