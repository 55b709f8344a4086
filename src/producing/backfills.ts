import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { WritePath } from '../redis/durability.js';
import { LEADER_STREAM_MAXLEN, type KeySpace } from '../redis/keys.js';
import type { QueueSet } from '../redis/queue-set.js';
import { tickJobId } from '../ledger/job-data.js';
import type { BackfillStep, BackfillStepOutcome } from '../ledger/tick-ledger.js';
import type { ScheduledJob } from '../scheduling/define-job.js';
import { nextTicks, withTicksBeforeCreation } from '../scheduling/plan.js';
import { Pacer } from '../util/pacer.js';
import type { DeskTerm } from './manual-triggers.js';

/**
 * How backfill runs may overlap one another (the live ticks' overlap policy is the job's own): `allow`
 * adds them at the rate; `skip` records a tick skipped (`overlap`) while the previous backfill run is
 * unfinished; `bufferAll` adds one at a time, the next once the previous has finished.
 */
export const BACKFILL_OVERLAPS = ['allow', 'skip', 'bufferAll'] as const;
export type BackfillOverlap = (typeof BACKFILL_OVERLAPS)[number];

/** Where a backfill stands: waiting for a leader, being run, ended. */
export type BackfillState = 'queued' | 'running' | 'done' | 'failed';

/** What an operator asked for (see `Admin.backfill`), as stored. */
export interface BackfillRequest {
  job: string;
  /** The range's first and last instants (ms), both included. */
  from: number;
  to: number;
  overlap: BackfillOverlap;
  /** Runs added per second, at most. */
  rate: number;
  includeSkipped: boolean;
  by: string;
  /** How many nominal ticks the range holds. */
  total: number;
}

/** A backfill and how far it has come, as `admin.backfills(job)` returns it. */
export interface BackfillProgress extends Omit<BackfillRequest, 'from' | 'to'> {
  id: string;
  from: string;
  to: string;
  requestedAt: string;
  state: BackfillState;
  /** Ticks decided so far, of `total`. */
  done: number;
  /** Runs added (claimed) by this backfill. */
  enqueued: number;
  /**
   * Ticks listed, not run: `ran` (the ledger has a run of it), `skipped` (recorded skipped; run with
   * `includeSkipped`), `pruned` (its record was pruned, so it may have run: never run again), `later`
   * (at or near the job's watermark: the live lane's to decide), `overlapSkipped` (skipped by this backfill
   * while its previous run was unfinished, overlap `skip`).
   */
  listed: { ran: number; skipped: number; pruned: number; later: number; overlapSkipped: number };
  /** Why it failed (state `failed`). */
  error?: string;
}

/** How many ticks one listing step decides at most (one script; the ticks needing no run cost no pacing). */
const LIST_BATCH = 200;
/** How often a backfill looks again at its previous run (overlap skip, bufferAll) or at a pause. */
const RECHECK_MS = 250;
const PAUSED_RECHECK_MS = 1_000;
const RETRY_MS = 500;
const MAX_RETRY_MS = 10_000;

const UNFINISHED = new Set(['active', 'waiting', 'delayed', 'prioritized', 'waiting-children']);

/** Stores a backfill request and tells the leader of it on its stream; returns its id. */
export async function submitBackfill(redis: Redis, keys: KeySpace, writes: WritePath, request: BackfillRequest, requestedAt: number): Promise<string> {
  const id = randomUUID();
  const fields = {
    id,
    ...request,
    includeSkipped: request.includeSkipped ? '1' : '0',
    requestedAt,
    state: 'queued',
    // The newest tick decided: none yet.
    cursor: request.from - 1,
    done: 0,
  };
  await writes.write(
    keys.backfill(id),
    () =>
      redis
        .multi()
        .hset(keys.backfill(id), fields)
        .zadd(keys.backfills(request.job), requestedAt, id)
        .zadd(keys.backfillQueue, requestedAt, id)
        .xadd(keys.triggers, 'MAXLEN', '~', LEADER_STREAM_MAXLEN, '*', 'notice', 'backfill', 'id', id)
        .exec(),
    () => `backfill ${id} of ${request.job}`,
  );
  return id;
}

