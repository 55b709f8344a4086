import type { Logger } from 'pino';
import { tickJobId } from '../ledger/job-data.js';
import { claimingTerm, takeBackInProgress } from '../ledger/records.js';
import type { ClaimRequest, FencingToken, UnstageReason } from '../ledger/tick-ledger.js';
import { BUFFERING_POLICIES, type ScheduledJob } from '../scheduling/define-job.js';
import { decideOverlap, jitterMs, missedWindow, nextTick, planCatchup, planLateStaged, spansOfEnded, type CatchupPlan, type SkippedTicks } from '../scheduling/plan.js';
import type { Alarm, Sleeper } from './due-timer.js';
import { MIN_RETENTION_MS, retentionMs } from './fenced-enqueue.js';
import { LaneCursor, type LaneMarks } from './lane-cursor.js';
import type { LaneTerm } from './lane-term.js';
import { recordRemovedSpan, SpanOverlapsRecord } from './removed-span.js';
import { inSpan } from '../util/traces.js';
import { StagedRuns, stagedBefore, unstageReason } from './staged-runs.js';
import { reviewedAfter, takeUpRevision } from './revision-review.js';
import type { StagedRun } from './staging.js';
import { backoffMs } from '../util/backoff.js';

/**
 * What a step asks for: to go on at once, to sleep (`wakeable`: a redefinition or a notice may cut it
 * short), or to be dropped until `reviewAt` (see LaneParking).
 */
type Next = { sleepMs: number; wakeable: boolean } | { parkUntil: number | undefined } | undefined;
const GO_ON: Next = undefined;

/** A failed step is retried after this, doubling up to {@link MAX_RETRY_MS}. */
const RETRY_MS = 500;
const MAX_RETRY_MS = 5_000;
/** How often an unfinished previous run is checked while a tick is buffered behind it. */
const BUFFER_POLL_MS = 1_000;
/** The longest single sleep, so a lane with no tick due soon still notices a redefined schedule. */
const MAX_SLEEP_MS = 60_000;
/**
 * A held run's take-back found another revision stored than the lane's (the change feed has yet to
 * deliver it), or its tick not come on Redis' clock: it is tried again this much later.
 */
const HELD_RETRY_MS = 100;

/**
 * How a runtime schedule's lane is dropped while its next tick is far off, so that a leader holds lanes
 * only for the schedules due soon (see ScheduleLanes). File jobs' lanes never are.
 */
export interface LaneParking {
  /** A lane parks only when its next tick is further off than this. */
  readonly afterMs: number;
  /**
   * Drops the lane until `reviewAt` (undefined: no tick is left), remembering `marks` to walk on from.
   * True when the lane is dropped and ends; false when it must go on (its schedule changed meanwhile).
   */
  park(lane: JobLane, marks: LaneMarks, reviewAt: number | undefined): Promise<boolean>;
}

/** How a lane is made. */
export interface LaneStart {
  /** Called once, when the lane has taken its job over (at once for a resumed lane). */
  onTakenOver?: () => void;
  /** Walk on from where a dropped lane of the same term stood, instead of taking the job over. */
  resume?: LaneMarks;
  /** The runtime schedule's revision that dropped lane took up (see takeUpRevision): not taken up again. */
  approved?: string;
  parking?: LaneParking;
}

/**
 * The ordered lane of one job within one term. It records the job's ticks in nominal tick order with no
 * holes: a tick is claimed only once every earlier owed tick was recorded (claimed, buffered, enqueued or
 * skipped). A step that fails (Redis unreachable) is retried, with backoff, before any later tick of the
 * job; owed ticks that fall behind past the catch-up window are recorded as skipped `missed-window`. So
 * the ledger's `lastScheduledTick` is a contiguous watermark, and a term killed at any point leaves the
 * next leader planning from it correctly. Each job has its own lane, so a slow job never delays another.
 *
 * One lane run: take over (finish what earlier terms left pending, then catch up per the job's policy
 * from the watermark), then fire each tick when due. Buffered ticks (`bufferOne`, `bufferAll`) are released
 * in the same lane, one at a time and oldest first, before the next tick is decided, so runs never overlap
 * and start in tick order.
 */
export class JobLane implements Sleeper {
  /** Where the lane stands in its walk through the ticks: its position, watermark and rewind (see LaneCursor). */
  private readonly ticks = new LaneCursor();
  /**
   * Ticks claimed as buffered, oldest first: the first waits for the previous run to finish, each later one
   * for the run of the tick before it (`bufferAll`; `bufferOne` holds at most one).
   */
  private buffered: number[] = [];
  /** A claimed tick whose BullMQ add has not succeeded yet; it is finished before anything else. */
  private unadded: number | undefined;
  /**
   * The definition the unadded tick was claimed by: its add is retried with it, not with a later edit's,
   * as a run staged before the edit keeps the data it was staged with (an edit without the tick takes it back).
   */
  private unaddedBy: ScheduledJob | undefined;
  private needsPlan = true;
  /** True while the lane runs late (after a failure or a self-fence pause): the catch-up window applies. */
  private behind = false;
  /** The definition changed since the lane last planned its sleep. */
  private redefined = false;
  /** Runs this lane staged (or found staged at takeover) whose due time may not have come, oldest first. */
  private readonly staged = new StagedRuns();
  /** A redefinition or a pause notice since the staged runs were last checked against them. */
  private recheckStaged = false;
  /** The lane slept before its next tick (or while a tick is buffered): the buffered tick is released first on waking. */
  private releaseDue = false;
  private stopped = false;
  /** The lane's pending wake-up on the term's timer while it sleeps, and whether a redefinition may cut it short. */
  private alarm: Alarm | undefined;
  private alarmWakeable = false;
  /** The turn in flight (the lane's steps from one wake-up to its next sleep); undefined while it sleeps. */
  private turning: Promise<void> | undefined;
  /** Steps failed in a row: the retry backoff doubles with each. */
  private failures = 0;
  /** Ended: the term is over, or the job was removed and its staged runs were dealt with. */
  private ended = false;
  private logger: Logger | undefined;
  private onTakenOver: (() => void) | undefined;
  private readonly parking: LaneParking | undefined;
  /** The queue of the newest definition the lane ran by: where its adds still unconfirmed would land once it is removed. */
  private queue: string | undefined;
  /** A runtime schedule's revision this lane has taken up (see takeUpRevision): workers start its staged runs. */
  private approved: string | undefined;

