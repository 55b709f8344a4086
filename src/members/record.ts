import type { WorkerState } from '../workers/worker-state.js';

export type { WorkerState };

/**
 * The record each instance writes about itself on every heartbeat. It is the member's own report; the
 * leader judges health from when it saw the record *change*, never from any time written in it.
 */
export interface MemberRecord {
  identity: string;
  version: string;
  /** Epoch ms on the member's own clock: shown to people, never compared with another clock. */
  startedAt: number;
  /** Increases on every heartbeat, so two consecutive records always differ. */
  seq: number;
  role: 'leader' | 'follower';
  workers: WorkerState;
  activeJobs: number;
  /** `<queue>/<job id>` of the active jobs, capped at {@link MAX_LISTED_JOBS}. */
  activeJobIds: string[];
  /** The member obeys a cordon: it does not campaign and its workers take no new jobs. */
  cordoned: boolean;
  /** It stopped taking jobs (cordon or shutdown) and still finishes active ones, or it is shutting down. */
  draining: boolean;
  /** False when the member reports it cannot work; `reason` says why. */
  ready: boolean;
  reason?: string;
}

/** A record is kept small: beyond this many active jobs only the count is exact. */
export const MAX_LISTED_JOBS = 100;

const WORKER_STATES: readonly string[] = ['running', 'draining', 'paused', 'stopped', 'disabled'];

/**
 * Reads a stored record. A record this version cannot read (a newer or corrupt writer) still counts as a
 * member, one that reports itself not ready, so it stays visible and is judged like any other.
 */
export function parseMemberRecord(identity: string, raw: string): MemberRecord {
  let value: Partial<MemberRecord> | undefined;
  try {
    value = JSON.parse(raw) as Partial<MemberRecord>;
  } catch {
    value = undefined;
  }
  if (!value || typeof value !== 'object' || typeof value.seq !== 'number' || !WORKER_STATES.includes(value.workers ?? '')) {
    return {
      identity,
      version: 'unknown',
      startedAt: 0,
      seq: 0,
      role: 'follower',
      workers: 'stopped',
      activeJobs: 0,
      activeJobIds: [],
      cordoned: false,
      draining: false,
      ready: false,
      reason: 'unreadable member record',
    };
  }
  return {
    identity,
    version: String(value.version ?? 'unknown'),
    startedAt: Number(value.startedAt ?? 0),
    seq: value.seq,
    role: value.role === 'leader' ? 'leader' : 'follower',
    workers: value.workers as WorkerState,
    activeJobs: Number(value.activeJobs ?? 0),
    activeJobIds: Array.isArray(value.activeJobIds) ? value.activeJobIds.map(String) : [],
    cordoned: value.cordoned === true,
    draining: value.draining === true,
    ready: value.ready === true,
    ...(typeof value.reason === 'string' ? { reason: value.reason } : {}),
  };
}
