/**
 * The staged-run bookkeeping of one job's lane, kept apart from the Redis calls of {@link JobLane} so it
 * can be tested on explicit times: which runs are still ahead of their due time (and so may be taken
 * back), which came due, and which are being taken back. No I/O and no clock of its own: every method
 * that depends on time takes `now`.
 */
import type { TickRecord, UnstageReason } from '../ledger/tick-ledger.js';
import type { ScheduledJob } from '../scheduling/define-job.js';
import { jitterMs, nextTick } from '../scheduling/plan.js';
import type { StagedRun } from './staging.js';

/**
 * Runs earlier terms may have staged: the `enqueued` ticks within the staging reach the takeover read,
 * due or not (a due one may also have been added at its tick: takeBackLate asks BullMQ).
 */
export function stagedBefore(job: ScheduledJob, recent: TickRecord[]): StagedRun[] {
  const runs: StagedRun[] = [];
  for (const { tick, state } of recent) {
    if (state.kind === 'enqueued') runs.push({ tick, jobId: state.jobId, queue: job.queue, dueAt: tick + jitterMs(job, tick) });
  }
  return runs;
}

/**
 * Why a staged run is to be taken back, or undefined while the job still wants it: all of them once the
 * job (undefined once removed) is removed or paused (by its definition or at run time), those of ticks
 * its schedule no longer has. A take-back that started keeps its reason, but for a runtime schedule's
 * run held as `rescheduled`: a revision written before its tick that has the tick wants it again.
 */
export function unstageReason(run: StagedRun, job: ScheduledJob | undefined, paused: boolean): UnstageReason | undefined {
  if (run.takingBack) return run.heldUntil !== undefined && job && !paused && owesAgain(job, run.tick) ? undefined : run.takingBack;
  return !job ? 'removed' : paused ? 'paused' : nextTick(job, run.tick - 1) !== run.tick ? 'rescheduled' : undefined;
}

/**
 * Whether a runtime schedule's revision owes a tick an earlier one held for a take-back: it has the tick,
 * and was written before it (a revision written later owes no tick before its write).
 */
export function owesAgain(job: ScheduledJob, tick: number): boolean {
  return nextTick(job, tick - 1) === tick && (job.definedAt === undefined || tick > job.definedAt);
}

/** Runs this lane staged (or found staged at takeover) whose due time may not have come, oldest first. */
export class StagedRuns {
  private runs: StagedRun[] = [];

  /** The runs held, oldest first (a copy: the lane may settle runs while it walks it). */
  list(): StagedRun[] {
    return [...this.runs];
  }

  get size(): number {
    return this.runs.length;
  }

  /**
   * A takeover found `earlier` staged by earlier terms. Runs staged by earlier terms stay valid (they are
   * recorded `enqueued`): this term neither stages them again nor loses them, but holds those still ahead
   * of `now` (to take back those a pause or a new schedule no longer wants) and returns those that came
   * due, to be decided as missed ticks (they came due without a worker starting them). Replaces whatever
   * was held: a takeover trusts only the ledger.
   */
  takeOver(earlier: StagedRun[], now: number): StagedRun[] {
    this.runs = earlier.filter((run) => run.dueAt > now);
    return earlier.filter((run) => run.dueAt <= now);
  }

  /** A run was added (at `addedAt`) ahead of its due time; the runs that came due meanwhile are dropped. */
  added(run: StagedRun, addedAt: number): void {
    this.runs = this.runs.filter((held) => held.dueAt > addedAt);
    this.runs.push(run);
  }

  /**
   * Drops the runs due by `now` and returns how many are left. A run whose due time has passed is out of
   * reach: BullMQ has promoted it. A take-back that started is finished whatever the time: its record
   * says `unstaging` until then.
   */
  dropDue(now: number): number {
    this.runs = this.runs.filter((run) => run.dueAt > now || run.takingBack);
    return this.runs.length;
  }

  /** The latest due time of the runs held, or undefined when none is. */
  latestDue(): number | undefined {
    let latest: number | undefined;
    for (const run of this.runs) latest = Math.max(latest ?? -Infinity, run.dueAt);
    return latest;
  }

  /** A take-back of `run` starts: it is carried to its end however late that is. */
  takingBack(run: StagedRun, reason: UnstageReason): void {
    run.takingBack = reason;
  }

  /** `run`, or the run of its tick held already; held from now on (a run found in the ledger, say). */
  track(run: StagedRun): StagedRun {
    const known = this.runs.find((held) => held.tick === run.tick);
    if (known) return known;
    this.runs.push(run);
    this.runs.sort((a, b) => a.tick - b.tick);
    return run;
  }

  /** `run` is held by a take-back mark until `until` (see StagedRun.heldUntil), then pulled. */
  hold(run: StagedRun, until: number): void {
    run.takingBack = 'rescheduled';
    run.heldUntil = until;
  }

  /** An edit owes `run` again: its hold is lifted, and it runs as staged. */
  restored(run: StagedRun): void {
    run.takingBack = undefined;
    run.heldUntil = undefined;
  }

  /** The earliest instant a held run is to be pulled at, or undefined when none is held. */
  nextHeldUntil(): number | undefined {
    let earliest: number | undefined;
    for (const run of this.runs) if (run.heldUntil !== undefined) earliest = Math.min(earliest ?? Infinity, run.heldUntil);
    return earliest;
  }

  /** `run` was taken back, or found promoted: it is no longer held. */
  settled(run: StagedRun): void {
    this.runs = this.runs.filter((other) => other !== run);
  }
}
