import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { LuaScript } from '../util/lua.js';
import type { WritePath } from '../redis/durability.js';
import { stagingTerm, type TickJobData } from '../ledger/job-data.js';
import type { QueueSet } from '../redis/queue-set.js';
import { PullCode, scriptCode } from '../ledger/script-codes.js';
import type { TakeBackInProgress } from '../ledger/records.js';
import type { FencingToken, TickLedger, UnstageReason } from '../ledger/tick-ledger.js';

const pullStagedRunScript = new LuaScript(new URL('./lua/pullStagedRun.lua', import.meta.url));

/** How far ahead of its due time a tick is staged by default: the producer's `stageAheadMs`. */
export const DEFAULT_STAGE_AHEAD_MS = 2_000;

/**
 * While a worker holds a run unstarted (see pullStagedRun.lua), the pull is asked again this often, for
 * at most {@link HELD_WAIT_MS}. A live worker lets go within a few round trips (it hands the run back, or
 * starts it); one that died holding it keeps it until BullMQ's stalled-job recovery, so past that the
 * take-back fails with {@link RunHeldError} and its caller retries it later (its mark stands meanwhile).
 */
const HELD_RETRY_MS = 20;
const HELD_WAIT_MS = 2_000;

/** A take-back could not be decided yet: a worker holds the run, unstarted. Retry the take-back later. */
export class RunHeldError extends Error {
  override readonly name = 'RunHeldError';
  constructor(readonly jobId: string) {
    super(`the take-back of ${jobId} is not decided yet: a worker has held it unstarted for ${HELD_WAIT_MS} ms`);
  }
}

/** A run added to BullMQ as a delayed job ahead of its tick, whose due time may not have come yet. */
export interface StagedRun {
  tick: number;
  jobId: string;
  /** The queue it was added to (the definition may name another by now). */
  queue: string;
  /** When BullMQ makes it available to workers: the tick plus its jitter. */
  dueAt: number;
  /**
   * Set once a take-back started: it is carried to its end however late that is, but for a runtime
   * schedule's `rescheduled` one, which only holds the run until its tick (see heldUntil).
   */
  takingBack?: UnstageReason;
  /**
   * A runtime schedule's run its revision does not owe: marked (workers hold it), and pulled from this
   * instant on (its due time, or a retry after the revision changed), under the revision then stored. An
   * edit before then that owes the tick again lifts the mark (restoreStaged.lua).
   */
  heldUntil?: number;
}

// A take-back that some term marked and did not settle, as its ledger record says (an `unstaging` record).
export { takeBackInProgress, type TakeBackInProgress } from '../ledger/records.js';

export interface RunTakeBackOptions {
  /**
   * Writes to the queues' Redis (on Cluster, BullMQ's slot is usually on another node than the ledger's),
   * confirmed on replicas on the durable topologies: the pull must outlive a failover before it is recorded.
   */
  writes: WritePath;
  /** Reads the queues' Redis. */
  redis: Redis;
  ledger: TickLedger;
  queues: QueueSet;
  /** Called for each run taken back (recorded skipped for `reason`): the skip metrics. */
  onTakenBack?: (job: string, reason: UnstageReason) => void;
}

/**
 * Takes back staged runs that a run-time pause, a removed job, a new schedule or (for a run that came due
 * with no worker starting it) the catch-up policy no longer wants. The race with the workers is decided in
 * BullMQ's slot by pullStagedRun.lua: the run is taken back only if it is pulled from where it waits
 * before its handler ever started (then no worker can take it); otherwise it runs (or ran) as staged, like
 * a tick that was due before the pause. The mark is
 * recorded under the fence before the pull, and the outcome after it, so a leader that dies in between
 * leaves the next one a record to finish from: a pulled run's hash stays in no list, which tells.
 */
export class RunTakeBack {
  constructor(private readonly options: RunTakeBackOptions) {}

  /**
   * Takes back one staged run, under the fence: `taken-back` (it will never run; recorded skipped for
   * `reason`), `runs` (promoted or started first), `settled` (its record is not this run's `enqueued`
   * any more) or `fenced` (a newer term exists; nothing was done). Safe to call again after a failure.
   * A pulled run's job hash is kept `keepMs` (the job's deduplication window; see pullStagedRun.lua).
   * `claimOnly`: the tick may be still only claimed by the run's job id (its add landed, its confirm did not).
   * `revision`: a runtime schedule's revision that lacks the tick; `changed` when another is stored now, or
   * the tick has not come (see markUnstaging.lua): nothing was done.
   */
  async takeBack(
    token: FencingToken,
    job: string,
    run: StagedRun,
    reason: UnstageReason,
    keepMs: number,
    claimOnly = false,
    revision = '',
  ): Promise<'taken-back' | 'runs' | 'settled' | 'fenced' | 'changed'> {
    const marked = await this.options.ledger.markUnstaging(token, job, run.tick, run.jobId, reason, run.queue, claimOnly, revision);
    if (marked !== 'marked') return marked;
    return this.finish(job, run.tick, { reason, jobId: run.jobId, queue: run.queue }, keepMs);
  }