  /**
   * A lane is driven by the term's timer: while it sleeps it is its timer entry and this object, with no
   * suspended async call behind it (10,000 lanes cost about 2 KB less each than an awaiting loop).
   */
  constructor(
    readonly name: string,
    private readonly term: LaneTerm,
    start: LaneStart = {},
  ) {
    this.onTakenOver = start.onTakenOver;
    this.parking = start.parking;
    if (start.resume) {
      // Its job was taken over earlier in this term, and nothing of it is pending or staged (see parkable).
      this.ticks.resume(start.resume);
      this.needsPlan = false;
      this.approved = start.approved;
    }
  }

  /** The lane's logger, made on first use: a pino child per lane costs kilobytes, and most lanes never log. */
  private get log(): Logger {
    return (this.logger ??= this.term.log.child({ job: this.name }));
  }

  /** The job's definition changed: re-read it now. */
  wake(): void {
    this.redefined = true;
    this.recheckStaged = true;
    this.ticks.redefined();
    void this.markTakeBacks(false);
    this.interrupt();
  }

  /** The job was paused at run time: take back its staged runs now. */
  paused(): void {
    this.recheckStaged = true;
    void this.markTakeBacks(true);
    this.interrupt();
  }

  /** The job was removed: the lane takes back its staged runs, then ends. */
  stop(): void {
    this.stopped = true;
    // A takeover that waits for this lane need not: its job is gone.
    if (this.needsPlan) this.tookOver();
    void this.markTakeBacks(false);
    this.interrupt();
  }

  /**
   * Marks the take-back of each staged run the job as now defined (paused, removed) no longer wants, at once,
   * beside whatever step is in flight: that step (an add stalled while BullMQ's primary fails over, a retry's
   * backoff) may outlast the runs' due time, and workers hold a marked run from the moment of the mark. The
   * lane pulls the runs on its next turn (reviewStaged), as it would have without the mark. Best effort:
   * a mark that fails is made again there.
   */
  private async markTakeBacks(paused: boolean): Promise<void> {
    if (!this.term.leading()) return;
    const job = this.stopped ? undefined : this.term.job(this.name);
    for (const run of this.staged.list()) {
      const reason = unstageReason(run, job, paused);
      if (!reason || run.takingBack || run.dueAt <= this.term.now()) continue;
      // Carried to its end from now on, even if the mark's reply is lost: a mark may have landed, and workers
      // hold a marked run until its take-back settles (a take-back keeps its reason). A schedule's edit only
      // holds it until its tick: an edit before then may want it again.
      if (reason === 'rescheduled' && job?.revision !== undefined) this.staged.hold(run, run.dueAt);
      else this.staged.takingBack(run, reason);
      const marked = await this.term.ledger.markUnstaging(this.term.token, this.name, run.tick, run.jobId, reason, run.queue).catch(() => undefined);
      if (marked === 'fenced') return this.term.fenced();
      if (marked !== undefined) this.term.reached();
    }
  }

  /** Starts the lane: it takes its job over at once, then wakes up on the term's timer until the term ends. */
  start(): void {
    if (!this.needsPlan) this.tookOver();
    this.wakeUp();
  }

  /** Resolves once no step is in flight (at the end of a term: nothing of this lane is still writing). */
  settled(): Promise<void> {
    return this.turning ?? Promise.resolve();
  }

  /** Called by the timer: the sleep is over (or the term ended). */
  wakeUp(): void {
    this.alarm = undefined;
    if (this.ended || this.turning) return;
    if (this.term.signal.aborted) {
      this.ended = true;
      return;
    }
    const turn = this.turn().catch((error: unknown) => this.log.error({ err: error }, 'job lane failed'));
    this.turning = turn;
    void turn.finally(() => {
      if (this.turning === turn) this.turning = undefined;
    });
  }

  /** Cuts a wakeable sleep short; a step in flight sees the flags before it sleeps again. */
  private interrupt(): void {
    if (this.alarm && this.alarmWakeable) this.term.timer.ring(this.alarm);
  }

  private get over(): boolean {
    return this.stopped || this.term.signal.aborted;
  }

