import type { ScheduledJob } from '../scheduling/define-job.js';
import { JobLane, type LaneParking } from './job-lane.js';
import type { LaneMarks } from './lane-cursor.js';
import type { LaneTerm } from './lane-term.js';
import { retentionMs } from './fenced-enqueue.js';
import type { IdleSchedule, LoadedSchedule, RuntimeScheduleSource } from './runtime-schedules.js';
import { backoffMs } from '../util/backoff.js';
import { BoundedCache } from '../util/bounded-cache.js';
import { TakeoverWait } from './takeover-wait.js';

/** A schedule as read: runnable, stored but idle, or not stored. */
type Stored = LoadedSchedule | IdleSchedule | undefined;

/** Counts the lanes a takeover waits for: each started lane expects one call; sealed once all are started. */
export interface TakeoverTally {
  expect(): () => void;
  seal(): void;
}

/**
 * How long before a schedule's due instant its lane is made: the staging horizon comes on top. Long
 * enough for a takeover read and a spec read at any load; short enough that a leader holds lanes for a
 * few seconds of ticks only (a million hourly schedules: about 280 ticks a second).
 */
export const REVIEW_LEAD_MS = 10_000;
/**
 * A lane parks only when its next tick is this much further off than the lead: the instant it writes is
 * then past what the scan has read (the authoritative clock may step back a little at a resync).
 */
const PARK_MARGIN_MS = 2_000;
/**
 * How many parked lanes' marks a term keeps, the least recently parked dropped first (about 200 bytes
 * each: 2 MiB). Kept for every schedule a term parked, they grew with each schedule that ticked until
 * every one had (a million hourly schedules: some 200 MiB an hour into the term). A lane whose marks were
 * dropped is taken over from the ledger when due, as every lane is in a term's first pass over the
 * index; 10,000 schedules ticking every minute all keep theirs.
 */
export const PARKED_MARKS_KEPT = 10_000;
/** Entries read per page of the due index, and specs per read. */
const PAGE = 1_000;
/**
 * The overdue part of a takeover (see ScheduleLanes.scan) makes this many lanes at a time, and waits until
 * they have taken their jobs over (or {@link OVERDUE_BATCH_WAIT_MS} has passed) before it makes more: the
 * Redis calls of the ticks that come due meanwhile queue behind those of a thousand takeovers at most (two
 * batched calls of each kind), not behind tens of thousands.
 */
const OVERDUE_BATCH = 1_000;
/**
 * A takeover first reads the entries due from the staging horizon plus this long ago to as long after the
 * horizon: the ticks due in the last and the next few seconds.
 */
const DUE_NOW_MS = 1_000;
const OVERDUE_BATCH_WAIT_MS = 5_000;
/** A stored schedule that does not run (shadowed, invalid) is looked at again this often: the job files may have changed. */
const IDLE_RECHECK_MS = 60_000;
/** The longest sleep between scans of the due index, so that a write the feed did not deliver is found anyway. */
const MAX_SCAN_SLEEP_MS = 5_000;
const RETRY_MS = 500;
const MAX_RETRY_MS = 5_000;

/** What ScheduleLanes needs from the producer's term. */
export interface ScheduleLanesTerm extends LaneTerm {
  /** Starts lanes made here (they run beside the file jobs' lanes, on the same timer). */
  startLane(lane: JobLane): void;
  /** A lane that ends now (its schedule was removed or no longer runs): it takes back its staged runs, then ends. */
  retireLane(lane: JobLane): void;
}

/** The overdue entries of the index a takeover has still to read: those due after `after` and by `until`. */
interface Overdue {
  after: number;
  until: number;
}

interface Parked {
  marks: LaneMarks;
  version: number;
  updatedAt: number;
}

