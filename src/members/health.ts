import type { MemberRecord } from './record.js';
import type { MemberSettings } from './settings.js';
import { TokenBucket } from './token-bucket.js';

/** A member's condition as the leader judges it. */
export type MemberCondition = 'Ready' | 'NotReady' | 'Unknown';

/** The state of the whole cluster, which sets how fast Unknown members may be removed. */
export type DisruptionState = 'Normal' | 'PartialDisruption' | 'FullDisruption';

export const CONDITIONS: readonly MemberCondition[] = ['Ready', 'NotReady', 'Unknown'];

/** A member record as read from Redis: the exact stored text (compared for change) and its reading. */
export interface ObservedRecord {
  raw: string;
  record: MemberRecord;
  /**
   * How long before the read the member last wrote, on Redis's clock; absent for records without a stamp.
   * Shown to people, and where a leader starts its countdown for a member it has not seen before.
   */
  ageMs?: number;
}

/** A transition worth an event in the log. Times are the leader's clock (epoch ms). */
export type MemberEvent =
  | { reason: 'MemberJoined'; identity: string; condition: MemberCondition }
  | { reason: 'ConditionChanged'; identity: string; from: MemberCondition; to: MemberCondition; detail?: string; activeJobIds: string[] }
  | { reason: 'MemberLeft'; identity: string; condition: MemberCondition }
  | { reason: 'MemberRemoved'; identity: string; unknownForMs: number; activeJobsWhenUnknown: string[] }
  | { reason: 'DisruptionChanged'; from: DisruptionState; to: DisruptionState; unhealthy: number; total: number };

/** The leader's judgement of one member. */
export interface MemberJudgement {
  identity: string;
  condition: MemberCondition;
  /** Leader-clock time the condition last changed. */
  since: number;
  /**
   * Leader-clock time the leader last saw the record change (Kubernetes' `probeTimestamp`), or, until it
   * has seen one, when Redis stamped the record's write.
   */
  probeTimestamp: number;
  /** How long before this judgement that was. */
  heartbeatAgeMs: number;
  /** The active jobs the member last reported, kept from the moment it became Unknown. */
  activeJobsWhenUnknown?: string[];
}

/** What the leader publishes after every pass, for every instance's status API and the CLI. */
export interface HealthView {
  leader: string;
  /** Leader-clock time of the pass. */
  observedAt: number;
  disruption: DisruptionState;
  members: MemberJudgement[];
}

interface Tracked {
  raw: string;
  record: MemberRecord;
  probeTimestamp: number;
  condition: MemberCondition;
  since: number;
  activeJobsWhenUnknown?: string[];
}

/** Removals are rationed one at a time, as Kubernetes' eviction limiter does (burst 1). */
const REMOVAL_BURST = 1;

/**
 * The leader's model of member health, after Kubernetes' node lifecycle controller. Pure: every method takes
 * the leader's local time, so tests drive it with a manual clock.
 *
 * - A member's `probeTimestamp` is the leader's local time when it last saw the stored record *change*.
 *   Staleness is `now - probeTimestamp`; no time written by the member is ever compared with the local clock,
 *   so a member with a skewed clock is judged exactly like any other.
 * - A new leader starts from Redis: a member it has not seen before gets `probeTimestamp = now - ageMs`,
 *   its last write as Redis stamped it. That age is a duration on Redis' one clock, so no clock is compared
 *   with another, and a member dead for minutes is Unknown at the first pass instead of Ready for a grace
 *   period (a live member wrote within an interval, so none is declared dead because the leader changed).
 *   From then on only changes this leader saw move the probe, as in Kubernetes.
 * - Unknown members are removed after the removal timeout through a token bucket whose rate depends on the
 *   disruption state: the normal rate, a lower one in PartialDisruption and none in FullDisruption, where
 *   the likelier explanation is that the leader itself is cut off.
 */
export class MemberHealth {
  private readonly members = new Map<string, Tracked>();
  private readonly limiter: TokenBucket;
  private disruptionState: DisruptionState = 'Normal';
  private passes = 0;

  constructor(
    private readonly settings: Pick<MemberSettings, 'graceMs' | 'removalTimeoutMs' | 'unhealthyThreshold' | 'removalQps' | 'partialRemovalQps'>,
    /** The leader's own identity: never removed, and left out of "every other member is Unknown". */
    private readonly self: string,
    now: number,
  ) {
    this.limiter = new TokenBucket(settings.removalQps, REMOVAL_BURST, now);
  }

  get disruption(): DisruptionState {
    return this.disruptionState;
  }

  /** The removal rate in force, per second. */
  get removalRate(): number {
    return this.limiter.rate;
  }