  /** Runs steps until one asks to sleep, then sets the lane's alarm; the lane is then idle until it rings. */
  private async turn(): Promise<void> {
    while (!this.term.signal.aborted) {
      const job = this.stopped ? undefined : this.term.job(this.name);
      let next: Next;
      try {
        if (!job) {
          // Removed: its staged runs must not run either, nor may what its ledger says it left in BullMQ that
          // this lane did not stage (a claim whose confirm it was retrying, runs of earlier terms it had not
          // taken over yet); the take-backs marked in its ledger are carried to their end; and the ticks it
          // owed before the removal that this lane (running late) did not record are recorded. The lane ends
          // once all are done (or the term ends).
          if ((await this.reviewStaged(undefined)) && (await this.term.takeBackRemoved(this.name, this.queue)) && (!this.parking || (await recordRemovedSpan(this.term, this.name, Math.max(this.ticks.watermark ?? -Infinity, this.ticks.recordedBy(this.term.now())))))) break;
          continue;
        }
        this.queue = job.queue;
        if (this.needsPlan) {
          this.needsPlan = !(await this.takeOver(job));
          if (!this.needsPlan) this.tookOver();
        } else next = await this.step(job);
        this.failures = 0;
      } catch (error) {
        if (this.term.signal.aborted) break;
        this.behind = true;
        const retryInMs = backoffMs(this.failures++, RETRY_MS, MAX_RETRY_MS);
        this.log.warn({ err: error, retryInMs }, this.stopped ? 'could not take back the staged runs of a removed job; retrying' : 'could not record a tick; retrying it before any later tick of this job');
        // A stopped lane still sleeps between retries of its last duty (taking back its staged runs).
        next = { sleepMs: retryInMs, wakeable: false };
      }
      if (next === undefined) continue;
      if ('parkUntil' in next) {
        if (await this.park(next.parkUntil)) break;
        continue;
      }
      if (next.wakeable && (this.redefined || this.recheckStaged || this.stopped)) continue;
      // Idle from here: the alarm may ring (a notice, a redefinition) before this promise has settled.
      this.turning = undefined;
      this.alarmWakeable = next.wakeable;
      this.alarm = this.term.timer.set(next.sleepMs, this);
      return;
    }
    this.ended = true;
  }

  private tookOver(): void {
    this.onTakenOver?.();
    this.onTakenOver = undefined;
  }

  /**
   * Finishes an unadded claim, takes back staged runs the job no longer wants, releases a buffered tick
   * whose turn came, or fires the next tick once it is due (or, for a job that may be staged, once it is
   * within the staging horizon).
   */
  private async step(job: ScheduledJob): Promise<Next> {
    if (this.releaseDue) {
      // Woken from a sleep taken while a tick was buffered, or before the next tick: release it if its turn came.
      this.releaseDue = false;
      if (!this.over) await this.release(job);
      return GO_ON;
    }
    if (this.unadded !== undefined) {
      const tick = this.unadded;
      const claimedBy = this.unaddedBy ?? job;
      // Redefined since the claim, off its tick (an interval without it) or into a new life (removed and
      // written again): no version that stands owes the tick, and the earlier add may have landed with the
      // old data. It is taken back, as a staged run the edit dropped would be, not run late.
      if (claimedBy !== job && (claimedBy.owedAfter !== job.owedAfter || nextTick(job, tick - 1) !== tick)) {
        if (await this.takeBackClaim(job, tick, tick + jitterMs(claimedBy, tick), claimedBy)) this.unadded = undefined;
        return GO_ON;
      }
      return void (await this.finishAdd(claimedBy));
    }
    // A runtime schedule's new revision: its staged runs are decided by it before workers may start them.
    if (job.revision !== undefined && job.revision !== this.approved) {
      if (!(await this.writable()) || !(await takeUpRevision(this.term, job, this.staged))) return GO_ON;
      this.approved = job.revision;
    }
    const heldUntil = this.staged.nextHeldUntil();
    if (this.recheckStaged || (heldUntil !== undefined && heldUntil <= this.term.now())) {
      this.recheckStaged = false;
      await this.reviewStaged(job).catch((error: unknown) => {
        this.recheckStaged = true;
        throw error;
      });
    }
    // Redefined: walk back to the newest tick recorded by now (see LaneCursor.rewind), but not past the
    // write of a schedule's new version. A file job's lane running late keeps its owed ticks and walks
    // them under the new definition; a schedule's records those the version before owed up to the write
    // (recordOutrun), and walks the new one from the write on.
    if (this.ticks.rewindPending) {
      if (!(await this.recordOutrun(job))) return GO_ON;
      const now = this.term.now();
      // Walked back past ticks already due (a version heard of late): they are caught up as a late lane's are.
      if (this.ticks.rewind(now, job.definedAt ?? -Infinity) < this.ticks.recordedBy(now)) this.behind = true;
    }
    const tick = nextTick(job, this.ticks.position);
    const dueAt = tick === undefined ? Infinity : tick + jitterMs(job, tick) - this.stagingLead(job);
    const untilDue = dueAt - this.term.now();
    if (untilDue > 0) {
      this.behind = false;
      if (this.redefined) {
        // Redefined while this step ran: re-read the definition before napping on the old schedule.
        this.redefined = false;
        return GO_ON;
      }
      let sleepMs = Math.min(untilDue, this.buffered.length === 0 ? MAX_SLEEP_MS : BUFFER_POLL_MS);
      if (this.parking && untilDue > this.parking.afterMs) {
        // Parked until the instant the lane must act (the tick, its jitter, less the staging lead): past what
        // the scan of the due index has read, which a nominal tick with a long jitter need not be.
        if (this.parkable()) return { parkUntil: tick === undefined ? undefined : dueAt };
        // Parked once the runs it staged are due: wake then, not a whole sleep later.
        const stagedDue = this.staged.latestDue();
        if (stagedDue !== undefined) sleepMs = Math.min(sleepMs, Math.max(0, stagedDue - this.term.now()) + 1);
      }
      // A run held for a take-back is pulled once its tick has come.
      if (heldUntil !== undefined) sleepMs = Math.min(sleepMs, Math.max(0, heldUntil - this.term.now()));
      this.releaseDue = true;
      return { sleepMs, wakeable: true };
    }
    // Release first, then decide the new tick against the released run.
    await this.release(job);
    if (this.unadded === undefined) await this.fire(job, tick!);
    return GO_ON;
  }

