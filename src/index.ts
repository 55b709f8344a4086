/**
 * leasebeat: a leader-gated cron scheduler for BullMQ. The library entry point; the CLI is a thin layer
 * over it.
 */
export { createScheduler, type Scheduler, type SchedulerOptions, type LeadershipView } from './scheduler.js';
export {
  createAdmin,
  AdminError,
  type Admin,
  type AdminErrorCode,
  type AdminOptions,
  type AdminJobStatus,
  type ClusterStatus,
  type RecentRun,
  type TriggerResult,
  type DrainOptions,
  formatJobLine,
  formatRuns,
} from './admin/admin.js';
export {
  SETTINGS,
  SETTING_NAMES,
  ConfigError,
  loadServiceConfig,
  inCluster,
  redactUrl,
  type SettingSpec,
  type SettingName,
  type SettingScope,
  type RawSettings,
  type ServiceConfig,
} from './config/settings.js';
export { loadJobs, type LoadError, type LoadResult } from './scheduling/loader.js';
export { parseRedisUrl, RedisConnections, RedisTopologyError, type RedisTopology, type ConnectionRole } from './redis/redis-topology.js';
export { nextTicks } from './scheduling/plan.js';
export { parseDuration, formatDuration, type Duration } from './scheduling/duration.js';
export { createLogger } from './util/logger.js';
export {
  defineJob,
  type JobDefinition,
  type HandlerContext,
  type ScheduledJob,
  type OverlapPolicy,
  type CatchupMode,
  type FenceToken,
} from './scheduling/define-job.js';
export { LeaderElector, LeadershipLostError } from './election/leader-elector.js';
export {
  ElectionConfigError,
  type LeaderElectionConfig,
  type LeaderCallbacks,
  type LeaderElectionMetrics,
} from './election/config.js';
export type { ResourceLock } from './election/resource-lock.js';
export { LockConflictError, LockNotFoundError } from './election/resource-lock.js';
export type { LeaderElectionRecord, Term } from './election/record.js';
export { KubernetesLeaseLock, type KubernetesLeaseLockOptions } from './election/kubernetes-lock.js';
export { RedisLeaseLock, type RedisLeaseLockOptions } from './election/redis-lock.js';
export { defaultIdentity } from './election/identity.js';
export { TickLedger, type FencingToken, type JobState, type FenceState } from './ledger/tick-ledger.js';
export type { TickJobData } from './ledger/job-data.js';
export { startHttpServer, type HttpServerOptions } from './serving/http-server.js';
export { createMetrics } from './serving/metrics.js';
export { MemberStore, type CordonRequest } from './members/store.js';
export { DeploymentConflictError, type OtherDeployment } from './members/deployments.js';
export type { MemberRecord } from './members/record.js';
export type { MemberCondition, DisruptionState } from './members/health.js';
export type { MemberSettings } from './members/settings.js';
export { formatMembersTable, type MemberStatus, type MembersReport } from './members/status.js';
export { waitForDrain, type DrainOutcome } from './members/drain.js';
