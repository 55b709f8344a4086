import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { QueueSet } from './queue-set.js';
import type { FencingToken, TickLedger, UnstageReason } from './tick-ledger.js';

/** How far ahead of its due time a tick is staged by default: the producer's `stageAheadMs`. */
export const DEFAULT_STAGE_AHEAD_MS = 2_000;

/** A run added to BullMQ as a delayed job ahead of its tick, whose due time may not have come yet. */
export interface StagedRun {
  tick: number;
  jobId: string;
  /** The queue it was added to (the definition may name another by now). */
  queue: string;
  /** When BullMQ makes it available to workers: the tick plus its jitter. */
  dueAt: number;
}

/** A take-back that some term started and did not finish, as its ledger state records it. */
export interface TakeBackInProgress {
  stage: 'unstaging' | 'unstaged';
  reason: UnstageReason;
  jobId: string;
  queue: string;
}

/** Reads `unstaging|<reason>|<jobId>|<queue>` or `unstaged|…` (the queue last: only it may hold a '|'). */
export function takeBackInProgress(state: string): TakeBackInProgress | undefined {
  const match = /^(unstaging|unstaged)\|([^|]*)\|([^|]*)\|(.*)$/s.exec(state);
  if (!match) return undefined;
  return { stage: match[1] as TakeBackInProgress['stage'], reason: match[2] as UnstageReason, jobId: match[3]!, queue: match[4]! };
}

/**
 * Takes back staged runs that a run-time pause, a removed job or a new schedule no longer wants. The
 * race with BullMQ's promotion of the delayed job is decided by BullMQ's own delayed set: the run is
 * taken back only if this removes it from that set (then no worker can ever see it); otherwise it was
 * promoted first and runs as staged, like a tick that was due before the pause. Each step is recorded
 * in the ledger before the next is taken, so a leader that dies halfway leaves the next one a record
 * that says where to go on ({@link finish}); no step ever has to guess whether a vanished job ran.
 */
export class RunTakeBack {
  /** `redis` reaches the queues' Redis (on Cluster, the cluster: BullMQ's keys are in another slot). */
  constructor(
    private readonly redis: Redis,
    private readonly ledger: TickLedger,
    private readonly queues: QueueSet,
  ) {}

  /**
   * Takes back one staged run, under the fence: `taken-back` (it will never run; recorded skipped for
   * `reason`), `runs` (promoted first), `settled` (its record is not this run's `enqueued` any more) or
   * `fenced` (a newer term exists; nothing was done).
   */
  async takeBack(token: FencingToken, job: string, run: StagedRun, reason: UnstageReason): Promise<'taken-back' | 'runs' | 'settled' | 'fenced'> {
    const marked = await this.ledger.markUnstaging(token, job, run.tick, run.jobId, reason, run.queue);
    if (marked !== 'marked') return marked;
    return this.finish(job, run.tick, { stage: 'unstaging', reason, jobId: run.jobId, queue: run.queue });
  }

  /** Carries a marked take-back to its end, from the stage its record shows (this term's or an earlier one's). */
  async finish(job: string, tick: number, progress: TakeBackInProgress): Promise<'taken-back' | 'runs'> {
    const queue = this.queues.get(progress.queue);
    if (progress.stage === 'unstaging') {
      // An earlier term may have pulled it and died before recording so: its hash is then in no list.
      const outOfReach = (await this.pullFromDelayed(queue, progress.jobId)) || (await this.orphaned(queue, progress.jobId));
      if (!outOfReach) {
        await this.ledger.settleUnstaging(job, tick, 'runs');
        return 'runs';
      }
      await this.ledger.settleUnstaging(job, tick, 'taken-back');
    }
    // In none of BullMQ's lists: removing it deletes only its hash and its deduplication key.
    await queue.remove(progress.jobId);
    await this.ledger.settleUnstaging(job, tick, 'cleaned');
    return 'taken-back';
  }

  /** Removes the job from BullMQ's delayed set: true when it was there, so no worker will ever take it. */
  private async pullFromDelayed(queue: Queue, jobId: string): Promise<boolean> {
    return (await this.redis.zrem(queue.keys.delayed!, jobId)) === 1;
  }

  /** The job's hash exists but it is in none of BullMQ's lists (checked in this order: a list move is atomic, a hash is never re-created). */
  private async orphaned(queue: Queue, jobId: string): Promise<boolean> {
    if ((await queue.getJobState(jobId)) !== 'unknown') return false;
    return (await this.redis.exists(queue.toKey(jobId))) === 1;
  }
}