  /**
   * Whether the lane holds nothing that only it knows: no tick buffered or unadded, no staged run whose
   * due time has not come, no redefinition or notice unread, not running late. Such a lane can be dropped
   * and resumed from its marks alone.
   */
  private parkable(): boolean {
    const now = this.term.now();
    return (
      this.buffered.length === 0 && this.unadded === undefined && !this.behind && !this.stopped && !this.redefined &&
      !this.recheckStaged && !this.ticks.rewindPending && this.staged.dropDue(now) === 0 && this.ticks.recordedBy(now) >= this.ticks.position
    );
  }

  /** Drops the lane until `reviewAt` (see LaneParking); true when it is dropped. */
  private async park(reviewAt: number | undefined): Promise<boolean> {
    if (!(await this.writable())) return false;
    const parked = await this.parking!.park(this, this.ticks.marks(this.term.now()), reviewAt);
    if (parked) this.log.debug({ reviewAt: reviewAt === undefined ? null : new Date(reviewAt) }, 'lane parked until its next tick draws near');
    return parked;
  }

  /** Records one due tick, or, when the lane fell behind past the catch-up window, the ticks it missed. */
  private async fire(job: ScheduledJob, tick: number): Promise<void> {
    if (this.behind) {
      const missed = missedWindow(job, this.ticks.position, this.term.now());
      if (missed) return void (await this.recordSkips(job, missed));
    }
    await this.decide(job, tick);
  }

  /**
   * Takes the job over for this term: finishes ticks earlier terms claimed but never added (a buffered
   * one stays buffered while the run before it is unfinished), in tick order, then records or runs the
   * ticks missed since the watermark per the job's catch-up policy. Re-run from the ledger after any
   * failure, so a partial takeover is never trusted. Returns false when it must run again.
   */
  private async takeOver(job: ScheduledJob): Promise<boolean> {
    if (!(await this.writable())) return false;
    this.buffered = [];
    this.unadded = undefined;
    // One batched read: pending ticks and their states, the watermark, the run-time pause, and
    // `scheduledSince` (recorded by the first takeover that saw the job).
    const taken = await this.term.takeOverState(job.name);
    this.term.reached();
    // Runs staged by earlier terms stay valid (they are recorded `enqueued`): this term neither stages them
    // again nor loses them, but takes back those a pause or a new schedule no longer wants (below), and
    // decides those that came due without a worker starting them: as missed ticks if they came due before
    // this term raised the fence, as its own ticks (kept) after (see planLateStaged).
    const now0 = this.term.now();
    let late = this.staged.takeOver(stagedBefore(job, taken.recent), now0);
    // A schedule's run an earlier term held for an edit's take-back is decided on the lane's first turn by
    // the version in force at its tick (takeUpRevision), which may owe it again.
    const { revision, approvedRevision } = taken.state;
    let heldLeft = false;
    for (const { tick, state } of taken.pending) {
      const takingBack = takeBackInProgress(state);
      if (takingBack?.reason === 'rescheduled' && job.revision !== undefined && tick > reviewedAfter(job, approvedRevision)) {
        heldLeft = true;
        continue;
      }
      if (takingBack) {
        const outcome = await this.term.takeBack.finish(job.name, tick, takingBack, retentionMs(job));
        this.log.info({ tick: new Date(tick), reason: takingBack.reason, outcome }, 'finished the take-back of a staged run started by an earlier term');
        continue;
      }
      // Buffered behind an unfinished run, or behind a tick still buffered itself: it keeps waiting, in tick order.
      if (state.kind === 'buffered' && BUFFERING_POLICIES.has(job.overlap) && (this.buffered.length > 0 || (await this.unfinished(job)))) {
        this.buffered.push(tick);
        continue;
      }
      if (state.kind !== 'claimed' && state.kind !== 'buffered') continue;
      const dueAt = tick + jitterMs(job, tick);
      const run: StagedRun = { tick, jobId: tickJobId(job.name, tick), queue: job.queue, dueAt };
      // A claim of a tick the job no longer has (a schedule removed and created again since, or edited
      // off that tick) is owed by no version that stands: its earlier term may have added it, so it is
      // taken back, like a staged run, rather than run.
      const owed = nextTick(job, tick - 1) === tick;
      // Nor is one whose run the earlier term added before this life of the schedule was created: the run
      // carries the removed life's data, and BullMQ keeps the first add of a job id, so finishing the claim
      // would confirm that run as this life's. It goes back as `removed`, as a staged run of that life does.
      const ofEarlierLife = owed && (await this.stagedInEarlierLife(job, [run])).length > 0;
      this.log.info({ tick: new Date(tick), owed, ...(ofEarlierLife ? { ofEarlierLife } : {}) }, 'finishing a tick claimed by an earlier term');
      if (!owed || ofEarlierLife) {
        if (!(await this.takeBackClaim(job, tick, dueAt, job, ofEarlierLife ? 'removed' : undefined))) return false;
        continue;
      }
      // A job that may be staged is claimed a staging lead before its tick: a claim of it whose due time
      // passed with no leader to add it is a staged run that came due while no leader ran. Added held
      // (workers wait for this term's review), it is then decided with the other late ones below.
      const stagedBy = this.stagingLead(job) > 0 && dueAt <= now0 ? claimingTerm(state) : undefined;
      if (!(await this.claimAndAdd(job, tick, {}, stagedBy))) return false;
      if (stagedBy === undefined) continue;
      if (this.unadded === tick) return false;
      late.push(run);
    }
    // Late staged runs of ticks the job no longer has (edited while no leader ran) go back.
    const offSchedule = late.filter((run) => nextTick(job, run.tick - 1) !== run.tick);
    late = late.filter((run) => !offSchedule.includes(run));
    if (!(await this.takeBackRuns(job, offSchedule.map((run) => ({ run, reason: 'rescheduled' as const })), true, job.revision))) return false;
    // A runtime schedule removed and created again while no leader ran: the runs staged before it was
    // created belong to its earlier life, whose removal no leader applied. They go back as `removed`.
    const earlier = await this.stagedInEarlierLife(job, [...this.staged.list(), ...late]);
    for (const run of earlier) this.staged.takingBack(run, 'removed');
    if (!(await this.takeBackRuns(job, late.filter((run) => earlier.includes(run)).map((run) => ({ run, reason: 'removed' as const }))))) return false;
    late = late.filter((run) => !earlier.includes(run));
    // A pause set at run time (`leasebeat pause`, perhaps while no instance ran) counts like the
    // definition's: the missed ticks are `paused`, not lost to the catch-up limit or window.
    const paused = job.paused || taken.paused;
    if (!(await this.reviewStaged(job, paused))) return false;
    // Missed ticks are counted up to the instant the ledger was read, which its answers describe (the newest
    // tick recorded by then): counted up to a later now, a tick recorded meanwhile (staged) would count as
    // missed twice, once unrecorded and once as a late staged run. The ticks due since are walked as on time.
    const now = taken.readAt;
    // The watermark is the ledger's; the walk starts where takeoverCursor says (a job no term ticked yet
    // owes its ticks since a leader first saw it; with ticks staged past now, from the newest recorded by now).
    const { lastScheduledTick } = taken.state;
    // A runtime schedule no leader has ticked yet owes its ticks from its creation, though a leader first
    // looks at it only when its first tick draws near (the due index).
    const scheduledSince = Math.min(taken.scheduledSince, job.owedAfter ?? Infinity);
    const from = this.ticks.takeOver({ lastScheduledTick, scheduledSince, newestDueTick: taken.newestDueTick }, now);
    // Written since the newest recorded tick (no leader ran, or none kept up): the version it replaced owed
    // the ticks up to the write. The new one owes only those after it, though ticks staged past the write
    // put the watermark beyond it: the walk starts there even so.
    // (No tick recorded yet: none is, from where the walk starts.)
    if (!(await this.recordReplaced(job, lastScheduledTick ?? from, job.revision === undefined ? undefined : reviewedAfter(job, approvedRevision)))) return false;
    const plan = planCatchup(job, Math.max(from, job.definedAt ?? -Infinity), now, paused);
    if (!(await this.takeBackLate(job, late, plan, now, paused))) return false;
    for (const range of plan.skipped) if (!(await this.recordSkips(job, range))) return false;
    for (const tick of plan.enqueue) if (!(await this.decide(job, tick))) return false;
    this.ticks.tookOver(now);
    // Only now may workers start what earlier terms staged (they hold such runs until this mark).
    if (!(await this.writable())) return false;
    // Writes no leader approved may have held runs of ticks a version before this one owed: the lane's
    // first turn decides those by the version in force at each (takeUpRevision), and approves then.
    const approved = !heldLeft && (revision === undefined || approvedRevision === job.revision);
    if (!(await this.term.markReviewed(job.name, approved ? job.revision : undefined))) {
      this.term.fenced();
      return false;
    }
    this.term.reached();
    this.approved = approved ? job.revision : undefined;
    return true;
  }

