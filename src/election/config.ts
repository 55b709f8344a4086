import type { Logger } from 'pino';
import type { Clock } from '../util/clock.js';
import type { Term } from './record.js';
import type { ResourceLock } from './resource-lock.js';

/** Retry waits are stretched by up to this factor, as in client-go, so candidates do not move in lockstep. */
export const JITTER_FACTOR = 1.2;

export const DEFAULT_LEASE_DURATION_MS = 15_000;
export const DEFAULT_RENEW_DEADLINE_MS = 10_000;
export const DEFAULT_RETRY_PERIOD_MS = 2_000;

/** The callbacks that tie leadership to the guarded work. */
export interface LeaderCallbacks {
  /**
   * Called once leadership is acquired. `signal` aborts the moment leadership is lost or the elector is
   * cancelled; the guarded work must stop then. `term` carries the fencing token.
   */
  onStartedLeading(signal: AbortSignal, term: Term): void | Promise<void>;
  /**
   * Called after leadership ends, once per `onStartedLeading`. Unlike client-go it is NOT called when this
   * instance never led. The elector awaits it before releasing the lease, so the guarded work is known to
   * have stopped before another instance can take over early.
   */
  onStoppedLeading(): void | Promise<void>;
  /** Called whenever the observed holder changes, including the first observation and `""` (released). */
  onNewLeader?(identity: string): void;
}

/** Hooks for the Kubernetes-compatible metrics `leader_election_master_status` and `leader_election_slowpath_total`. */
export interface LeaderElectionMetrics {
  leaderOn(name: string): void;
  leaderOff(name: string): void;
  slowpathExercised(name: string): void;
  renewFailed?(name: string): void;
}

/** Options of a `LeaderElector`. Durations are milliseconds. */
export interface LeaderElectionConfig {
  lock: ResourceLock;
  /** How long followers wait after the record last changed before they may take over. Default 15 s. */
  leaseDurationMs?: number;
  /** How long the leader keeps retrying a failed renewal before it gives up leadership. Default 10 s. */
  renewDeadlineMs?: number;
  /** The wait between attempts to acquire or renew. Default 2 s. */
  retryPeriodMs?: number;
  /** Bound of every single lock request. Default and maximum: RenewDeadline / 2. */
  requestTimeoutMs?: number;
  callbacks: LeaderCallbacks;
  /** Write an empty holder when leadership ends, so a follower takes over within about one RetryPeriod. */
  releaseOnCancel?: boolean;
  /** After losing leadership, campaign again instead of returning from `run` (client-go's Run is one-shot). */
  recampaign?: boolean;
  /** Label for metrics and logs. Default: the lock's description. */
  name?: string;
  clock?: Clock;
  logger?: Logger;
  metrics?: LeaderElectionMetrics;
  /** Source of randomness for jitter, in [0, 1). Injected by tests. */
  random?: () => number;
}

/** A `LeaderElectionConfig` with every default applied and every rule checked. */
export interface ResolvedElectionConfig {
  lock: ResourceLock;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  requestTimeoutMs: number;
  callbacks: LeaderCallbacks;
  releaseOnCancel: boolean;
  recampaign: boolean;
  name: string;
}

/** Thrown for a configuration that would make the algorithm unsafe. */
export class ElectionConfigError extends Error {
  override readonly name = 'ElectionConfigError';
}

function positive(value: number, field: string): number {
  if (!Number.isFinite(value) || value <= 0) {
    throw new ElectionConfigError(`${field} must be a positive number of milliseconds, got ${value}`);
  }
  return value;
}

/** Applies defaults and enforces client-go's rules: LeaseDuration > RenewDeadline > 1.2 × RetryPeriod > 0. */
export function resolveElectionConfig(config: LeaderElectionConfig): ResolvedElectionConfig {
  if (!config.lock) throw new ElectionConfigError('lock is required');
  const { leaseDurationMs, renewDeadlineMs, retryPeriodMs } = checkElectionTimings({
    leaseDurationMs: config.leaseDurationMs ?? DEFAULT_LEASE_DURATION_MS,
    renewDeadlineMs: config.renewDeadlineMs ?? DEFAULT_RENEW_DEADLINE_MS,
    retryPeriodMs: config.retryPeriodMs ?? DEFAULT_RETRY_PERIOD_MS,
  });
  const maxRequestTimeout = renewDeadlineMs / 2;
  const requestTimeoutMs = positive(config.requestTimeoutMs ?? maxRequestTimeout, 'requestTimeoutMs');
  if (requestTimeoutMs > maxRequestTimeout) {
    throw new ElectionConfigError(
      `requestTimeoutMs (${requestTimeoutMs}) must be at most renewDeadlineMs / 2 (${maxRequestTimeout}), ` +
        'so one hung request cannot use up the whole renew deadline',
    );
  }
  if (typeof config.callbacks?.onStartedLeading !== 'function') {
    throw new ElectionConfigError('callbacks.onStartedLeading is required');
  }
  if (typeof config.callbacks.onStoppedLeading !== 'function') {
    throw new ElectionConfigError('callbacks.onStoppedLeading is required');
  }
  if (!config.lock.identity()) throw new ElectionConfigError('the lock identity must not be empty');
  return {
    lock: config.lock,
    leaseDurationMs,
    renewDeadlineMs,
    retryPeriodMs,
    requestTimeoutMs,
    callbacks: config.callbacks,
    releaseOnCancel: config.releaseOnCancel ?? false,
    recampaign: config.recampaign ?? false,
    name: config.name ?? config.lock.describe(),
  };
}

/** Enforces client-go's timing rules, LeaseDuration > RenewDeadline > 1.2 × RetryPeriod > 0, and returns them. */
export function checkElectionTimings(timings: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number }): {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
} {
  const leaseDurationMs = positive(timings.leaseDurationMs, 'leaseDurationMs');
  const renewDeadlineMs = positive(timings.renewDeadlineMs, 'renewDeadlineMs');
  const retryPeriodMs = positive(timings.retryPeriodMs, 'retryPeriodMs');
  if (leaseDurationMs <= renewDeadlineMs) {
    throw new ElectionConfigError(
      `leaseDurationMs (${leaseDurationMs}) must be greater than renewDeadlineMs (${renewDeadlineMs}): ` +
        'otherwise a follower may take over while the leader still believes it leads',
    );
  }
  if (renewDeadlineMs <= JITTER_FACTOR * retryPeriodMs) {
    throw new ElectionConfigError(
      `renewDeadlineMs (${renewDeadlineMs}) must be greater than ${JITTER_FACTOR} × retryPeriodMs ` +
        `(${JITTER_FACTOR * retryPeriodMs}): the leader needs room for at least one jittered retry`,
    );
  }
  return { leaseDurationMs, renewDeadlineMs, retryPeriodMs };
}