  /** Takes in the records read at `now` and returns the transitions they cause. */
  observe(now: number, observed: ReadonlyMap<string, ObservedRecord>): MemberEvent[] {
    const events: MemberEvent[] = [];
    for (const [identity, tracked] of this.members) {
      if (observed.has(identity)) continue;
      this.members.delete(identity);
      events.push({ reason: 'MemberLeft', identity, condition: tracked.condition });
    }
    // In identity order, so events come out the same way whatever order Redis returns the hash in.
    for (const [identity, { raw, record, ageMs }] of [...observed].sort(([a], [b]) => a.localeCompare(b))) {
      const tracked = this.members.get(identity);
      if (!tracked) {
        // A record without a stamp (an older writer) starts its countdown now. A member first judged
        // Unknown counts as Unknown since now: its removal waits the full timeout under this leader.
        const member: Tracked = { raw, record, probeTimestamp: now - (ageMs ?? 0), condition: 'Ready', since: now };
        member.condition = this.judge(member, now);
        if (member.condition === 'Unknown') member.activeJobsWhenUnknown = record.activeJobIds;
        this.members.set(identity, member);
        // The first pass only rebuilds state; members seen later are news.
        if (this.passes > 0) events.push({ reason: 'MemberJoined', identity, condition: member.condition });
        continue;
      }
      if (raw !== tracked.raw) {
        tracked.raw = raw;
        tracked.record = record;
        tracked.probeTimestamp = now;
      }
      const condition = this.judge(tracked, now);
      if (condition === tracked.condition) continue;
      const from = tracked.condition;
      tracked.condition = condition;
      tracked.since = now;
      if (condition === 'Unknown') tracked.activeJobsWhenUnknown = tracked.record.activeJobIds;
      else delete tracked.activeJobsWhenUnknown;
      events.push({
        reason: 'ConditionChanged',
        identity,
        from,
        to: condition,
        ...(condition === 'NotReady' && tracked.record.reason ? { detail: tracked.record.reason } : {}),
        activeJobIds: tracked.record.activeJobIds,
      });
    }
    this.passes++;
    const disruption = this.updateDisruption(now);
    if (disruption) events.push(disruption);
    return events;
  }

  /**
   * The Unknown members due for removal now, oldest first, as many as the rate allows. Each one returned
   * has used a token; call `removed` for those actually deleted.
   */
  dueRemovals(now: number): string[] {
    const due = [...this.members.entries()]
      .filter(([identity, m]) => identity !== this.self && m.condition === 'Unknown' && now - m.since > this.settings.removalTimeoutMs)
      .sort(([idA, a], [idB, b]) => a.since - b.since || idA.localeCompare(idB));
    const granted: string[] = [];
    for (const [identity] of due) {
      if (!this.limiter.tryTake(now)) break;
      granted.push(identity);
    }
    return granted;
  }

  /**
   * Forgets a member whose record was deleted. Returns the removal event and, since the cluster is now
   * smaller, any change of disruption state (which also sets the rate for the next removal).
   */
  removed(identity: string, now: number): MemberEvent[] {
    const tracked = this.members.get(identity);
    if (!tracked) return [];
    this.members.delete(identity);
    const events: MemberEvent[] = [
      { reason: 'MemberRemoved', identity, unknownForMs: now - tracked.since, activeJobsWhenUnknown: tracked.activeJobsWhenUnknown ?? [] },
    ];
    const disruption = this.updateDisruption(now);
    if (disruption) events.push(disruption);
    return events;
  }

  /** Members per condition. */
  counts(): Record<MemberCondition, number> {
    const counts: Record<MemberCondition, number> = { Ready: 0, NotReady: 0, Unknown: 0 };
    for (const member of this.members.values()) counts[member.condition]++;
    return counts;
  }

  /** The judgement to publish. */
  view(now: number): HealthView {
    return {
      leader: this.self,
      observedAt: now,
      disruption: this.disruptionState,
      members: [...this.members.entries()].map(([identity, m]) => ({
        identity,
        condition: m.condition,
        since: m.since,
        probeTimestamp: m.probeTimestamp,
        heartbeatAgeMs: now - m.probeTimestamp,
        ...(m.activeJobsWhenUnknown ? { activeJobsWhenUnknown: m.activeJobsWhenUnknown } : {}),
      })),
    };
  }

  private judge(member: Tracked, now: number): MemberCondition {
    if (now - member.probeTimestamp > this.settings.graceMs) return 'Unknown';
    return member.record.ready ? 'Ready' : 'NotReady';
  }

  private updateDisruption(now: number): MemberEvent | undefined {
    const all = [...this.members.entries()];
    const others = all.filter(([identity]) => identity !== this.self);
    const unhealthy = all.filter(([, m]) => m.condition !== 'Ready').length;
    let state: DisruptionState = 'Normal';
    if (others.length > 0 && others.every(([, m]) => m.condition === 'Unknown')) state = 'FullDisruption';
    else if (all.length > 0 && unhealthy / all.length > this.settings.unhealthyThreshold) state = 'PartialDisruption';
    if (state === this.disruptionState) return undefined;
    const from = this.disruptionState;
    this.disruptionState = state;
    const rate = state === 'Normal' ? this.settings.removalQps : state === 'PartialDisruption' ? this.settings.partialRemovalQps : 0;
    this.limiter.setRate(rate, now);
    return { reason: 'DisruptionChanged', from, to: state, unhealthy, total: all.length };
  }
}
