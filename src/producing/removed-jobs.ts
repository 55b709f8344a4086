import type { ScheduledJob } from '../scheduling/define-job.js';
import { JOB_DEFAULTS } from '../scheduling/schema.js';
import { MIN_RETENTION_MS } from './fenced-enqueue.js';
import type { LaneTerm } from './lane-term.js';
import type { QueueSet } from '../redis/queue-set.js';
import { takeBackInProgress } from '../ledger/records.js';
import type { RuntimeScheduleSource } from './runtime-schedules.js';
import { recordRemovedSpan } from './removed-span.js';

/** Jobs read per takeover script. */
const BATCH = 500;
/**
 * How far back a removed job's runs are looked for in BullMQ's delayed sets: its definition (and so its
 * jitter) is gone, and a staged run is never further than its jitter behind its tick.
 */
const STAGED_LOOKBACK_MS = 60_000;

/**
 * At the start of a term, takes back the staged runs of jobs the ledger knows that are neither loaded
 * from the job files nor stored as runtime schedules: a job removed by a deploy (the old leader staged
 * its next runs, the new one never saw it), a schedule removed while no leader ran, or one whose
 * take-back an earlier term left unfinished. Their lanes would have done it had they existed. A removed
 * job's runs are looked for in the queues of the loaded jobs and the default queue (its own queue is not
 * known any more). The ledger's names are read a page at a time. Returns how many runs it took back;
 * throws to be retried.
 */
export async function takeBackRemovedJobs(
  term: LaneTerm,
  queueSet: QueueSet,
  files: ReadonlyMap<string, ScheduledJob>,
  schedules: RuntimeScheduleSource | undefined,
): Promise<number> {
  // The queue a definition uses when it names none first, then those of the loaded jobs.
  const queues = [...new Set([JOB_DEFAULTS.queue, ...[...files.values()].map((job) => job.queue)])];
  const gone = async (names: string[]): Promise<string[]> => {
    const candidates = names.filter((name) => !files.has(name));
    const stored = schedules ? await schedules.stored(candidates) : candidates.map(() => false);
    return candidates.filter((_, i) => !stored[i]);
  };
  let takenBack = 0;
  for await (const page of term.ledger.knownJobPages()) {
    term.reached();
    const removed = await gone(page);
    for (let i = 0; i < removed.length; i += BATCH) {
      const batch = removed.slice(i, i + BATCH);
      const now = term.now();
      const states = await term.ledger.takeOverStates(batch.map((job) => ({ job, stagedWithinMs: STAGED_LOOKBACK_MS })), now);
      for (const [index, state] of states.entries()) {
        const job = batch[index]!;
        // Removed while no leader ran (or none kept up): the ticks it owed up to the removal are recorded.
        if (schedules && !(await recordRemovedSpan(term, job, state.state.lastScheduledTick))) return takenBack;
        for (const { tick, state: recorded } of state.pending) {
          const progress = takeBackInProgress(recorded);
          if (progress && (await term.takeBack.finish(job, tick, progress, MIN_RETENTION_MS)) === 'taken-back') takenBack++;
        }
        for (const { tick, state: recorded } of state.recent) {
          if (recorded.kind !== 'enqueued') continue;
          const { jobId } = recorded;
          const queue = await delayedIn(queueSet, queues, jobId);
          // Loaded or written again meanwhile: its own lane decides.
          if (!queue || term.job(job) || (await gone([job])).length === 0) continue;
          if (!(await term.waitLeading())) return takenBack;
          const outcome = await term.takeBack.takeBack(term.token, job, { tick, jobId, queue, dueAt: tick }, 'removed', MIN_RETENTION_MS);
          if (outcome === 'fenced') {
            term.fenced();
            return takenBack;
          }
          if (outcome === 'taken-back') takenBack++;
        }
      }
      term.reached();
    }
  }
  return takenBack;
}

/** The queue (of `queues`) in whose delayed set the run waits, if any. */
async function delayedIn(set: QueueSet, queues: string[], jobId: string): Promise<string | undefined> {
  for (const queue of queues) if ((await set.get(queue).getJobState(jobId)) === 'delayed') return queue;
  return undefined;
}