  /**
   * For a runtime schedule written after `watermark` (its newest recorded tick): records the ticks the
   * versions that writes replaced (or removals removed) before it owed up to their ends as skipped
   * (`rescheduled`, `removed`), each by its own definition: they stand no more, and no leader recorded them
   * while they did. Every tick up to the watermark is recorded (the ledger has no holes), so the spans start
   * there. `reviewedAfter`: the staged runs of ticks after it are still to be decided by the version in
   * force at each (takeUpRevision), which keeps the versions ended after it. False when the term cannot
   * write now.
   */
  private async recordReplaced(job: ScheduledJob, watermark: number | undefined, reviewedAfter = job.definedAt): Promise<boolean> {
    if (job.definedAt === undefined || watermark === undefined || job.definedAt <= watermark) return true;
    const replaced = await this.term.replacedVersions(job.name);
    this.term.reached();
    for (const span of spansOfEnded(replaced, watermark, job.definedAt)) if (!(await this.recordSkips(job, span))) return false;
    // Recorded up to the write of the version now stored: the versions before it owe nothing more.
    if (replaced.length > 0) await this.term.forgetReplaced(job.name, Math.min(job.definedAt, reviewedAfter ?? job.definedAt));
    return true;
  }

  /**
   * A runtime schedule redefined: the ticks the versions it replaced owed up to its write that no lane
   * recorded are recorded skipped (`rescheduled`, `removed`; see recordReplaced), since the new version
   * owes none before its write (see LaneCursor.rewind). Whether the lane ran late, or took the job over by
   * the version before and heard of the write before its first step, the ledger's watermark tells what
   * is recorded: not the lane's memory, nor a write whose reply a failing Redis lost. True once done;
   * false when the term cannot write now.
   */
  private async recordOutrun(job: ScheduledJob): Promise<boolean> {
    if (job.definedAt === undefined) return true;
    const { lastScheduledTick } = await this.term.ledger.jobState(job.name);
    this.term.reached();
    // No tick recorded yet: the walk started where the takeover put it, every tick before owed to no one.
    return this.recordReplaced(job, lastScheduledTick ?? this.ticks.position);
  }

