import type { ScheduledJob } from '../scheduling/define-job.js';
import type { EndedVersion } from '../scheduling/plan.js';
import { JOB_DEFAULTS } from '../scheduling/schema.js';
import { MIN_RETENTION_MS } from './fenced-enqueue.js';
import type { LaneTerm } from './lane-term.js';
import { takeBackInProgress } from '../ledger/records.js';
import type { TakeOverState } from '../ledger/tick-ledger.js';
import type { RuntimeScheduleSource } from './runtime-schedules.js';
import { recordRemovedSpan } from './removed-span.js';
import type { StagedRun } from './staging.js';

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
 * take-back an earlier term left unfinished. Their lanes would have done it had they existed. The
 * ledger's names are read a page at a time. Returns how many runs it took back; throws to be retried.
 */
export async function takeBackRemovedJobs(
  term: LaneTerm,
  files: ReadonlyMap<string, ScheduledJob>,
  schedules: RuntimeScheduleSource | undefined,
): Promise<number> {
  const queues = queuesOf(files);
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
      const states = await term.ledger.takeOverStates(batch.map((job) => ({ job, stagedWithinMs: STAGED_LOOKBACK_MS })), term.now());
      for (const [index, { state, pending, recent }] of states.entries()) {
        const job = batch[index]!;
        // Before the removed span is recorded: that forgets the removed versions, which name its queue.
        const left = await takeBackLeftRuns(term, job, { pending, recent }, { candidates: queues, own: ownQueueOf(term, job, undefined) }, async () => !term.job(job) && (await gone([job])).length > 0);
        if (left === undefined) return takenBack;
        takenBack += left;
        // Removed while no leader ran (or none kept up): the ticks it owed up to the removal are recorded.
        if (schedules && !(await recordRemovedSpan(term, job, state.lastScheduledTick))) return takenBack;
      }
      term.reached();
    }
  }
  return takenBack;
}

/**
 * Takes back what job `job`, removed during this term, may have left in BullMQ that its lane did not
 * know of: the term's sweep of removed jobs ran while it still stood, and its lane took back only the
 * runs it had staged or found at its takeover (none, if it ended before one). A claim whose confirm the
 * lane was retrying, or a run an earlier term staged, would otherwise stay in BullMQ, where workers hold
 * it for ever (no leader reviews a removed job). `ownQueue` is the queue of the job's last definition, when
 * its lane knows it. True once done; false when the term cannot write (its end, or the fence); throws to be
 * retried.
 */
export async function takeBackRemovedJob(term: LaneTerm, job: string, files: ReadonlyMap<string, ScheduledJob>, ownQueue: string | undefined): Promise<boolean> {
  const [left] = await term.ledger.takeOverStates([{ job, stagedWithinMs: STAGED_LOOKBACK_MS }], term.now());
  term.reached();
  const queues = { candidates: queuesOf(files), own: ownQueueOf(term, job, ownQueue) };
  const takenBack = await takeBackLeftRuns(term, job, left!, queues, () => Promise.resolve(!term.job(job)));
  if (takenBack) term.log.info({ job, takenBack }, 'took back the runs a removed job left that its lane had not staged');
  return takenBack !== undefined;
}

/**
 * The queues a removed job's runs are looked for in: its own is not known any more, so the queue a
 * definition uses when it names none first, then those of the loaded jobs (a schedule's job type is one).
 */
function queuesOf(files: ReadonlyMap<string, ScheduledJob>): string[] {
  return [...new Set([JOB_DEFAULTS.queue, ...[...files.values()].map((job) => job.queue)])];
}

/**
 * The queue a removed runtime schedule's runs were added to, by its newest ended version (the removal):
 * its job type's, when the job files define that type. Undefined when no version is kept (a file job,
 * or a removal already accounted for) or its type is gone: its queue would only be a guess.
 */
function queueOfEnded(versions: readonly EndedVersion[]): string | undefined {
  const job = versions.at(-1)?.job;
  return job && (job.handler ?? job.flow) ? job.queue : undefined;
}

