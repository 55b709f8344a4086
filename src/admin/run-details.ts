import type { Job } from 'bullmq';
import type { TickJobData } from '../ledger/job-data.js';
import { MAX_ERROR_LENGTH, NO_RUN_DETAILS, type RecentRun } from './run-views.js';

/** BullMQ job hash field where leasebeat's workers record who started a run last: `<ms>|<identity>` (startRuns.lua). */
export const RUNNER_FIELD = 'leasebeatRunner';

type RunDetails = Pick<RecentRun, keyof typeof NO_RUN_DETAILS>;

/**
 * What BullMQ's job of a run tells of it: when it started and finished, its lag and duration, the term
 * and the definition that decided it, who ran it. `runner` is the job hash's {@link RUNNER_FIELD}.
 */
export function runDetails(job: Job | undefined, runner: string | null): RunDetails {
  if (!job) return NO_RUN_DETAILS;
  const data = (job.data ?? {}) as Partial<TickJobData>;
  const iso = (ms: number | undefined): string | null => (ms ? new Date(ms).toISOString() : null);
  const startedAt = job.processedOn;
  // A manual run is due when it was added; a tick at its tick, or when staged at its due time.
  const dueAt = data.manual ? job.timestamp : (data.dueAt ?? data.tick);
  const separator = runner?.indexOf('|') ?? -1;
  return {
    startedAt: iso(startedAt),
    finishedAt: iso(job.finishedOn),
    durationMs: startedAt && job.finishedOn ? Math.max(0, job.finishedOn - startedAt) : null,
    lagMs: startedAt && dueAt !== undefined ? Math.max(0, startedAt - dueAt) : null,
    term: data.token ? `${data.token.generation}/${data.token.leaderTransitions}` : null,
    instance: runner && separator >= 0 ? runner.slice(separator + 1) : (job.processedBy ?? null),
    definition: data.definition ?? null,
    attempts: job.attemptsMade,
    backfill: data.backfill ?? null,
    error: job.failedReason ? clip(job.failedReason) : null,
  };
}

const clip = (text: string): string => (text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH - 1)}…` : text);