  /**
   * Takes back a claim the job as now defined does not owe (see takeOver): marked first, so that no worker
   * starts the run before the pull whichever term staged it (stagedRunMayStart.lua), then added (its
   * earlier add may never have landed: the pull must find it), then pulled, and recorded skipped:
   * `removed` when it is from the schedule's life before a removal, `rescheduled` otherwise. `claimedBy`,
   * when the lane knows it, is the definition the claim was made by: its queue is where the earlier add
   * would have landed; `why`, when the lane knows the claim is of that earlier life though its tick is
   * after the creation (see takeOver). False when the term cannot write now.
   */
  private async takeBackClaim(job: ScheduledJob, tick: number, dueAt: number, claimedBy = job, why?: 'removed'): Promise<boolean> {
    if (!(await this.writable())) return false;
    const reason = why ?? (job.owedAfter !== undefined && tick <= job.owedAfter ? 'removed' : 'rescheduled');
    const jobId = tickJobId(job.name, tick);
    const marked = await this.term.ledger.markUnstaging(this.term.token, job.name, tick, jobId, reason, claimedBy.queue, true);
    this.term.reached();
    if (marked === 'fenced') {
      this.term.fenced();
      return false;
    }
    if (marked === 'settled') return true;
    if (!this.term.leading() || !(await this.term.enqueue.add(claimedBy, tick, jobId, { dueAt, stagedBy: this.term.token }))) return false;
    const outcome = await this.term.takeBack.finish(job.name, tick, { reason, jobId, queue: claimedBy.queue }, retentionMs(job));
    this.log.info({ tick: new Date(tick), reason, outcome }, 'took back a claim of a tick the job no longer has');
    return true;
  }

  /**
   * Takes back the staged runs of earlier terms that came due without a worker starting them (workers
   * hold those until this term has reviewed the job) and that a pause or the catch-up policy would not run
   * (see planLateStaged). False when the term cannot write now, or is over.
   */
  private async takeBackLate(job: ScheduledJob, late: StagedRun[], plan: CatchupPlan, now: number, paused: boolean): Promise<boolean> {
    // Only runs added ahead of their tick that no worker has started, by an earlier term: a run added at
    // its tick, or by this term (a lane taken over again within its term, see PARKED_MARKS_KEPT), was
    // decided by a leader alive at the tick, and one that started is past taking back.
    const waiting: StagedRun[] = [];
    for (const run of late) if (await this.term.takeBack.waitingStaged(run, this.term.token)) waiting.push(run);
    const decided = planLateStaged(job, waiting.map((run) => run.tick), plan, { now, fencedAt: this.term.fencedAt, paused });
    return this.takeBackRuns(job, decided.map(({ tick, reason }) => ({ run: waiting.find((candidate) => candidate.tick === tick)!, reason })), false);
  }

  /**
   * Of `runs`, those added to BullMQ before the schedule was created (see ScheduledJob.owedAfter). Only a
   * run due within a staging horizon of the creation can be one, so most schedules read nothing here.
   */
  private async stagedInEarlierLife(job: ScheduledJob, runs: StagedRun[]): Promise<StagedRun[]> {
    const created = job.owedAfter;
    if (created === undefined) return [];
    const horizon = this.term.stageAheadMs + job.maxJitterMs;
    const earlier: StagedRun[] = [];
    for (const run of runs) if (run.dueAt - horizon <= created && (await this.term.takeBack.addedBefore(run, created))) earlier.push(run);
    return earlier;
  }

  /**
   * Takes back runs earlier terms added ahead of their tick (or held), each for its reason; with
   * `unlessStarted`, only those no worker has started (a started one is past taking back). `revision`: a
   * runtime schedule's, which lacks those ticks (see markUnstaging.lua). False when the term cannot write
   * now, or is over; throws when another revision is stored now (the takeover is made again).
   */
  private async takeBackRuns(job: ScheduledJob, decisions: Array<{ run: StagedRun; reason: UnstageReason }>, unlessStarted = true, revision?: string): Promise<boolean> {
    for (const { run, reason } of decisions) {
      if (unlessStarted && !(await this.term.takeBack.waitingStaged(run))) continue;
      if (!(await this.writable())) return false;
      const outcome = await this.term.takeBack.takeBack(this.term.token, this.name, run, reason, retentionMs(job), false, revision);
      this.term.reached();
      if (outcome === 'fenced') {
        this.term.fenced();
        return false;
      }
      if (outcome === 'changed') throw new Error(`schedule ${job.name} was written again while its takeover decided tick ${run.tick}; taking it over again`);
      this.log.info({ tick: new Date(run.tick), reason, outcome }, 'decided a run an earlier term added ahead that no worker started');
    }
    return true;
  }

  /** Decides one tick's fate (paused, overlap) and claims it; adds it when it runs now. True once recorded. */
  private async decide(job: ScheduledJob, tick: number): Promise<boolean> {
    if (!(await this.writable())) return false;
    const request: ClaimRequest = { previousTick: this.ticks.watermark };
    if (job.paused) request.skip = 'paused';
    // A runtime schedule whose job type left jobs/: recorded, never added (no instance could run it).
    else if (!job.handler && !job.flow) request.skip = 'no-handler';
    else if (job.overlap !== 'allow') {
      const decision = decideOverlap(job.overlap, await this.term.previousRun(job), this.buffered.length > 0, this.buffered.length >= job.bufferMax);
      if (decision === 'skip') request.skip = 'overlap';
      if (decision === 'cancel' || decision === 'terminate') {
        // The stop is asked before the tick is claimed, so that a term ending in between leaves no tick
        // buffered behind a run nobody asked to stop (the next leader decides the tick afresh).
        if (!(await this.stopPrevious(job, tick, decision))) return false;
      }
      // A cancelled run still stops in its own time (up to its grace): the new tick waits for it, buffered.
      if (decision === 'buffer' || decision === 'cancel') request.buffer = true;
    }
    return this.claimAndAdd(job, tick, request);
  }

  /** Asks the job's previous run to stop for `tick` (see LaneTerm.stopPreviousRun). False when the term cannot write now, or is over. */
  private async stopPrevious(job: ScheduledJob, tick: number, how: 'cancel' | 'terminate'): Promise<boolean> {
    if (!this.term.leading()) return false;
    const requested = await this.term.stopPreviousRun(job, how, tick);
    this.term.reached();
    if (!requested) {
      this.term.fenced();
      return false;
    }
    this.log.info({ tick: new Date(tick), how }, 'asked the previous run to stop: a newer tick came due');
    return true;
  }