  /**
   * Carries a marked take-back (this term's, or one an earlier term left) to its end. Throws
   * {@link RunHeldError} while a worker holds the run unstarted: the race is not decided yet.
   */
  async finish(job: string, tick: number, progress: TakeBackInProgress, keepMs: number): Promise<'taken-back' | 'runs'> {
    const queue = this.options.queues.get(progress.queue);
    // An earlier term may have pulled it and died before recording so: its hash is then in no list.
    const pulled = (await this.pullOnceLetGo(queue, progress.jobId, keepMs)) || (await this.orphaned(queue, progress.jobId));
    const outcome = pulled ? 'taken-back' : 'runs';
    if (!(await this.options.ledger.settleUnstaging(job, tick, outcome))) {
      // Another term settled it first (it found the mark at its takeover): its record stands, and so
      // does what it counted. Both read the same BullMQ state, so they agree on the outcome.
      return outcome;
    }
    if (pulled) this.options.onTakenBack?.(job, progress.reason);
    return outcome;
  }

  /**
   * Whether `run` was added ahead of its tick (its data says when it is due) and its handler never started:
   * what a take-back could still pull (see pullStagedRun.lua). With `earlierThan`, only a run an earlier
   * term staged: not one that term added itself, unless it finished an earlier term's claim (`stagedBy`).
   */
  async waitingStaged(run: StagedRun, earlierThan?: FencingToken): Promise<boolean> {
    const queue = this.options.queues.get(run.queue);
    const [data, attempts, starts] = await this.options.redis.hmget(queue.toKey(run.jobId), 'data', 'atm', 'leasebeatStarts');
    if (data === null || data === undefined || Number(attempts ?? 0) > 0 || Number(starts ?? 0) > 0) return false;
    const parsed = JSON.parse(data) as Partial<TickJobData>;
    const stager = stagingTerm(parsed);
    if (earlierThan && stager?.generation === earlierThan.generation && stager.leaderTransitions === earlierThan.leaderTransitions) return false;
    return parsed.dueAt !== undefined;
  }

  /** Whether BullMQ holds a hash of the run: its add landed (or a take-back left its placeholder). */
  async added(run: Pick<StagedRun, 'jobId' | 'queue'>): Promise<boolean> {
    return (await this.options.redis.exists(this.options.queues.get(run.queue).toKey(run.jobId))) === 1;
  }

  /** Whether BullMQ's record of the run says it was added before `instant` (its `timestamp`). */
  async addedBefore(run: StagedRun, instant: number): Promise<boolean> {
    const timestamp = await this.options.redis.hget(this.options.queues.get(run.queue).toKey(run.jobId), 'timestamp');
    return timestamp !== null && Number(timestamp) < instant;
  }

  /**
   * Pulls the run (see pullStagedRun.lua): true once pulled, false when it is not waiting unstarted. A run
   * a worker holds unstarted is neither: a worker hands a due staged run back each second, for a moment,
   * until a leader has reviewed its job, and this take-back is part of that review. So it waits for the
   * worker to let go of it: handed back, it is pulled; started, it runs.
   */
  private async pullOnceLetGo(queue: Queue, jobId: string, keepMs: number): Promise<boolean> {
    const deadline = performance.now() + HELD_WAIT_MS;
    for (;;) {
      const code = await this.pull(queue, jobId, keepMs);
      if (code !== PullCode.Held) return code === PullCode.Pulled;
      if (performance.now() >= deadline) throw new RunHeldError(jobId);
      await sleep(HELD_RETRY_MS);
    }
  }

  private async pull(queue: Queue, jobId: string, keepMs: number): Promise<(typeof PullCode)[keyof typeof PullCode]> {
    const keys = [queue.keys.delayed!, queue.toKey(jobId), queue.keys.wait!, queue.keys.prioritized!, queue.keys.active!];
    const reply = await this.options.writes.script<number>(pullStagedRunScript, keys, [jobId, keepMs], (code) => (code === PullCode.Pulled ? `take-back of ${jobId}` : undefined));
    return scriptCode('pullStagedRun', PullCode, reply);
  }

  /** The job's hash exists but it is in none of BullMQ's lists (checked in this order: a list move is atomic, a hash is never re-created). */
  private async orphaned(queue: Queue, jobId: string): Promise<boolean> {
    if ((await queue.getJobState(jobId)) !== 'unknown') return false;
    return (await this.options.redis.exists(queue.toKey(jobId))) === 1;
  }
}