/**
 * The runtime schedules' lanes within one term. A leader keeps a lane only for the schedules whose next
 * tick is near: a lane whose next tick is far off, with nothing staged or pending, is dropped ("parked")
 * after writing when it must be looked at again into the due index in Redis (parkSchedule.lua), and is
 * made again from its marks when that instant draws near (taken over from the ledger once its marks
 * were dropped, see PARKED_MARKS_KEPT). So with a million schedules a leader holds lanes for the few
 * thousand due in the next seconds, the marks (a few numbers each) of the last lanes it parked, and nothing
 * else per schedule: specs are read, and compiled, only when a schedule falls due or changes.
 *
 * The due index never says later than a schedule's next owed tick: an upsert makes it due at once, a
 * lane parks with its next tick, a removal takes it out. So a new leader, which holds no marks, finds
 * every schedule owing ticks (the previous leader's overdue ones first) by reading the index up to now
 * plus the lead, and takes those over from the ledger like any lane; the rest wait in the index.
 */
export class ScheduleLanes {
  private readonly lanes = new Map<string, JobLane>();
  private readonly live = new Map<string, LoadedSchedule>();
  /** Where this term's last dropped lanes stood, by schedule: resumed from here rather than taken over again. */
  private readonly parked: BoundedCache<string, Parked>;
  /** Every entry of the index due by this instant was read in this term (see scan). */
  private scannedTo = -Infinity;
  private wakeScan: (() => void) | undefined;
  private readonly parking: LaneParking;
  /** The takeover that counts the lanes made while it is set (the term's first scan, and its overdue entries). */
  private counting: TakeoverTally | undefined;
  /** Overdue entries a takeover (or a resync) has yet to read, and the reading of them in the background. */
  private overdue: Overdue | undefined;
  private readingOverdue: Promise<void> | undefined;
  /** The lanes the takeover's read of the entries due now and soon made: the overdue ones wait for them. */
  private dueFirst: TakeoverWait | undefined;
  /** Reads and their lane changes run one at a time, so an older read never overwrites a newer one. */
  private turn: Promise<void> = Promise.resolve();

  constructor(
    private readonly source: RuntimeScheduleSource,
    private readonly term: ScheduleLanesTerm,
    private readonly reviewLeadMs = REVIEW_LEAD_MS,
    parkedMarksKept = PARKED_MARKS_KEPT,
  ) {
    this.parked = new BoundedCache(parkedMarksKept);
    this.parking = {
      afterMs: this.leadMs + PARK_MARGIN_MS,
      park: (lane, marks, reviewAt) => this.park(lane, marks, reviewAt),
    };
  }

  /** How long before its due instant a schedule gets a lane. */
  private get leadMs(): number {
    return this.reviewLeadMs + this.term.stageAheadMs;
  }

  /** The compiled definition of a schedule that has a lane now. */
  job(id: string): ScheduledJob | undefined {
    return this.live.get(id)?.job;
  }

  lane(id: string): JobLane | undefined {
    return this.lanes.get(id);
  }

  /** The schedules with a lane now. */
  get size(): number {
    return this.lanes.size;
  }

  /** How many parked lanes' marks are kept (at most the `parkedMarksKept` of the constructor). */
  get parkedSize(): number {
    return this.parked.size;
  }

  /** Ids of the schedules with a lane now. */
  ids(): string[] {
    return [...this.lanes.keys()];
  }

  /** The lanes now (at the end of a term: what may still be writing). */
  lanesNow(): JobLane[] {
    return [...this.lanes.values()];
  }

  /**
   * Scans the due index until the term ends: every schedule due within the lead gets a lane. The lanes made
   * until the first scan and its overdue entries are read (see scan) are counted in `takeover`, sealed then.
   */
  async run(takeover: TakeoverTally): Promise<void> {
    this.counting = takeover;
    for (let failures = 0; !this.term.signal.aborted; ) {
      try {
        await this.exclusive(() => this.scan(this.term.now() + this.leadMs));
        this.readingOverdue ??= this.readOverdue().finally(() => (this.readingOverdue = undefined));
        failures = 0;
        const next = await this.source.nextDue(this.scannedTo);
        this.term.reached();
        const sleepMs = next === undefined ? MAX_SCAN_SLEEP_MS : Math.min(MAX_SCAN_SLEEP_MS, Math.max(0, next - this.leadMs - this.term.now()));
        await this.sleep(sleepMs);
      } catch (error) {
        if (this.term.signal.aborted) return;
        const retryInMs = backoffMs(failures++, RETRY_MS, MAX_RETRY_MS);
        this.term.log.warn({ err: error, retryInMs }, 'could not read the due runtime schedules; retrying');
        await this.sleep(retryInMs);
      }
    }
    await this.readingOverdue;
  }

