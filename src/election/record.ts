/**
 * The state a lock stores, in the shape of client-go's `LeaderElectionRecord`. Times are epoch
 * milliseconds; a lock converts them to its own wire format (MicroTime for Kubernetes).
 */
export interface LeaderElectionRecord {
  /** Identity of the current holder; `""` means released. */
  holderIdentity: string;
  /** How long, in seconds, a follower waits after it last saw the record change before taking over. */
  leaseDurationSeconds: number;
  acquireTime: number;
  renewTime: number;
  /** Incremented each time the holder changes. Half of the fencing token. */
  leaderTransitions: number;
}

/**
 * The version of the stored object that an observation saw or a write produced: the base of the next
 * compare-and-swap. Opaque to the elector except for its generation; each lock keeps its own details
 * (the whole Lease for Kubernetes, the version counter for Redis) in the object it hands out.
 */
export interface LockVersion {
  /** The Lease uid, or the Redis record's generation id. Changes whenever the record is recreated. */
  readonly generation: string;
}

/** What `ResourceLock.get` observed: the decoded record, its raw serialized form, and its version. */
export interface LockObservation {
  record: LeaderElectionRecord;
  /**
   * A canonical serialization of the record. The elector compares it with the last observation to
   * decide whether the record changed, exactly as client-go compares raw bytes.
   */
  raw: string;
  /** The version this observation saw: an update based on it succeeds only if nobody wrote since. */
  version: LockVersion;
  /**
   * Set when the stored object exists but could not be read in full (fields missing or unparseable).
   * The elector treats it as held by an unknown holder: taken over once unchanged for a lease duration.
   */
  damaged?: string;
}

/**
 * The fencing token of one leadership term. `generation` is the Lease uid (Kubernetes) or the record's
 * generation id (Redis): it changes whenever the record is deleted and recreated, so a reset of
 * `leaderTransitions` to 0 can never repeat an older token.
 */
export interface Term {
  holderIdentity: string;
  generation: string;
  leaderTransitions: number;
  acquireTime: number;
}

/** A stable serialization used for raw comparisons; the key order is fixed. */
export function serializeRecord(record: LeaderElectionRecord): string {
  return JSON.stringify([
    record.holderIdentity,
    record.leaseDurationSeconds,
    record.acquireTime,
    record.renewTime,
    record.leaderTransitions,
  ]);
}