  /** Claims (or records) one tick and, if it is to run now, adds it. True once the tick is recorded. */
  private claimAndAdd(job: ScheduledJob, tick: number, request: ClaimRequest, stagedBy?: FencingToken): Promise<boolean> {
    const { generation, leaderTransitions } = this.term.token;
    const attributes = () => ({ 'leasebeat.job': job.name, 'leasebeat.tick': new Date(tick).toISOString(), 'leasebeat.term': `${generation}/${leaderTransitions}` });
    return inSpan('leasebeat.tick', attributes, () => this.claimAndAddTick(job, tick, request, stagedBy));
  }

  private async claimAndAddTick(job: ScheduledJob, tick: number, request: ClaimRequest, stagedBy?: FencingToken): Promise<boolean> {
    // The self-fence right before the claim: a paused leader must not write, even if it decided earlier.
    if (!this.term.leading()) return false;
    const jobId = tickJobId(job.name, tick);
    const outcome = await this.term.enqueue.claim(job.name, tick, jobId, request);
    if (!outcome) return false;
    this.term.reached();
    switch (outcome.kind) {
      case 'fenced':
        this.term.fenced();
        return false;
      case 'hole':
        // Never expected: the lane claims in order. Re-plan from the ledger (after the retry backoff)
        // rather than leave a hole.
        this.log.error(
          { tick: new Date(tick), previousTick: request.previousTick, lastScheduledTick: outcome.lastScheduledTick },
          'BUG: the ledger refused a claim that would leave a hole; re-planning the job from the ledger',
        );
        this.needsPlan = true;
        throw new Error(`claim of ${job.name}@${tick} refused: the ledger's watermark is behind the previous tick`);
      case 'skipped':
        this.term.metrics?.skipped(job.name, outcome.reason, 1);
        this.log.info({ tick: new Date(tick), reason: outcome.reason }, 'tick skipped');
        this.unbuffer(tick);
        break;
      case 'settled':
        this.unbuffer(tick);
        break;
      case 'buffered':
        // A retried claim of a buffered tick answers buffered again: it is held once.
        if (!this.buffered.includes(tick)) this.buffered.push(tick);
        break;
      case 'claimed':
        this.unbuffer(tick);
        this.unadded = tick;
        this.unaddedBy = job;
        break;
    }
    this.recorded(tick);
    if (this.unadded === tick) await this.finishAdd(job, stagedBy);
    return true;
  }

  /**
   * Adds the claimed tick to BullMQ and confirms it; a failure leaves it to the retry of this step.
   * `stagedBy`: the earlier term whose staged run it is (see TickRunData.stagedBy).
   */
  private async finishAdd(job: ScheduledJob, stagedBy?: FencingToken): Promise<void> {
    const tick = this.unadded!;
    const lateBy = this.term.now() - tick;
    if (this.behind && lateBy > job.catchup.windowMs) {
      // Still claimed (pending) in the ledger: recorded, so the lane may go on; the next term retries it.
      this.log.error({ tick: new Date(tick), lateByMs: lateBy }, 'could not add a claimed tick within its catch-up window; leaving it pending');
      this.unadded = undefined;
      return;
    }
    if (!(await this.writable())) return;
    // The last moment to notice a lost term before the (unfenced) BullMQ add. An abandoned claim stays
    // pending in the ledger and is finished by the next term.
    if (!this.term.leading()) return;
    const jobId = tickJobId(job.name, tick);
    const dueAt = tick + jitterMs(job, tick);
    if (!(await this.term.enqueue.add(job, tick, jobId, { dueAt, stagedBy }))) return;
    const addedAt = this.term.now();
    if (!(await this.confirmAdded(job, tick, jobId))) return;
    this.unadded = undefined;
    if (dueAt > addedAt) this.staged.added({ tick, jobId, queue: job.queue, dueAt }, addedAt);
    // A staged run is in BullMQ before its tick: its lag is BullMQ's promotion, not measured here.
    this.term.metrics?.enqueued(job.name, Math.max(0, addedAt - tick) / 1000);
  }

  /**
   * Records the added run of a claimed tick as enqueued. True once recorded (or settled otherwise since);
   * false when the term ended or cannot write now (the tick stays unadded and is retried).
   */
  private async confirmAdded(job: ScheduledJob, tick: number, jobId: string): Promise<boolean> {
    for (;;) {
      const confirmed = await this.term.enqueue.confirm(job.name, tick, jobId);
      this.term.reached();
      if (confirmed === 'fenced') {
        this.term.fenced();
        return false;
      }
      if (confirmed !== 'not-claimed') return true;
      // A failover lost the claim after the add reached BullMQ: claim the tick again (which also puts it
      // back under the watermark), then confirm. The run is in BullMQ, so a pause no longer applies.
      this.log.warn({ tick: new Date(tick) }, 'the claim of a tick was lost in a failover after its run was added; claiming it again');
      if (!this.term.leading()) return false;
      const again = await this.term.enqueue.claim(job.name, tick, jobId, { added: true });
      if (!again) return false;
      this.term.reached();
      if (again.kind === 'fenced') {
        this.term.fenced();
        return false;
      }
      if (again.kind !== 'claimed') return true;
    }
  }

  /** How long before a tick's due time this lane claims and adds it: the term's horizon for jobs that may be staged. */
  private stagingLead(job: ScheduledJob): number {
    // An overlap decision other than `allow` must see the previous run as it is at the tick, not a horizon
    // earlier, and a flow's children cannot be delayed with their parent in one add: those jobs are
    // decided and added at the tick. A paused definition is not staged, so unpausing it in time counts.
    return job.overlap === 'allow' && job.handler && !job.flow && !job.paused ? this.term.stageAheadMs : 0;
  }