  /** The takeover is done once its overdue entries are read too, and every lane it made has taken its job over. */
  private sealTakeover(): void {
    const takeover = this.counting;
    this.counting = undefined;
    takeover?.seal();
  }

  /** Schedules `ids` were written or removed: their lanes follow at once (a new one is made if none runs). */
  changed(ids: readonly string[], refresh = false): Promise<void> {
    return this.exclusive(() => this.follow(ids, refresh));
  }

  private async follow(ids: readonly string[], refresh: boolean): Promise<void> {
    for (let i = 0; i < ids.length; i += PAGE) {
      const slice = ids.slice(i, i + PAGE);
      const loaded = await this.source.load(slice);
      this.term.reached();
      for (const [j, id] of slice.entries()) await this.apply(id, loaded[j], { refresh, found: false });
    }
  }

  /**
   * The feed may have missed changes: every lane reads its spec again, and the next scan reads the whole
   * index up to now (an upsert made its schedule due at once).
   */
  async resync(): Promise<void> {
    this.scannedTo = -Infinity;
    this.wakeScan?.();
    await this.changed(this.ids());
  }

  /** The job files changed: every lane's schedule is compiled again against them. */
  async filesChanged(): Promise<void> {
    await this.changed(this.ids(), true);
  }

  /**
   * Reads the due index from where the last scan ended up to `until`, making lanes for what it finds.
   * A takeover (or a resync) reads the whole index up to there, which may hold tens of thousands of
   * overdue entries (schedules just written, due by a first tick before their write) ahead of the ticks
   * due now. So it reads the entries due within the last and the next few seconds first (the ticks that
   * came due while this leader started, and a stopped leader's lanes: an entry stays at its instant, a
   * staging horizon before the tick, until its lane parks), then the rest of the last lead, then the rest
   * of the lead ahead, and leaves the older ones to readOverdue, in the background, once these lanes have
   * taken their jobs over. The older ones are late already or owe nothing now, and owe the same ticks whenever
   * they are looked at (a runtime schedule owes its ticks from its creation, see JobLane.takeOver).
   */
  private async scan(until: number): Promise<void> {
    if (this.scannedTo > -Infinity) {
      await this.readDue(this.scannedTo, until, (ids) => this.look(ids));
      this.scannedTo = Math.max(this.scannedTo, until);
      return;
    }
    const now = this.term.now();
    const recent = now - this.leadMs;
    const justDue = Math.max(recent, now - this.term.stageAheadMs - DUE_NOW_MS);
    const soon = Math.min(until, now + this.term.stageAheadMs + DUE_NOW_MS);
    const dueFirst = new TakeoverWait();
    for (const [after, to] of [[justDue, soon], [recent, justDue], [soon, until]] as const) await this.readDue(after, to, (ids) => this.look(ids, dueFirst));
    dueFirst.seal();
    this.dueFirst = dueFirst;
    this.overdue = { after: -Infinity, until: Math.max(this.overdue?.until ?? -Infinity, recent) };
    this.scannedTo = until;
  }

