import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { LeaderElectionMetrics } from '../election/config.js';
import { CONDITIONS, type DisruptionState } from '../members/health.js';
import type { MemberMetrics } from '../members/monitor.js';

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

/** Buckets of `leasebeat_schedule_lag_seconds`: 1 ms to 60 s. */
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
  queueMetricsErrors: Counter<'queue'>;
  members: Gauge<'condition'>;
  disruptionState: Gauge;
}

/** A private Prometheus registry with leasebeat's instruments and the adapters that feed them. */
export interface LeasebeatMetrics {
  registry: Registry;
  instruments: LeasebeatInstruments;
  /** Pass to `LeaderElectionConfig.metrics`. */
  electionMetrics: LeaderElectionMetrics;
  /** Pass to the producer. */
  producerMetrics: ProducerMetricsHooks;
  /** Pass to the member health monitor (`SchedulerOptions.metrics.members`). */
  memberMetrics: MemberMetrics;
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
      help: 'Enqueue time minus the nominal tick time',
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
  };
  // Only the leader judges members: the others export no sample rather than a misleading 0 (Normal).
  instruments.disruptionState.remove();

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
      // An early enqueue (clock skew between instances) is no lag at all.
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

  return { registry, instruments, electionMetrics, producerMetrics, memberMetrics };
}
