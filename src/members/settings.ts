/** Timing and rate settings of heartbeats and member health. Durations are milliseconds. */
export interface MemberSettings {
  /** How often every instance rewrites its member record. Default 5 s. */
  heartbeatIntervalMs: number;
  /** A member whose record has not changed for this long, as the leader sees it, is Unknown. Default 20 s. */
  graceMs: number;
  /** An Unknown member is removed from the registry after this long, rate permitting. Default 60 s. */
  removalTimeoutMs: number;
  /** Above this fraction of members not Ready, the cluster is in PartialDisruption. Default 0.55. */
  unhealthyThreshold: number;
  /** Removals per second in Normal. Default 0.1 (one per 10 s), as Kubernetes' node eviction rate. */
  removalQps: number;
  /** Removals per second in PartialDisruption. Default 0.01 (one per 100 s). FullDisruption removes none. */
  partialRemovalQps: number;
}

export const DEFAULT_MEMBER_SETTINGS: Readonly<MemberSettings> = {
  heartbeatIntervalMs: 5_000,
  graceMs: 20_000,
  removalTimeoutMs: 60_000,
  unhealthyThreshold: 0.55,
  removalQps: 0.1,
  partialRemovalQps: 0.01,
};

/** A member setting that cannot work; the message names the field. */
export class MemberConfigError extends Error {
  override readonly name = 'MemberConfigError';
}

/** Applies defaults and checks the rules that keep a healthy member from being judged Unknown. */
export function resolveMemberSettings(settings: Partial<MemberSettings> = {}): MemberSettings {
  const resolved: MemberSettings = { ...DEFAULT_MEMBER_SETTINGS };
  for (const [field, value] of Object.entries(settings) as Array<[keyof MemberSettings, number | undefined]>) {
    if (value !== undefined) resolved[field] = value;
  }
  for (const field of ['heartbeatIntervalMs', 'graceMs', 'removalTimeoutMs'] as const) {
    if (!Number.isFinite(resolved[field]) || resolved[field] <= 0) {
      throw new MemberConfigError(`${field} must be a positive number of milliseconds, got ${resolved[field]}`);
    }
  }
  // The leader reads every heartbeatInterval and the member writes every heartbeatInterval; out of phase,
  // two observed changes can be almost two intervals apart, so the grace must cover more than that.
  if (resolved.graceMs <= 2 * resolved.heartbeatIntervalMs) {
    throw new MemberConfigError(
      `graceMs (${resolved.graceMs}) must be more than twice heartbeatIntervalMs (${resolved.heartbeatIntervalMs}): ` +
        'otherwise a healthy member can be judged Unknown between two heartbeats',
    );
  }
  if (!(resolved.unhealthyThreshold > 0 && resolved.unhealthyThreshold <= 1)) {
    throw new MemberConfigError(`unhealthyThreshold must be in (0, 1], got ${resolved.unhealthyThreshold}`);
  }
  for (const field of ['removalQps', 'partialRemovalQps'] as const) {
    if (!Number.isFinite(resolved[field]) || resolved[field] < 0) {
      throw new MemberConfigError(`${field} must be zero or a positive number of removals per second, got ${resolved[field]}`);
    }
  }
  return resolved;
}