/**
 * The removed job's own queue: `known` (its lane's last definition), else read from its removed versions,
 * once, and only when asked (a claim found in no candidate queue): most removed jobs leave none.
 */
function ownQueueOf(term: LaneTerm, job: string, known: string | undefined): () => Promise<string | undefined> {
  let own: Promise<string | undefined> | undefined;
  return () => (own ??= known !== undefined ? Promise.resolve(known) : term.replacedVersions(job).then(queueOfEnded));
}

/** Where a removed job's runs are looked for: `candidates` to find them in; `own`, its queue when known. */
interface RemovedJobQueues {
  candidates: string[];
  own: () => Promise<string | undefined>;
}

/**
 * Takes back the runs a removed job may have left in BullMQ as staged, by its ledger: those recorded
 * enqueued, and those of claims their term left unconfirmed (the add may have landed); take-backs marked
 * and not settled are finished. `stillGone` is asked before each: a job loaded or written again
 * meanwhile is its own lane's to decide. Returns how many runs it took back, or undefined when the term
 * cannot write (its end, or the fence).
 */
async function takeBackLeftRuns(
  term: LaneTerm,
  job: string,
  left: Pick<TakeOverState, 'pending' | 'recent'>,
  queues: RemovedJobQueues,
  stillGone: () => Promise<boolean>,
): Promise<number | undefined> {
  let takenBack = 0;
  const runs: Array<{ tick: number; jobId: string; claimOnly: boolean }> = [];
  for (const { tick, state: recorded } of left.pending) {
    const progress = takeBackInProgress(recorded);
    if (progress) {
      if ((await term.takeBack.finish(job, tick, progress, MIN_RETENTION_MS)) === 'taken-back') takenBack++;
    } else if (recorded.kind === 'claimed' || recorded.kind === 'buffered') {
      runs.push({ tick, jobId: recorded.jobId, claimOnly: true });
    }
  }
  for (const { tick, state: recorded } of left.recent) if (recorded.kind === 'enqueued') runs.push({ tick, jobId: recorded.jobId, claimOnly: false });
  for (const { tick, jobId, claimOnly } of runs) {
    const queue = (await stagedIn(term, queues.candidates, { tick, jobId, dueAt: tick })) ?? (claimOnly ? await neverAdded(term, queues.own, jobId) : undefined);
    if (!queue || !(await stillGone())) continue;
    if (!(await term.waitLeading())) return undefined;
    const outcome = await term.takeBack.takeBack(term.token, job, { tick, jobId, queue, dueAt: tick }, 'removed', MIN_RETENTION_MS, claimOnly);
    if (outcome === 'fenced') {
      term.fenced();
      return undefined;
    }
    if (outcome === 'taken-back') takenBack++;
  }
  return takenBack;
}

/**
 * The job's own queue (`own`, when known) when the claimed run `jobId` is not in it: its add never landed
 * (its term ended first, or a failover lost it), though it may still be on the wire. Taken back there, the
 * pull leaves a placeholder of its id that such an add cannot pass, and the tick is recorded skipped. In a
 * queue only guessed, a placeholder would stop nothing, so a claim of a job whose queue is not known stays
 * pending.
 */
async function neverAdded(term: LaneTerm, own: () => Promise<string | undefined>, jobId: string): Promise<string | undefined> {
  const queue = await own();
  return queue !== undefined && !(await term.takeBack.added({ jobId, queue })) ? queue : undefined;
}

/**
 * The queue (of `queues`) where the run waits as staged, never started, if any: in the delayed set before
 * its due time, or, once due, in the wait list, or held by a worker (which hands a staged run of a job no
 * leader has reviewed back each second: a removed job's is never reviewed, so only its take-back ends it).
 */
async function stagedIn(term: LaneTerm, queues: string[], run: Omit<StagedRun, 'queue'>): Promise<string | undefined> {
  for (const queue of queues) if (await term.takeBack.waitingStaged({ ...run, queue })) return queue;
  return undefined;
}
