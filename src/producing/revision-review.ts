import type { ScheduledJob } from '../scheduling/define-job.js';
import { jitterMs, nextTick, type EndedVersion } from '../scheduling/plan.js';
import type { LaneTerm } from './lane-term.js';
import type { StagedRuns } from './staged-runs.js';

/**
 * A runtime schedule's lane takes up the revision `job` was compiled from (after an edit, or a takeover
 * that found writes no leader approved). From each write on, workers hold every staged run of the
 * schedule (stagedRunMayStart.lua), so no run the version in force at its tick does not owe starts
 * while its leader has yet to hear of that version. The lane reads from the ledger every run staged of
 * a tick after the last approved write (its own memory has dropped those that came due before it
 * heard), and decides each by the version in force at its tick: this revision for a tick after its
 * write, else the version the chain of replaced ones (`replacedVersions`) says stood then (the lane may
 * have heard of several writes at once). A run that version lacks is held by a take-back mark until its
 * tick, when it is pulled under the revision stored then (see JobLane.reviewStaged); a run an earlier
 * revision held that the version in force has is restored (restoreStaged.lua). Only then is the revision
 * approved, and workers start its runs again. The runs held are added to `staged`. False when the term
 * cannot write now, or is over.
 */
export async function takeUpRevision(term: LaneTerm, job: ScheduledJob, staged: StagedRuns): Promise<boolean> {
  const revision = job.revision!;
  const since = reviewedAfter(job, (await term.ledger.jobState(job.name)).approvedRevision);
  const [records, replaced] = await Promise.all([term.ledger.recordsFrom(job.name, since + 1), since < job.definedAt! ? term.replacedVersions(job.name) : []]);
  term.reached();
  for (const { tick, state } of records) {
    const held = state.kind === 'unstaging' && state.reason === 'rescheduled';
    if (state.kind !== 'enqueued' && !held) continue;
    const run = staged.track({ tick, jobId: state.jobId, queue: held ? state.queue : job.queue, dueAt: tick + jitterMs(job, tick) });
    const owed = owedAt(job, replaced, tick);
    if (held && owed) {
      if (!term.leading()) return false;
      const restored = await term.ledger.restoreStaged(term.token, job.name, tick, state.jobId);
      term.reached();
      if (restored === 'fenced') return fenced(term);
      staged.restored(run);
      term.log.child({ job: job.name }).info({ tick: new Date(tick), revision }, 'a version in force at a held tick owes it: its staged run runs');
    } else if (!held && !owed) {
      if (!term.leading()) return false;
      const marked = await term.ledger.markUnstaging(term.token, job.name, tick, state.jobId, 'rescheduled', run.queue);
      term.reached();
      if (marked === 'fenced') return fenced(term);
      if (marked === 'marked') staged.hold(run, run.dueAt);
    } else if (held) {
      staged.hold(run, run.heldUntil ?? run.dueAt);
    }
  }
  if (!term.leading()) return false;
  if (!(await term.markReviewed(job.name, revision))) return fenced(term);
  term.reached();
  return true;
}

/**
 * Whether the version in force at `tick` has it: `job` for a tick after its write, else the replaced
 * version written last before the tick (`job` again when the chain no longer holds it).
 */
function owedAt(job: ScheduledJob, replaced: readonly EndedVersion[], tick: number): boolean {
  if (tick > job.definedAt!) return nextTick(job, tick - 1) === tick;
  const stood = replaced.find((version) => version.definedAt < tick && tick <= version.endedAt);
  // A version that no longer compiles owes nothing a leader could run.
  const by = stood ? stood.job : job;
  return by !== undefined && nextTick(by, tick - 1) === tick;
}

/**
 * The instant after which `job`'s takeUpRevision decides the staged runs, given the revision a leader
 * approved last: that one's write, when it is older than `job`'s (none, or a removal's '': `job`'s own).
 */
export function reviewedAfter(job: ScheduledJob, approvedRevision: string | undefined): number {
  const at = Number(approvedRevision?.split('|')[1]);
  return Number.isFinite(at) && at < job.definedAt! ? at : job.definedAt!;
}

function fenced(term: LaneTerm): false {
  term.fenced();
  return false;
}
