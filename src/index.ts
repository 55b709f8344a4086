/**
 * leasebeat: a leader-gated cron scheduler for BullMQ. Instances on one Redis elect a leader; only the
 * leader enqueues the jobs of a folder, fenced by its term, and every instance processes them.
 *
 * ### Usage
 *
 * ```ts
 * import { createScheduler } from 'leasebeat';
 *
 * const scheduler = createScheduler({
 *   connection: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', // or your ioredis client (not closed)
 *   jobsDir: new URL('./jobs', import.meta.url).pathname,            // files that export defineJob({...})
 * });
 * await scheduler.start(); // loads the jobs, starts the workers, campaigns for the lease
 * process.once('SIGTERM', () => void scheduler.stop()); // stops enqueuing, releases the lease, drains
 * ```
 *
 * A job file imports `defineJob` from the light entry point `leasebeat/job`. Also exported here: the admin
 * API that the CLI and the HTTP `/api` run on (`createAdmin`), the HTTP server (`startHttpServer`), and the
 * elector with its two locks for use on its own (docs/library.md). What only the `leasebeat` command needs
 * besides (the settings schema, the jobs loader of `validate`, the logger) is in `leasebeat/cli-support`.
 *
 * @module
 */

// The scheduler.
export { createScheduler, type Scheduler, type SchedulerOptions, type LeadershipView } from './scheduler.js';
export type { MemberSettings } from './members/settings.js';
export type { MemberStore, CordonRequest } from './members/store.js';

// Jobs.
export {
  defineJob,
  describeTrigger,
  type Trigger,
  type JobDefinition,
  type HandlerContext,
  type TickRunData,
  type TickFlow,
  type TickFlowChild,
  type ScheduledJob,
  type OverlapPolicy,
  type CatchupMode,
  type FenceToken,
} from './scheduling/define-job.js';
export type { Duration } from './scheduling/duration.js';
export { RunCancelledError, RunTerminatedError, RunTimeoutError, RunTimeoutFinalError } from './workers/run-deadline.js';

// Operating a cluster.
export {
  createAdmin,
  AdminError,
  type Admin,
  type AdminErrorCode,
  type AdminOptions,
  type AdminJobStatus,
  type JobDescription,
  type ClusterStatus,
  type RecentRun,
  type TriggerResult,
  type DrainOptions,
  formatJobLine,
  formatRuns,
  formatDescription,
} from './admin/admin.js';
export type { AuditEntry, AuditAction } from './admin/audit-log.js';
export {
  BackfillError,
  BACKFILL_OVERLAPS,
  BACKFILL_TICK_LIMIT,
  DEFAULT_BACKFILL_RATE,
  MAX_BACKFILL_RATE,
  formatBackfill,
  type BackfillOptions,
  type BackfillOverlap,
  type BackfillProgress,
  type BackfillState,
} from './admin/backfill.js';
export {
  ScheduleError,
  type Schedules,
  type ScheduleErrorCode,
  type ScheduleView,
  type ScheduleDescription,
  type UpsertResult,
} from './admin/schedules.js';
export type { ScheduleSpec, StoredSpec } from './schedules/spec.js';
// Moving from BullMQ: a queue's Job Schedulers imported as runtime schedules of one job type (docs/migrating-from-bullmq.md).
export {
  importBullmqSchedulers,
  BullmqImportError,
  type BullmqImportErrorCode,
  type BullmqImportOptions,
  type BullmqImportOutcome,
  type BullmqImportReport,
  type BullmqImportRow,
} from './admin/import-bullmq.js';
export type { ScheduleProblem } from './schedules/catalog.js';
export { formatMembersTable, type MemberStatus, type MembersReport } from './members/status.js';
export type { MemberRecord } from './members/record.js';
export type { MemberCondition, DisruptionState } from './members/health.js';
export type { DrainOutcome } from './members/drain.js';
export type { FenceState } from './ledger/tick-ledger.js';

// The HTTP side: status page, /api, Bull Board, probes, /metrics.
export { startHttpServer, type HttpServerOptions } from './serving/http-server.js';
export { createMetrics } from './serving/metrics.js';

// Redis.
export { parseRedisUrl, RedisTopologyError, type RedisTopology } from './redis/redis-topology.js';
export { DeploymentConflictError, type OtherDeployment } from './members/deployments.js';

// The elector on its own.
export { LeaderElector, LeadershipLostError } from './election/leader-elector.js';
export {
  ElectionConfigError,
  type LeaderElectionConfig,
  type LeaderCallbacks,
  type LeaderElectionMetrics,
} from './election/config.js';
export { LockConflictError, LockNotFoundError, type ResourceLock } from './election/resource-lock.js';
export type { LeaderElectionRecord, Term } from './election/record.js';
export { KubernetesLeaseLock, type KubernetesLeaseLockOptions } from './election/kubernetes-lock.js';
export { RedisLeaseLock, type RedisLeaseLockOptions } from './election/redis-lock.js';
export { defaultIdentity } from './election/identity.js';
