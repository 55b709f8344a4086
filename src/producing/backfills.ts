import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { WritePath } from '../redis/durability.js';
import { LEADER_STREAM_MAXLEN, type KeySpace } from '../redis/keys.js';
import type { QueueSet } from '../redis/queue-set.js';
import { tickJobId } from '../ledger/job-data.js';
import type { BackfillClaim, BackfillClaimOutcome, BackfillStep, BackfillStepOutcome } from '../ledger/tick-ledger.js';
import type { ScheduledJob } from '../scheduling/define-job.js';
import { nextTicks, withTicksBeforeCreation } from '../scheduling/plan.js';
import { MAX_BATCH } from '../util/coalescer.js';
import { Pacer } from '../util/pacer.js';
import type { DeskTerm } from './manual-triggers.js';
import { backoffMs } from '../util/backoff.js';

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
        const retryInMs = backoffMs(attempt, RETRY_MS, MAX_RETRY_MS);
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
  /** How many ticks one claim of overlap `allow` takes (see {@link batchSize}). */
  private readonly batch: number;
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
    this.batch = batchSize(stored.rate);
    this.pacer = new Pacer(stored.rate, () => term.clock.monotonic(), (ms) => term.timer.nap(ms).done);
  }

  private claims(ticks: number[]): BackfillClaim {
    // The run's id is the tick's own: were a live claim of the tick ever made too, BullMQ would add it once.
    const { stored, job } = this;
    return {
      job: stored.job,
      backfill: stored.id,
      ticks: ticks.map((tick) => ({ tick, jobId: tickJobId(stored.job, tick) })),
      includeSkipped: stored.includeSkipped,
      // The live lane's takeover reads the records within its staging reach of the watermark as its own
      // staged runs: a backfill leaves those ticks to it.
      reachMs: this.term.stageAheadMs + (job?.maxJitterMs ?? 0),
      now: this.term.now(),
      others: this.others,
    };
  }

  private step(mode: BackfillStep['mode'], ticks: number[], failure?: string): Promise<BackfillStepOutcome> {
    return this.term.ledger.stepBackfill(this.term.token, { ...this.claims(ticks), mode, ...(failure === undefined ? {} : { failure }) });
  }

  /** False when the term is over; true once the outcome let the run go on. */
  private going(outcome: BackfillStepOutcome | BackfillClaimOutcome): boolean {
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
   * Finishes the claims a backfill left pending in an earlier term (or earlier in this one; a batch leaves
   * many): re-claimed for this term and added with the same job ids, so that an add that did land adds
   * nothing. Kept apart from the live pending set, the live takeover never mistakes them for late staged ticks.
   */
  async finishPending(): Promise<boolean> {
    const pending = await this.term.ledger.backfillPendingTicks(this.stored.job);
    for (let i = 0; i < pending.length; i += MAX_CLAIM_BATCH) {
      const ticks = pending.slice(i, i + MAX_CLAIM_BATCH);
      if (!(await this.term.waitLeading())) return false;
      this.term.log.info({ backfill: this.stored.id, claims: ticks.length, from: new Date(ticks[0]!) }, 'finishing backfill claims of an earlier term');
      if (!(await this.claimAndAdd(ticks))) return false;
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
      if (!(await (this.stored.overlap === 'allow' ? this.runBatch(listed.tick) : this.runTick(listed.tick)))) return false;
    }
  }

  /**
   * Overlap `allow`: claims a batch of ticks from `first` (which needs a run) in one script, adds the
   * claimed ones in one bulk add, confirms them in one script, at the backfill's pace: the batch takes
   * a slot of the pacer per tick, so batches come spread over time (about {@link BATCHES_PER_SECOND} a
   * second) and the live lanes' calls go between them. The walk goes on from the cursor it left.
   */
  private async runBatch(first: number): Promise<boolean> {
    const job = this.job!;
    if (job.paused) return this.pausedNap();
    const ticks = nextTicks(job, first - 1, this.batch).filter((tick) => tick <= this.stored.to);
    await this.pacer.next(ticks.length);
    if (!(await this.term.waitLeading())) return false;
    const claimed = await this.claimAndAdd(ticks);
    if (!claimed) return false;
    if (claimed.kind !== 'claims') return true;
    // The ticks that needed no run cost no pace, as those the listing decided.
    this.pacer.giveBack(claimed.ticks.filter((outcome) => !ADDED.has(outcome)).length);
    return claimed.ticks.includes('paused') ? this.pausedNap() : true;
  }

  /** Runs (or skips, for overlap) one tick that needs a run, at the backfill's pace (overlap skip, bufferAll). */
  private async runTick(tick: number): Promise<boolean> {
    const job = this.job!;
    for (;;) {
      // A pause (the definition's here; one at run time in the script) holds the backfill, as the live ticks are held.
      if (job.paused) {
        if (!(await this.pausedNap())) return false;
        continue;
      }
      if (await this.previousUnfinished()) {
        if (this.stored.overlap === 'skip') return this.skipForOverlap(tick);
        await this.term.timer.nap(RECHECK_MS).done;
        if (this.term.signal.aborted) return false;
        continue;
      }
      await this.pacer.next();
      if (!(await this.term.waitLeading())) return false;
      const claimed = await this.claimAndAdd([tick]);
      if (!claimed) return false;
      if (claimed.kind !== 'claims') return true;
      const [outcome] = claimed.ticks;
      if (outcome === 'paused') {
        if (!(await this.pausedNap())) return false;
        continue;
      }
      if (ADDED.has(outcome!)) this.lastRunId = tickJobId(this.stored.job, tick);
      return true;
    }
  }

  /** Waits while the job is paused; false when the term ended meanwhile. */
  private async pausedNap(): Promise<boolean> {
    await this.term.timer.nap(PAUSED_RECHECK_MS).done;
    return !this.term.signal.aborted;
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

  /**
   * Claims `ticks` (in order, one script), adds the runs of those claimed (marked as the backfill's) in one
   * bulk add, and confirms them in one script. Answers the claim's outcome; undefined when the term is
   * over first. A failed add throws: its claims stay pending, and the retry (or the next term) finishes them.
   */
  private async claimAndAdd(ticks: number[]): Promise<BackfillClaimOutcome | undefined> {
    const job = this.job!;
    let first: BackfillClaimOutcome | undefined;
    for (;;) {
      const claimed = await this.term.ledger.claimBackfill(this.term.token, this.claims(ticks));
      if (!this.going(claimed)) return undefined;
      first ??= claimed;
      if (claimed.kind !== 'claims') return first;
      this.cursor = claimed.cursor;
      const runs = ticks.filter((_, i) => ADDED.has(claimed.ticks[i]!)).map((tick) => ({ tick, jobId: tickJobId(job.name, tick) }));
      if (runs.length === 0) return first;
      // The add is unfenced: it waits out a self-fence pause (the claims stand) and is left to the next
      // term's backfill, pending, when the term ends. No lag metric: a backfill run is late by design.
      for (;;) {
        if (!(await this.term.waitLeading())) return undefined;
        if (await this.term.enqueue.addBatch(job, runs, { backfill: this.stored.id })) break;
      }
      const confirmed = await this.term.ledger.confirmBackfill(this.term.token, job.name, runs, this.term.now());
      this.term.reached();
      if (confirmed.includes('fenced')) {
        this.term.fenced();
        return undefined;
      }
      const lost = runs.filter((_, i) => confirmed[i] === 'not-claimed');
      if (lost.length === 0) return first;
      // A failover lost claims after their adds, and with them the rest of their script (the cursor, the
      // fates): the same ticks are claimed again, in order (the adds are then no-ops; a tick decided since
      // is left as it is), then confirmed.
      this.term.log.warn({ backfill: this.stored.id, claims: lost.length, from: new Date(lost[0]!.tick) }, 'backfill claims were lost in a failover after their runs were added; claiming them again');
    }
  }
}

/** The outcomes of a claim whose run is to be added (see {@link BackfillClaimOutcome}). */
const ADDED = new Set(['claimed', 'reclaimed']);

/** The most ticks one claim takes (one script, one bulk add, one confirm): a few ms of Redis each. */
const MAX_CLAIM_BATCH = MAX_BATCH;
/** Overlap `allow` claims about a twentieth of a second's rate at a time. */
const BATCHES_PER_SECOND = 20;

/**
 * How many ticks a claim of overlap `allow` takes at `rate` a second: enough that one claim, add and
 * confirm in flight keeps up with the rate, few enough that each is over in a few ms and the batches
 * come spread over the second (the pacer spaces them by their size), not in one burst.
 */
function batchSize(rate: number): number {
  return Math.min(MAX_CLAIM_BATCH, Math.max(1, Math.floor(rate / BATCHES_PER_SECOND)));
}