  /**
   * Reads the entries of the index due after `after` and by `until`, earliest first, a page at a time,
   * passing their ids to `take`; `read(instant)` is called once every entry due by that instant was passed.
   */
  private async readDue(after: number, until: number, take: (ids: string[]) => Promise<void>, read?: (instant: number) => void): Promise<void> {
    for (;;) {
      const page = await this.source.due(after, until, PAGE);
      this.term.reached();
      if (page.length < PAGE) {
        await take(page.map((entry) => entry.id));
        return;
      }
      // A page may end inside a group due at one instant (10,000 schedules firing together): read that
      // group whole (the source reads it in bounded batches, by member: none skipped or read twice, see
      // ScheduleStore.dueExactly), then go on past it: the cursor passes an instant only once all of it is read.
      const last = page.at(-1)!.at;
      await take(page.filter((entry) => entry.at < last).map((entry) => entry.id));
      await take(await this.source.dueExactly(last));
      after = last;
      read?.(last);
    }
  }

  /**
   * Reads the overdue entries a takeover left (see scan) and makes their lanes, {@link OVERDUE_BATCH} at a
   * time, each batch once the last has taken its jobs over; then the takeover is done. A resync meanwhile
   * reads them again from the start (see scan): the lanes made already are not made twice.
   */
  private async readOverdue(): Promise<void> {
    for (let failures = 0; this.overdue && !this.term.signal.aborted; ) {
      await this.takenOver(this.dueFirst);
      const overdue = this.overdue;
      try {
        const done = (instant: number): void => {
          if (this.overdue === overdue) overdue.after = instant;
        };
        await this.readDue(overdue.after, overdue.until, (ids) => this.lookInBatches(ids), done);
        if (this.overdue === overdue) this.overdue = undefined;
        failures = 0;
      } catch (error) {
        if (this.term.signal.aborted) return;
        const retryInMs = backoffMs(failures++, RETRY_MS, MAX_RETRY_MS);
        this.term.log.warn({ err: error, retryInMs }, 'could not read the overdue runtime schedules; retrying');
        await this.term.timer.nap(retryInMs).done;
      }
    }
    this.sealTakeover();
  }

  /** Makes lanes for `ids` as look does, {@link OVERDUE_BATCH} at a time, each batch once the last has taken its jobs over. */
  private async lookInBatches(ids: string[]): Promise<void> {
    for (let i = 0; i < ids.length && !this.term.signal.aborted; i += OVERDUE_BATCH) {
      const batch = new TakeoverWait();
      // Each batch reads its specs in its own turn: changes told meanwhile are followed in between.
      await this.exclusive(() => this.look(ids.slice(i, i + OVERDUE_BATCH), batch));
      batch.seal();
      await this.takenOver(batch);
    }
  }

  /**
   * Waits until the lanes of `batch` have taken their jobs over, or {@link OVERDUE_BATCH_WAIT_MS} has passed
   * (a lane that cannot take its job over, Redis failing, retries in its own time), or the term ended.
   */
  private async takenOver(batch: TakeoverWait | undefined): Promise<void> {
    if (!batch) return;
    const bound = this.term.timer.nap(OVERDUE_BATCH_WAIT_MS);
    await Promise.race([batch.done, bound.done]);
    bound.wake();
  }

  /** Makes lanes for the due schedules `ids` that have none (counted in `batch`, when given). */
  private async look(ids: string[], batch?: TakeoverWait): Promise<void> {
    const waiting = ids.filter((id) => !this.lanes.has(id));
    // A group due at one instant may be any size (a million hourly schedules at hh:00): its specs are read
    // and compiled a page at a time, so no one read of Redis, nor its reply, grows with the group.
    for (let i = 0; i < waiting.length; i += PAGE) {
      const slice = waiting.slice(i, i + PAGE);
      const loaded = await this.source.load(slice);
      this.term.reached();
      for (const [j, id] of slice.entries()) await this.apply(id, loaded[j], { refresh: false, found: true, batch });
    }
  }

