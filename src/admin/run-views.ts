/** What the admin API answers about runs: shared by the job operations and the schedules API. */

/** One recent run or tick of a job, newest first, from the fenced ledger and BullMQ. */
export interface RecentRun {
  /**
   * `tick`: one tick of the schedule; `range`: ticks skipped together (missed while no leader ran,
   * beyond the catch-up limit); `manual`: a run of `leasebeat trigger`.
   */
  kind: 'tick' | 'range' | 'manual';
  /** The nominal tick; a range's first tick; for a manual run, when it was added to BullMQ. */
  tick: string;
  /** A range's last tick; null otherwise. */
  to: string | null;
  /** How many ticks: a range's count, 1 otherwise. */
  count: number;
  /** `enqueued`, `claimed`, `buffered`, `skipped`, or `unstaging` while a staged run is taken back. */
  fate: string;
  jobId: string | null;
  /** The skip reason, for skipped ticks and ranges (and why a staged run is being taken back). */
  reason: string | null;
  /** The BullMQ queue that holds the run; null when none does (no run, or removed by its retention). */
  queue: string | null;
  /**
   * BullMQ's state of the run (`completed`, `failed`, `active`, ...), read from Redis; `unknown` when no
   * queue holds it any more; null for a tick without a run.
   */
  state: string | null;
  /** When a worker last started it (ISO), from BullMQ; null when it has not started, or no queue holds it. */
  startedAt: string | null;
  /** When it finished (ISO); null while it has not. */
  finishedAt: string | null;
  /** From its last start to its finish, ms. */
  durationMs: number | null;
  /** From when it was due (its tick; a staged run's due time; a manual run's add) to its last start, ms. */
  lagMs: number | null;
  /** The term that enqueued it, `<generation>/<leaderTransitions>` (generation '' for a manual run). */
  term: string | null;
  /** The instance that last started it (`leasebeat` workers record it), else BullMQ's worker name. */
  instance: string | null;
  /** The content hash of the definition that decided it (TickRunData.definition). */
  definition: string | null;
  /** BullMQ attempts made so far (retries count). */
  attempts: number | null;
  /** The backfill that ran it (`leasebeat backfill`), by id; null for a live or manual run. */
  backfill: string | null;
  /**
   * Why its last failed attempt failed, from BullMQ's `failedReason`: the handler's error, a timeout, a stop
   * by a newer tick (overlap `cancelOther`, `terminateOther`); at most {@link MAX_ERROR_LENGTH} characters.
   * Null when no attempt failed. A run retried and then completed keeps its last failure here.
   */
  error: string | null;
}

/** How much of a failure's message a run view carries: a thrown error's message may be any size. */
export const MAX_ERROR_LENGTH = 500;

/** A RecentRun's details from BullMQ, none known: a tick without a run, or a run no queue holds any more. */
export const NO_RUN_DETAILS: Pick<RecentRun, 'startedAt' | 'finishedAt' | 'durationMs' | 'lagMs' | 'term' | 'instance' | 'definition' | 'attempts' | 'backfill' | 'error'> = Object.freeze({
  startedAt: null,
  finishedAt: null,
  durationMs: null,
  lagMs: null,
  term: null,
  instance: null,
  definition: null,
  attempts: null,
  backfill: null,
  error: null,
});

export interface TriggerResult {
  jobId: string;
  queue: string;
  /** True when the job starts a flow (its children are added with it). */
  flow: boolean;
}