/** One backfill as stored, or undefined when there is none of that id. */
export async function readBackfill(redis: Redis, keys: KeySpace, id: string): Promise<BackfillProgress | undefined> {
  const f = await redis.hgetall(keys.backfill(id));
  if (f.id === undefined) return undefined;
  const count = (name: string): number => Number(f[name] ?? 0);
  const progress: BackfillProgress = {
    id,
    job: f.job ?? '',
    from: new Date(Number(f.from)).toISOString(),
    to: new Date(Number(f.to)).toISOString(),
    overlap: (f.overlap ?? 'allow') as BackfillOverlap,
    rate: count('rate'),
    includeSkipped: f.includeSkipped === '1',
    by: f.by ?? '',
    total: count('total'),
    requestedAt: new Date(Number(f.requestedAt)).toISOString(),
    state: (f.state ?? 'queued') as BackfillState,
    done: count('done'),
    enqueued: count('enqueued'),
    listed: { ran: count('ran'), skipped: count('skipped'), pruned: count('pruned'), later: count('later'), overlapSkipped: count('overlapSkipped') },
  };
  if (f.error) progress.error = f.error;
  return progress;
}

/** A job's backfills, newest first. */
export async function jobBackfills(redis: Redis, keys: KeySpace, job: string): Promise<BackfillProgress[]> {
  const ids = await redis.zrevrange(keys.backfills(job), 0, -1);
  const found = await Promise.all(ids.map((id) => readBackfill(redis, keys, id)));
  return found.filter((progress) => progress !== undefined);
}

/** A stored backfill as its executor needs it. */
interface Stored {
  id: string;
  job: string;
  to: number;
  overlap: BackfillOverlap;
  rate: number;
  includeSkipped: boolean;
  cursor: number;
  lastRunId: string | undefined;
  state: string;
}

/**
 * The leader's side of `leasebeat backfill`: runs every backfill not ended, one job's one at a time
 * (oldest first), under the term's fence, beside the lanes. Everything it knows is in Redis (the request,
 * its cursor, its pending claims), so a backfill a leader left half done is resumed by the next one where it
 * stood. Its Redis calls are its own (not the lanes' batches) and paced by the backfill's rate, and its
 * listing of ticks that need no run goes a batch per script: the live ticks stay on time.
 */
export class BackfillDesk {
  /** The runner of each job that has backfills to run. */
  private readonly runners = new Map<string, Promise<void>>();
  /** Jobs told of a new backfill while their runner ran: it looks at the queue again before it ends. */
  private readonly told = new Set<string>();

  constructor(
    private readonly redis: Redis,
    private readonly keys: KeySpace,
    private readonly term: DeskTerm,
    private readonly queues: QueueSet,
  ) {}

  /** Starts the backfills not ended; resolves once the term has ended and every runner has stopped. */
  async run(): Promise<void> {
    await this.retrying('reading the backfill queue', () => this.scan());
    if (!this.term.signal.aborted) await new Promise<void>((resolve) => this.term.signal.addEventListener('abort', () => resolve(), { once: true }));
    await Promise.allSettled([...this.runners.values()]);
  }

  /** A backfill was requested (its notice on the leader's stream): it starts now, not at some poll. */
  requested(): void {
    void this.retrying('reading the backfill queue', () => this.scan());
  }

  private async scan(): Promise<void> {
    for (const job of await this.queuedJobs()) {
      if (this.runners.has(job)) {
        this.told.add(job);
        continue;
      }
      this.runners.set(
        job,
        this.runJob(job).finally(() => this.runners.delete(job)),
      );
    }
  }

  /** The jobs of the backfills not ended, by their oldest. */
  private async queuedJobs(): Promise<string[]> {
    const ids = await this.redis.zrange(this.keys.backfillQueue, 0, -1);
    const jobs = await Promise.all(ids.map((id) => this.redis.hget(this.keys.backfill(id), 'job')));
    return [...new Set(jobs.filter((job) => job !== null))];
  }

  private async oldestOf(job: string): Promise<string | undefined> {
    for (const id of await this.redis.zrange(this.keys.backfillQueue, 0, -1)) {
      if ((await this.redis.hget(this.keys.backfill(id), 'job')) === job) return id;
    }
    return undefined;
  }

  private async runJob(job: string): Promise<void> {
    while (!this.term.signal.aborted) {
      this.told.delete(job);
      const id = await this.retrying(`finding the next backfill of ${job}`, () => this.oldestOf(job));
      if (id === undefined) {
        if (this.told.has(job)) continue;
        return;
      }
      if (!(await this.retrying(`backfill ${id} of ${job}`, () => this.execute(id)))) return;
    }
  }

  /** Runs `work` until it succeeds or the term ends (then undefined), backing off after each failure. */
  private async retrying<T>(what: string, work: () => Promise<T>): Promise<T | undefined> {
    for (let attempt = 0; !this.term.signal.aborted; attempt++) {
      try {
        return await work();
      } catch (error) {
        if (this.term.signal.aborted) return undefined;
        const retryInMs = Math.min(RETRY_MS * 2 ** attempt, MAX_RETRY_MS);
        this.term.log.warn({ err: error, retryInMs }, `${what} failed; retrying`);
        await this.term.timer.nap(retryInMs).done;
      }
    }
    return undefined;
  }

