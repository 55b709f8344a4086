import type { CordonRequest } from './store.js';
import type { DisruptionState, HealthView, MemberCondition, ObservedRecord } from './health.js';
import type { WorkerState } from './record.js';
import { DEFAULT_MEMBER_SETTINGS } from './settings.js';

/**
 * One member as the status API shows it: its own report joined with the leader's judgement. The fields
 * after `lastSeen` are optional only for sources older than member health; leasebeat always fills them.
 */
export interface MemberStatus {
  identity: string;
  /**
   * `leader` only for the current lease holder (or, without one known, the leader judging health). A
   * record that still says `leader` after its writer lost the lease (it died, say) shows `follower`.
   */
  role: string;
  /** When the leader last saw this member's record change (leader's clock, RFC 3339); `""` when not yet judged. */
  lastSeen: string;
  /** `null` while no leader has judged this member (no leader, or it has just joined). */
  condition?: MemberCondition | null;
  /** Why the member reports it cannot work. */
  reason?: string | null;
  /**
   * Time since the member last wrote its record, on Redis's clock at the time of the report; for records
   * without a Redis stamp, since the judging leader last saw it change (as of its latest pass).
   */
  heartbeatAgeMs?: number | null;
  version?: string;
  /** On the member's own clock. */
  startedAt?: string;
  workers?: WorkerState;
  activeJobs?: number;
  activeJobIds?: string[];
  /** The jobs that were active on the member when it became Unknown. */
  activeJobsWhenUnknown?: string[];
  /** The member obeys a cordon. */
  cordoned?: boolean;
  /** A cordon is stored but the member has not (yet) reported obeying it. */
  cordonRequested?: boolean;
  draining?: boolean;
}

/** The member table and the disruption state, from the records and the leader's latest judgement. */
export interface MembersReport {
  members: MemberStatus[];
  /** `null` while no leader publishes a judgement. */
  disruption: DisruptionState | null;
  judgedBy: string | null;
}

/**
 * Joins the records, cordons and the leader's view into rows: the leader first, then by identity.
 * `leader` is the current lease holder (`""` when nobody holds it); pass it whenever it is known, since a
 * dead leader's last record still says `leader`. Without it the leader judging health stands in for it,
 * and without either the records are believed.
 */
export function membersReport(
  records: ReadonlyMap<string, ObservedRecord>,
  cordons: ReadonlyMap<string, CordonRequest>,
  view: HealthView | undefined,
  leader?: string,
): MembersReport {
  const judged = new Map(view?.members.map((m) => [m.identity, m]));
  const holder = leader ?? view?.leader;
  const members = [...records.values()].map(({ record, ageMs }): MemberStatus => {
    const judgement = judged.get(record.identity);
    return {
      identity: record.identity,
      role: holder === undefined ? record.role : record.identity === holder ? 'leader' : 'follower',
      lastSeen: judgement ? new Date(judgement.probeTimestamp).toISOString() : '',
      condition: judgement?.condition ?? null,
      reason: record.reason ?? null,
      // Redis' age is as of this read; the leader's judgement only as of its latest pass.
      heartbeatAgeMs: ageMs ?? judgement?.heartbeatAgeMs ?? null,
      version: record.version,
      startedAt: new Date(record.startedAt).toISOString(),
      workers: record.workers,
      activeJobs: record.activeJobs,
      activeJobIds: record.activeJobIds,
      activeJobsWhenUnknown: judgement?.activeJobsWhenUnknown ?? [],
      cordoned: record.cordoned,
      cordonRequested: cordons.has(record.identity) && !record.cordoned,
      draining: record.draining,
    };
  });
  members.sort((a, b) => Number(b.role === 'leader') - Number(a.role === 'leader') || a.identity.localeCompare(b.identity));
  return { members, disruption: view?.disruption ?? null, judgedBy: view?.leader ?? null };
}

/** A duration for people: `850 ms`, `12.3 s`, `4 min`. */
function formatAge(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 90_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60_000)} min`;
}

/** The members table as plain text lines, for `leasebeat status`. */
export function formatMembersTable(report: MembersReport): string[] {
  const header = ['MEMBER', 'CONDITION', 'ROLE', 'HEARTBEAT', 'ACTIVE', 'STATE'];
  const rows = report.members.map((m) => [
    m.identity,
    m.condition ?? '-',
    m.role,
    m.heartbeatAgeMs === null || m.heartbeatAgeMs === undefined ? '-' : `${formatAge(m.heartbeatAgeMs)} ago`,
    String(m.activeJobs ?? 0),
    describeState(m),
  ]);
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]): string => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd();
  const judged = report.disruption ? `${report.disruption} (judged by ${report.judgedBy})` : 'unknown: no leader is judging member health';
  return [`disruption: ${judged}`, line(header), ...rows.map(line)];
}

/**
 * Cordon, workers and readiness in a few words, each said once and named: `cordoned, workers draining`.
 * The record's `draining` flag is not shown apart: it is the workers' `draining`, or a shutdown, which the
 * member's reason (`shutting down`) says.
 */
function describeState(m: MemberStatus): string {
  const parts: string[] = [];
  if (m.cordoned) parts.push('cordoned');
  else if (m.cordonRequested) parts.push('cordon requested');
  parts.push(`workers ${m.workers ?? '?'}`);
  if (m.reason) parts.push(m.reason);
  if (m.activeJobsWhenUnknown?.length) parts.push(`active when Unknown: ${m.activeJobsWhenUnknown.join(', ')}`);
  return parts.join(', ');
}

/**
 * Why a member could not take the lease now, or undefined when it could: it must be Ready, uncordoned (no
 * cordon stored either) and not shutting down. Without a leader's judgement of it (no leader, or it has
 * just joined), a record written within the default grace that reports ready counts as Ready.
 */
export function cannotLead(m: MemberStatus): string | undefined {
  if (m.cordoned) return 'cordoned';
  if (m.cordonRequested) return 'cordon requested';
  // Not cordoned, so draining means shutting down.
  if (m.draining) return 'shutting down';
  if (m.condition) return m.condition === 'Ready' ? undefined : m.condition;
  if (m.reason) return 'not ready';
  const fresh = typeof m.heartbeatAgeMs === 'number' && m.heartbeatAgeMs <= DEFAULT_MEMBER_SETTINGS.graceMs;
  return fresh ? undefined : 'not heard from';
}