  /**
   * Brings schedule `id`'s lane in step with what is stored: `found` by the scan (it is due), or told of
   * (a change); `refresh`: its lane reads its definition again even if the version did not change.
   */
  private async apply(id: string, loaded: Stored, { refresh, found, batch }: { refresh: boolean; found: boolean; batch?: TakeoverWait }): Promise<void> {
    const lane = this.lanes.get(id);
    if (loaded?.job === undefined) {
      // Removed, or stored but not runnable: a lane takes back its staged runs and ends.
      if (lane) this.retire(lane);
      this.parked.delete(id);
      // Not stored: the index entry, if any, is stale. Not runnable: looked at again later, in case the job files changed.
      const reviewAt = loaded ? this.term.now() + IDLE_RECHECK_MS : undefined;
      if ((await this.source.park(this.term.token, id, loaded?.version ?? 0, loaded?.updatedAt ?? 0, reviewAt)) === 'fenced') this.term.fenced();
      this.term.reached();
      return;
    }
    const known = this.live.get(id);
    // Reads are applied in order, but a lane's own read (see park) may meet a newer one already applied.
    if (known && loaded.updatedAt < known.updatedAt) return;
    if (lane) {
      this.live.set(id, loaded);
      if (refresh || known?.version !== loaded.version || known.updatedAt !== loaded.updatedAt) lane.wake();
      return;
    }
    // Due after what the scan has read: the scan makes its lane when it draws near (a million schedules
    // written at once are not all looked at at once). A parked lane's marks wait for it.
    if (!found && loaded.reviewAt !== undefined && loaded.reviewAt > this.scannedTo) return;
    this.live.set(id, loaded);
    const parked = this.parked.get(id);
    this.parked.delete(id);
    const counted = [this.counting?.expect(), batch?.expect()];
    const edited = parked !== undefined && (parked.version !== loaded.version || parked.updatedAt !== loaded.updatedAt);
    const made = new JobLane(id, this.term, {
      parking: this.parking,
      // A lane parks only after taking up its revision: resumed by the same one, it has nothing to review.
      ...(parked ? { resume: parked.marks, ...(edited ? {} : { approved: loaded.job.revision }) } : {}),
      onTakenOver: () => counted.forEach((tookOver) => tookOver?.()),
    });
    // Edited while parked: as a sleeping lane would be told (its rewind floor is the new version's write).
    if (edited) made.wake();
    this.lanes.set(id, made);
    this.term.startLane(made);
  }

  private retire(lane: JobLane): void {
    this.lanes.delete(lane.name);
    this.live.delete(lane.name);
    this.term.retireLane(lane);
  }

  /** What a lane calls to be dropped until `reviewAt` (see LaneParking). */
  private async park(lane: JobLane, marks: LaneMarks, reviewAt: number | undefined): Promise<boolean> {
    const loaded = this.live.get(lane.name);
    if (!loaded || this.lanes.get(lane.name) !== lane) return false;
    const outcome = await this.source.park(this.term.token, lane.name, loaded.version, loaded.updatedAt, reviewAt);
    this.term.reached();
    if (outcome === 'fenced') {
      this.term.fenced();
      return false;
    }
    if (outcome === 'changed') {
      // Written since this lane read it: read it again (the lane is told), and go on.
      await this.changed([lane.name]);
      return false;
    }
    // Changed while the write was on its way (the feed delivered it meanwhile): the lane goes on with it.
    if (this.live.get(lane.name) !== loaded || this.lanes.get(lane.name) !== lane) return false;
    this.lanes.delete(lane.name);
    this.live.delete(lane.name);
    this.parked.set(lane.name, { marks, version: loaded.version, updatedAt: loaded.updatedAt });
    // Its ledger is pruned here: the term's maintenance prunes only the jobs with a lane.
    await this.term.ledger.prune(lane.name, this.term.now() - retentionMs(loaded.job)).catch(() => undefined);
    return true;
  }

  private exclusive(work: () => Promise<void>): Promise<void> {
    const run = this.turn.then(work);
    this.turn = run.catch(() => undefined);
    return run;
  }

  private async sleep(ms: number): Promise<void> {
    const nap = this.term.timer.nap(ms);
    this.wakeScan = () => nap.wake();
    await nap.done;
    this.wakeScan = undefined;
  }
}