  private async load(id: string): Promise<Stored | undefined> {
    const f = await this.redis.hgetall(this.keys.backfill(id));
    if (f.job === undefined) return undefined;
    return {
      id,
      job: f.job,
      to: Number(f.to),
      overlap: (f.overlap ?? 'allow') as BackfillOverlap,
      rate: Number(f.rate),
      includeSkipped: f.includeSkipped === '1',
      cursor: Number(f.cursor),
      lastRunId: f.lastRunId,
      state: f.state ?? 'queued',
    };
  }

  /**
   * Runs one backfill to its end (or the term's: false). Re-run from Redis after any failure: the
   * cursor and the pending claims are the backfill's truth, never this process' memory.
   */
  private async execute(id: string): Promise<boolean> {
    const stored = await this.load(id);
    if (!stored || stored.state === 'done' || stored.state === 'failed') {
      // Ended, or gone: drop it from the queue so that no leader looks at it again.
      await this.redis.zrem(this.keys.backfillQueue, id);
      return true;
    }
    const log = { backfill: id, job: stored.job };
    const resolved = await this.term.resolveJob(stored.job);
    const job = resolved && withTicksBeforeCreation(resolved);
    const others = (await this.redis.zrange(this.keys.backfills(stored.job), 0, -1)).filter((other) => other !== id);
    const run = new BackfillRun(this.term, this.queues, stored, job, others);
    if (!job) {
      // A claim it left pending cannot be added without the definition, nor dropped (its run may be in
      // BullMQ): the finish refuses, and the retries wait for the job to be defined again.
      this.term.log.warn(log, 'backfill of a job the leader does not have: failed');
      return run.finish('unknown-job');
    }
    if (!(await run.finishPending())) return false;
    this.term.log.info({ ...log, from: new Date(stored.cursor + 1), to: new Date(stored.to) }, 'backfill running');
    if (!(await run.walk())) return false;
    if (!(await run.finish(''))) return false;
    this.term.log.info(log, 'backfill done');
    return true;
  }
}

/** One backfill being run by this term. */
class BackfillRun {
  private readonly pacer: Pacer;
  private cursor: number;
  private lastRunId: string | undefined;

  constructor(
    private readonly term: DeskTerm,
    private readonly queues: QueueSet,
    private readonly stored: Stored,
    private readonly job: ScheduledJob | undefined,
    private readonly others: string[],
  ) {
    this.cursor = stored.cursor;
    this.lastRunId = stored.lastRunId;
    this.pacer = new Pacer(stored.rate, () => term.clock.monotonic(), (ms) => term.timer.nap(ms).done);
  }

  private step(mode: BackfillStep['mode'], ticks: number[], failure?: string): Promise<BackfillStepOutcome> {
    // The run's id is the tick's own: were a live claim of the tick ever made too, BullMQ would add it once.
    const { stored, job } = this;
    return this.term.ledger.stepBackfill(this.term.token, {
      job: stored.job,
      backfill: stored.id,
      mode,
      ticks: ticks.map((tick) => ({ tick, jobId: tickJobId(stored.job, tick) })),
      includeSkipped: stored.includeSkipped,
      // The live lane's takeover reads the records within its staging reach of the watermark as its own
      // staged runs: a backfill leaves those ticks to it.
      reachMs: this.term.stageAheadMs + (job?.maxJitterMs ?? 0),
      now: this.term.now(),
      others: this.others,
      ...(failure === undefined ? {} : { failure }),
    });
  }

  /** False when the term is over; true once the outcome let the run go on. */
  private going(outcome: BackfillStepOutcome): boolean {
    this.term.reached();
    if (outcome.kind === 'fenced') this.term.fenced();
    return outcome.kind !== 'fenced' && !this.term.signal.aborted;
  }

  /** Ends the backfill (`failure`: why it failed, or ''). False when the term is over first. */
  async finish(failure: string): Promise<boolean> {
    if (!(await this.term.waitLeading())) return false;
    const outcome = await this.step('finish', [], failure);
    if (!this.going(outcome)) return false;
    if (outcome.kind === 'pending-left') throw new Error(`backfill ${this.stored.id} still has a pending claim`);
    return true;
  }