  /**
   * Takes back the staged runs that the job (undefined once removed) no longer wants: all of them once
   * it is removed or paused (by its definition or at run time), those of ticks its schedule no longer
   * has. A run whose due time has passed is out of reach: BullMQ has promoted it. True once every
   * unwanted run is taken back or found promoted; false when the term cannot write now (self-fence).
   * A runtime schedule's run its revision does not have is only held until its tick (see
   * StagedRun.heldUntil), then taken back under the revision stored then.
   */
  private async reviewStaged(job: ScheduledJob | undefined, knownPaused?: boolean): Promise<boolean> {
    // Runs past their due time are dropped, but a take-back that started is carried on (see StagedRuns.dropDue).
    if (this.staged.dropDue(this.term.now()) === 0) return true;
    const paused = job !== undefined && (knownPaused ?? (job.paused || (await this.term.ledger.isPaused(job.name))));
    for (const run of this.staged.list()) {
      const reason: UnstageReason | undefined = unstageReason(run, job, paused);
      if (!reason) continue;
      if (!(await this.writable())) return false;
      const now = this.term.now();
      const revision = reason === 'rescheduled' ? job?.revision : undefined;
      if (revision !== undefined && (run.heldUntil ?? run.dueAt) > now) {
        if (run.heldUntil === undefined && !(await this.hold(run))) return false;
        continue;
      }
      this.staged.takingBack(run, reason);
      const keepMs = job ? retentionMs(job) : MIN_RETENTION_MS;
      const outcome = await this.term.takeBack.takeBack(this.term.token, this.name, run, reason, keepMs, false, revision);
      this.term.reached();
      if (outcome === 'fenced') {
        this.term.fenced();
        return false;
      }
      if (outcome === 'changed') {
        // Written again since (the lane hears of it on the feed), or its tick has not come on Redis' clock.
        this.staged.hold(run, now + HELD_RETRY_MS);
        continue;
      }
      this.staged.settled(run);
      if (outcome === 'taken-back') {
        this.log.info({ tick: new Date(run.tick), reason }, 'took back a staged run before its due time');
      } else {
        this.log.info({ tick: new Date(run.tick), reason, outcome }, 'a staged run could not be taken back: BullMQ had promoted it');
      }
    }
    return true;
  }

  /**
   * Holds a runtime schedule's staged run its revision does not have until its tick: marked, so no worker
   * starts it (see StagedRun.heldUntil). False when fenced.
   */
  private async hold(run: StagedRun): Promise<boolean> {
    const marked = await this.term.ledger.markUnstaging(this.term.token, this.name, run.tick, run.jobId, 'rescheduled', run.queue);
    this.term.reached();
    if (marked === 'fenced') {
      this.term.fenced();
      return false;
    }
    if (marked === 'marked') this.staged.hold(run, run.dueAt);
    else this.staged.settled(run);
    return true;
  }

  /** Drops `tick` from the buffered ticks, once it is released or settled otherwise. */
  private unbuffer(tick: number): void {
    const index = this.buffered.indexOf(tick);
    if (index >= 0) this.buffered.splice(index, 1);
  }

  /** Adds the oldest buffered tick once the run before it has finished; the others wait for its run in turn. */
  private async release(job: ScheduledJob): Promise<void> {
    const tick = this.buffered[0];
    if (tick === undefined) return;
    // A release whose claim was written but whose reply (or its WAIT) was lost made the buffered tick the
    // job's last run: the run it waited for is no longer "previous", so it only waits for its own add.
    const released = (await this.term.ledger.jobState(job.name)).lastJobTick === tick;
    if (!released && (await this.unfinished(job))) return;
    if (!(await this.writable())) return;
    await this.claimAndAdd(job, tick, {});
  }

  /** Records a span of ticks that will not run. True once recorded. */
  private async recordSkips(job: ScheduledJob, range: SkippedTicks): Promise<boolean> {
    if (!(await this.writable()) || !this.term.leading()) return false;
    const outcome = await this.term.ledger.skipRange(this.term.token, job.name, range);
    this.term.reached();
    const logged = { ...range, from: new Date(range.from), to: new Date(range.to) };
    if (outcome === 'fenced') {
      this.term.fenced();
      return false;
    }
    if (outcome === 'overlaps') {
      // Every path that records a span counts it from the ledger again once re-planned (the missed-window
      // span of fire() counts from the lane's own cursor, which would meet the same record each retry).
      this.needsPlan = true;
      throw new SpanOverlapsRecord(job.name, range.from, range.to);
    }
    if (outcome === 'invalid') {
      // The plan never yields such a range; the ledger refused it, so re-plan from the ledger.
      this.log.error(logged, 'BUG: the ledger refused an inverted or empty skipped range; re-planning the job from the ledger');
      this.needsPlan = true;
      throw new Error(`skipped range of ${job.name} refused as inverted or empty`);
    }
    this.term.metrics?.skipped(job.name, range.reason, range.count);
    this.log.warn(logged, 'skipped missed ticks');
    this.recorded(range.to);
    return true;
  }

  private recorded(tick: number): void {
    this.ticks.recorded(tick, this.term.now());
  }

  /** Waits out a self-fence pause; owed ticks stay owed meanwhile. False when the term ended first. */
  private async writable(): Promise<boolean> {
    if (this.term.leading()) return true;
    this.behind = true;
    return this.term.waitLeading();
  }

  private async unfinished(job: ScheduledJob): Promise<boolean> {
    const previous = await this.term.previousRun(job);
    this.term.reached();
    return previous !== 'finished' && previous !== 'none';
  }
}
