import type { ScheduledJob } from '../scheduling/define-job.js';
import { jitterMs, nextTick } from '../scheduling/plan.js';
import type { LaneTerm } from './lane-term.js';
import { owesAgain, type StagedRuns } from './staged-runs.js';

/**
 * A runtime schedule's lane takes up the revision `job` was compiled from (an edit, or the lane's first
 * turn after a takeover left held runs to decide). From the write on, workers hold every staged run of the
 * schedule (stagedRunMayStart.lua), so no run the revision does not owe starts while its leader has yet
 * to hear of it. The lane reads from the ledger every run staged of a tick after the write (its own memory
 * has dropped those that came due before it heard): each one the revision does not have is held by a
 * take-back mark until its tick, when it is pulled under the revision stored then (see
 * JobLane.reviewStaged); each one an earlier revision held that this one has again gets its mark lifted
 * (restoreStaged.lua). Only then is the revision approved, and workers start its runs again. The runs
 * held are added to `staged`. False when the term cannot write now, or is over.
 */
export async function takeUpRevision(term: LaneTerm, job: ScheduledJob, staged: StagedRuns): Promise<boolean> {
  const revision = job.revision!;
  const records = await term.ledger.recordsFrom(job.name, job.definedAt! + 1);
  term.reached();
  for (const { tick, state } of records) {
    const held = state.kind === 'unstaging' && state.reason === 'rescheduled';
    if (state.kind !== 'enqueued' && !held) continue;
    const run = staged.track({ tick, jobId: state.jobId, queue: held ? state.queue : job.queue, dueAt: tick + jitterMs(job, tick) });
    if (held && owesAgain(job, tick)) {
      if (!term.leading()) return false;
      const restored = await term.ledger.restoreStaged(term.token, job.name, tick, state.jobId);
      term.reached();
      if (restored === 'fenced') return fenced(term);
      staged.restored(run);
      term.log.child({ job: job.name }).info({ tick: new Date(tick), revision }, 'an edit owes a staged run held for a take-back again: it runs');
    } else if (!held && nextTick(job, tick - 1) !== tick) {
      if (!term.leading()) return false;
      const marked = await term.ledger.markUnstaging(term.token, job.name, tick, state.jobId, 'rescheduled', run.queue);
      term.reached();
      if (marked === 'fenced') return fenced(term);
      if (marked === 'marked') staged.hold(run, Math.max(run.dueAt, tick));
    } else if (held) {
      staged.hold(run, run.heldUntil ?? run.dueAt);
    }
  }
  if (!term.leading()) return false;
  if (!(await term.markReviewed(job.name, revision))) return fenced(term);
  term.reached();
  return true;
}

function fenced(term: LaneTerm): false {
  term.fenced();
  return false;
}
