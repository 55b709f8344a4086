import type { Queue } from 'bullmq';
import type { Admin } from '../admin/admin.js';
import type { DisruptionState } from '../members/health.js';
import type { MemberStatus } from '../members/status.js';
import type { HistorySnapshot } from './history.js';
import type { KnownLabels } from './metrics.js';

/** One readiness check, as `/readyz` lists it. */
export interface ReadinessCheck {
  name: string;
  ok: boolean;
  detail?: string;
  /**
   * False for a check of something outside this instance that every instance shares (Redis): reported on
   * `/readyz` and the status page, but it never makes the instance unready. Default true.
   */
  required?: boolean;
}

/**
 * What the HTTP side needs from a running instance. The scheduler implements it; the server only reads.
 * Every method is called per request, so answers may change between calls (hot-reloaded jobs, new queues).
 */
export interface InstanceSource {
  identity: string;
  /** Liveness: the elector's `check(toleranceMs)` — an Error only for a leader that stopped renewing. */
  liveness(): Error | undefined;
  /**
   * Readiness checks: jobs loaded, elector and workers running, not shutting down; Redis reachable as a
   * check that is not `required`. Never "is leader": PodDisruptionBudgets count Ready pods, so followers
   * must be Ready too. Implementations should bound their own latency.
   */
  readiness(): Promise<ReadinessCheck[]>;
  status(): Promise<StatusSnapshot>;
  /** Every BullMQ Queue leasebeat uses (for Bull Board and queue metrics). */
  queues(): Queue[];
  /**
   * The label values this instance knows (election name, loaded job names), declared at 0 before each
   * scrape so every labelled counter exists before its first event. Optional for older sources.
   */
  metricLabels?(): KnownLabels;
  /**
   * Recent ticks per job and the leadership terms, for the status page's strips, lag charts and
   * timeline (`HistoryReader.read`). Optional: without it the page shows the tables only.
   */
  history?(): Promise<HistorySnapshot>;
  /**
   * The cluster's admin API (the CLI's): served under `/api` (cluster, members, runs, trigger, pause,
   * resume, cordon, uncordon, drain) when present. `Scheduler.admin` is one.
   */
  readonly admin?: Admin;
}

/** The leadership term as the status API shows it; times are RFC 3339. */
export interface StatusTerm {
  generation: string;
  leaderTransitions: number;
  acquireTime: string;
}

/** One cron-defined job as the status API shows it. Times are RFC 3339. */
export interface JobStatus {
  name: string;
  file: string;
  queue: string;
  schedule: string;
  timezone: string;
  paused: boolean;
  /** Why it was paused at run time (`leasebeat pause --note`); null without one. Optional for older sources. */
  pauseNote?: string | null;
  nextRuns: string[];
  lastTick: string | null;
  lastJobId: string | null;
  enqueued: number;
  /** Skipped ticks by reason (for example `paused`, `overlap`, `missed`). */
  skipped: Record<string, number>;
  fenced: number;
}

/** The JSON document of `/api/status`, also rendered by the status page. */
export interface StatusSnapshot {
  instance: { identity: string; role: 'leader' | 'follower'; startedAt: string; version: string };
  cluster: {
    lock: string;
    /** Identity of the current holder; `""` when nobody holds the lease. */
    leader: string;
    term: StatusTerm | null;
    /** Every registered instance with its condition as the leader judges it; the leader first. */
    members: MemberStatus[];
    /**
     * Normal, PartialDisruption or FullDisruption, from the leader's latest judgement; `null` while no leader
     * publishes one. Optional only for sources older than member health.
     */
    disruption?: DisruptionState | null;
  };
  jobs: JobStatus[];
  loadErrors: Array<{ file: string; message: string }>;
}