  /**
   * Finishes the claims a backfill left pending in an earlier term (or earlier in this one): re-claimed for
   * this term and added with the same job id, so that an add that did land adds nothing. Kept apart from the
   * live pending set, the live takeover never mistakes them for late staged ticks.
   */
  async finishPending(): Promise<boolean> {
    for (const tick of await this.term.ledger.backfillPendingTicks(this.stored.job)) {
      if (!(await this.term.waitLeading())) return false;
      const outcome = await this.step('claim', [tick]);
      if (!this.going(outcome)) return false;
      if (outcome.kind !== 'claimed') continue;
      this.term.log.info({ backfill: this.stored.id, tick: new Date(tick) }, 'finishing a backfill claim of an earlier term');
      if (!(await this.addAndConfirm(tick))) return false;
    }
    return true;
  }

  /** Decides every tick after the cursor, to the range's end. False when the term is over first. */
  async walk(): Promise<boolean> {
    const job = this.job!;
    for (;;) {
      if (!(await this.term.waitLeading())) return false;
      const ticks = nextTicks(job, this.cursor, LIST_BATCH).filter((tick) => tick <= this.stored.to);
      if (ticks.length === 0) return true;
      const listed = await this.step('list', ticks);
      if (!this.going(listed)) return false;
      if (listed.kind === 'ended') return true;
      if (listed.kind === 'decided') {
        this.cursor = listed.cursor;
        continue;
      }
      if (listed.kind !== 'needs-run') throw new Error(`backfill listing answered ${listed.kind}`);
      this.cursor = listed.cursor;
      if (!(await this.runTick(listed.tick))) return false;
    }
  }

  /** Runs (or skips, for overlap) one tick that needs a run, at the backfill's pace. */
  private async runTick(tick: number): Promise<boolean> {
    const job = this.job!;
    for (;;) {
      // A pause (the definition's here; one at run time in the script) holds the backfill, as the live ticks are held.
      if (job.paused) {
        await this.term.timer.nap(PAUSED_RECHECK_MS).done;
        if (this.term.signal.aborted) return false;
        continue;
      }
      if (this.stored.overlap !== 'allow' && (await this.previousUnfinished())) {
        if (this.stored.overlap === 'skip') return this.skipForOverlap(tick);
        await this.term.timer.nap(RECHECK_MS).done;
        if (this.term.signal.aborted) return false;
        continue;
      }
      await this.pacer.next();
      if (!(await this.term.waitLeading())) return false;
      const claimed = await this.step('claim', [tick]);
      if (!this.going(claimed)) return false;
      if (claimed.kind === 'paused') {
        await this.term.timer.nap(PAUSED_RECHECK_MS).done;
        continue;
      }
      if (claimed.kind === 'claimed') {
        this.cursor = claimed.cursor;
        this.lastRunId = tickJobId(this.stored.job, tick);
        return this.addAndConfirm(tick);
      }
      if ('cursor' in claimed) this.cursor = claimed.cursor;
      return true;
    }
  }

  /** Records the tick skipped (`overlap`): the backfill's previous run is unfinished. */
  private async skipForOverlap(tick: number): Promise<boolean> {
    const outcome = await this.step('skip', [tick]);
    if (!this.going(outcome)) return false;
    if ('cursor' in outcome) this.cursor = outcome.cursor;
    return true;
  }

  /** Whether this backfill's previous run is in BullMQ and not finished (a removed one has finished). */
  private async previousUnfinished(): Promise<boolean> {
    if (this.lastRunId === undefined) return false;
    return UNFINISHED.has(await this.queues.get(this.job!.queue).getJobState(this.lastRunId));
  }

  /** Adds a claimed tick's run (marked as the backfill's) and confirms it. False when the term is over first. */
  private async addAndConfirm(tick: number): Promise<boolean> {
    const job = this.job!;
    const jobId = tickJobId(job.name, tick);
    for (;;) {
      // The add is unfenced: it waits out a self-fence pause (the claim stands) and is left to the next
      // term's backfill, pending, when the term ends. No lag metric: a backfill run is late by design.
      for (;;) {
        if (!(await this.term.waitLeading())) return false;
        if (await this.term.enqueue.add(job, tick, jobId, { backfill: this.stored.id })) break;
      }
      const confirmed = await this.term.ledger.confirmBackfill(this.term.token, job.name, tick, jobId, this.term.now());
      this.term.reached();
      if (confirmed === 'fenced') {
        this.term.fenced();
        return false;
      }
      if (confirmed !== 'not-claimed') return true;
      // A failover lost the claim after the add: claim it again (its add is then a no-op), then confirm.
      this.term.log.warn({ backfill: this.stored.id, tick: new Date(tick) }, 'the claim of a backfilled tick was lost in a failover after its run was added; claiming it again');
      const again = await this.step('claim', [tick]);
      if (!this.going(again)) return false;
      if (again.kind !== 'claimed') return true;
    }
  }
}
