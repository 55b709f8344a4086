import type { LeaderElectionRecord, LockObservation } from './record.js';

/**
 * The storage a `LeaderElector` competes on, mirroring client-go's `resourcelock.Interface`.
 *
 * A lock remembers the version of the object it last read or wrote; `update` is a compare-and-swap
 * against that version, so of two racing candidates exactly one succeeds and the other gets a
 * `LockConflictError`.
 */
export interface ResourceLock {
  /** Reads the record. Throws `LockNotFoundError` when it does not exist. */
  get(signal: AbortSignal): Promise<LockObservation>;
  /** Creates the record. Throws `LockConflictError` when it already exists. */
  create(record: LeaderElectionRecord, signal: AbortSignal): Promise<void>;
  /**
   * Replaces the record, conditional on the version last observed by `get`, `create` or `update`.
   * Throws `LockConflictError` on a stale version and `LockNotFoundError` if the record vanished.
   */
  update(record: LeaderElectionRecord, signal: AbortSignal): Promise<void>;
  /** Best-effort audit trail of leadership changes (Kubernetes Events); never throws. */
  recordEvent(message: string): void;
  /** The identity this lock writes as holder. */
  identity(): string;
  /** A human-readable name of the lock, e.g. `kube-system/leasebeat`. */
  describe(): string;
  /**
   * The generation of the record last observed: the Lease uid, or the Redis record's generation id.
   * Empty before the first successful read or write.
   */
  generation(): string;
}

/** The record changed under us (HTTP 409 Conflict / AlreadyExists, or a failed Redis CAS). */
export class LockConflictError extends Error {
  override readonly name = 'LockConflictError';
}

/** The record does not exist (HTTP 404). */
export class LockNotFoundError extends Error {
  override readonly name = 'LockNotFoundError';
}
