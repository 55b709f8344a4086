import type { LeaderElectionRecord, LockObservation, LockVersion } from './record.js';

/**
 * The storage a `LeaderElector` competes on, mirroring client-go's `resourcelock.Interface`.
 *
 * Unlike client-go's locks, which cache the object they last read or wrote, a lock here caches nothing
 * the next write depends on: `update` takes the version it is based on from the caller. The elector
 * hands it the version of the very observation it decided on, so a read made for another purpose (a
 * release's check, say) can never turn a stale decision into a successful compare-and-swap. Of two
 * candidates racing on one version exactly one succeeds and the other gets a `LockConflictError`.
 */
export interface ResourceLock {
  /** Reads the record. Throws `LockNotFoundError` when it does not exist. */
  get(signal: AbortSignal): Promise<LockObservation>;
  /** Creates the record and returns its version. Throws `LockConflictError` when it already exists. */
  create(record: LeaderElectionRecord, signal: AbortSignal): Promise<LockVersion>;
  /**
   * Replaces the record if it is still at `base` (a version this lock returned), and returns the new
   * version. Throws `LockConflictError` on a stale version and `LockNotFoundError` if the record vanished.
   */
  update(record: LeaderElectionRecord, base: LockVersion, signal: AbortSignal): Promise<LockVersion>;
  /**
   * Optional change feed: pushes the record to `listener` whenever it changes (a renewal, a release, a
   * takeover), until `signal` aborts. A feed may lose changes while it is down, and says so through
   * `listener.live(false)`; once back it reports the record as it is now and `live(true)`. The elector
   * uses it only to wake up and to skip reads; every decision is still a compare-and-swap, so a lost or
   * late change can make a failover slower, never unsafe.
   */
  watch?(signal: AbortSignal, listener: LockFeedListener): void;
  /** Best-effort audit trail of leadership changes (Kubernetes Events); never throws. */
  recordEvent(message: string): void;
  /** The identity this lock writes as holder. */
  identity(): string;
  /** A human-readable name of the lock, e.g. `kube-system/leasebeat`. */
  describe(): string;
}

/** The record changed under us (HTTP 409 Conflict / AlreadyExists, or a failed Redis CAS). */
export class LockConflictError extends Error {
  override readonly name = 'LockConflictError';
}

/** The record does not exist (HTTP 404). */
export class LockNotFoundError extends Error {
  override readonly name = 'LockNotFoundError';
}

/** What a lock's change feed reports to. */
export interface LockFeedListener {
  /** The record as it is after a change (or after the feed came back). */
  change(observation: LockObservation): void;
  /** Whether the feed is live: false from the moment it may have missed a change until it has caught up. */
  live(live: boolean): void;
}
