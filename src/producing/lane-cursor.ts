/**
 * Where one job's lane stands in its walk through the job's ticks, kept apart from the Redis calls of
 * {@link JobLane} so it can be tested on explicit times. No I/O and no clock of its own: every method
 * that depends on time takes `now`.
 *
 * The lane records its job's ticks in nominal tick order with no holes, so two marks describe the walk:
 * the {@link LaneCursor.position} (every tick at or before it is recorded, or owed to no one: the next
 * tick is the first one after it) and the {@link LaneCursor.watermark} (the newest recorded tick: the
 * `previousTick` of the next claim). Staging records ticks ahead of now, which moves the position past
 * now; a redefinition may then have to walk back to the newest tick recorded by now (a {@link rewind}).
 */

/** What a takeover read of the ledger says about where the job's ticks stand (see TakeOverState). */
export interface TakeoverMarks {
  /** The ledger's contiguous watermark: undefined while no term has ticked the job yet. */
  lastScheduledTick: number | undefined;
  /** When leaders started owing the job its ticks (recorded by the first takeover that saw it). */
  scheduledSince: number;
  /** The newest tick recorded at or before now (a claim, or a skipped range's end). */
  newestDueTick: number | undefined;
}

/**
 * Where a takeover starts walking the job's ticks from (the first tick it owes is the next one after it).
 */
export function takeoverCursor({ lastScheduledTick, scheduledSince, newestDueTick }: TakeoverMarks, now: number): number {
  // A job no term has ticked yet owes its ticks from the moment a leader first saw it, so a failover
  // before its first tick cannot lose that tick. (Finishing pending ticks never moves the watermark:
  // they are recorded already.)
  if (lastScheduledTick === undefined) return scheduledSince;
  if (lastScheduledTick <= now) return lastScheduledTick;
  // With ticks staged past now, start from the newest tick recorded by now: walking the staged ones
  // again costs a `settled` answer each, and finds the ticks a schedule edited since then put between.
  return newestDueTick ?? now;
}

/** Where a lane stood when it was dropped (see LaneCursor.marks): enough to walk on from there later. */
export interface LaneMarks {
  position: number;
  watermark: number | undefined;
}

export class LaneCursor {
  /** Every tick at or before this instant is recorded (or, once the takeover is done, owed to no one). */
  private cursor = -Infinity;
  /** The newest recorded tick: the `previousTick` of the next claim. */
  private newest: number | undefined;
  /** Redefined: the cursor may have run ahead of now (staged ticks), past ticks the new schedule has. */
  private rewindDue = false;
  /** Ticks recorded while still ahead of now (staged, or skipped early), not yet folded into {@link dueCursor}. */
  private recordedAhead: number[] = [];
  /** Every tick at or before this is recorded (or owed to no one): where a rewind may walk back to. */
  private dueCursor = -Infinity;

  /** Every tick at or before this instant is recorded (or owed to no one): the next tick is the first after it. */
  get position(): number {
    return this.cursor;
  }

  /** The newest recorded tick: the `previousTick` of the next claim. */
  get watermark(): number | undefined {
    return this.newest;
  }

  /** A rewind is owed: the job was redefined since the lane last walked back. */
  get rewindPending(): boolean {
    return this.rewindDue;
  }

  /**
   * Where the lane stands at `now`, to walk on later from there ({@link resume}). Only for a lane with no
   * tick recorded ahead of `now` and no rewind owed.
   */
  marks(now: number): LaneMarks {
    return { position: Math.min(this.cursor, this.recordedBy(now)), watermark: this.newest };
  }

  /**
   * Walks on from where a dropped lane of the same term stood: the ledger holds nothing newer for the
   * job, since only this term's lanes record its ticks and none did after the drop.
   */
  resume(marks: LaneMarks): void {
    this.cursor = marks.position;
    this.dueCursor = marks.position;
    this.newest = marks.watermark;
  }

  /**
   * A takeover read the ledger: the watermark is the ledger's, and the walk starts where
   * {@link takeoverCursor} says. Returns the new position (where the catch-up plan starts).
   */
  takeOver(marks: TakeoverMarks, now: number): number {
    this.newest = marks.lastScheduledTick;
    this.cursor = takeoverCursor(marks, now);
    return this.cursor;
  }

  /**
   * The takeover recorded what it owed up to `now` (its catch-up plan): every tick at or before `now`
   * is recorded or owed to no one.
   */
  tookOver(now: number): void {
    this.cursor = Math.max(now, this.cursor);
    this.dueCursor = Math.max(this.dueCursor, now);
  }

  /** A tick (or the end of a skipped range) was recorded at `now`. */
  recorded(tick: number, now: number): void {
    this.newest = Math.max(tick, this.newest ?? -Infinity);
    this.cursor = Math.max(tick, this.cursor);
    if (tick > now) this.recordedAhead.push(tick);
    else this.dueCursor = Math.max(this.dueCursor, tick);
  }

  /** The job's definition changed: the next {@link rewind} walks back to the newest tick recorded by then. */
  redefined(): void {
    this.rewindDue = true;
  }

  /**
   * Walks back if the job was redefined since the last rewind: to the newest tick recorded by `now`, or,
   * for a schedule's new version, to `floor` (when it was written: it owes its ticks after then, and
   * only those); returns the (possibly new) position.
   */
  rewind(now: number, floor = -Infinity): number {
    if (!this.rewindDue) return this.cursor;
    this.rewindDue = false;
    // A schedule's version: from its write, forward or back. Forward: it owes nothing before it (what the
    // version before owed up to then, the lane records first, see JobLane.recordOutrun). Back: the lane
    // heard of the write only after it had recorded ticks past it by the version before (a slow feed, a
    // takeover by the version before); the new version's ticks since its write are owed all the same.
    // Those recorded already are answered `settled` by the ledger, which accepts a tick below the
    // watermark (it refuses only holes).
    if (floor > -Infinity) this.cursor = floor;
    // A file job: staging moved the cursor up to a horizon past now, and the new definition may have
    // ticks between the newest tick recorded by now and there: walk them again.
    else this.cursor = Math.min(this.cursor, this.recordedBy(now));
    return this.cursor;
  }

  /**
   * Where the lane's walk through the ticks stood at `now`: every tick at or before it is recorded. The
   * ticks recorded ahead that came due by `now` are folded in.
   */
  recordedBy(now: number): number {
    for (const tick of this.recordedAhead) if (tick <= now) this.dueCursor = Math.max(this.dueCursor, tick);
    this.recordedAhead = this.recordedAhead.filter((tick) => tick > now);
    return this.dueCursor;
  }
}
