/**
 * The schedule plan: which nominal ticks a job has, which of them to enqueue after a period without
 * a leader, how far to jitter a tick, and what to do when runs overlap. Pure functions of the job and
 * of times in epoch milliseconds, so that any leader computes the same answers.
 *
 * ## Time zones and daylight-saving time
 *
 * A cron `schedule` is read on the wall clock of the job's `timezone` (default `UTC`). Every local
 * time the expression matches fires at most once, at one well-defined instant:
 *
 * - **A local time the clocks skip** (spring forward) fires once, at the first instant after the gap.
 *   In Europe/Berlin on 2026-03-29 the clocks jump from 02:00 to 03:00, so `30 2 * * *` fires at
 *   03:00 CEST (01:00 UTC). Several skipped times (`0,30 2 * * *`) collapse into that one run, and a
 *   schedule that also matches 03:00 itself (`0 2,3 * * *`) still runs once at 03:00.
 * - **A local time the clocks show twice** (fall back) fires once, at its first occurrence. In
 *   Europe/Berlin on 2026-10-25 the clocks go back from 03:00 to 02:00, so `30 2 * * *` fires at
 *   02:30 CEST (00:30 UTC) and not again at 02:30 CET. This holds for every schedule: one with a
 *   wildcard hour, such as `0 * * * *` or `* * * * *`, fires nothing during the second pass through
 *   02:00–02:59 CET.
 * - **`every` intervals and schedules in `UTC`** have no daylight-saving time: they fire at a fixed
 *   real-time rate. Use them for work that must keep an even rate through the change.
 *
 * The rule does not depend on when, or from which earlier tick, a leader computes the schedule.
 * cron-parser 5 on its own behaves differently and depends on where its iteration started: it moves
 * a skipped time forward by the length of the gap (02:30 → 03:30, so `0,15,30,45 2 * * *` runs four
 * times between 03:00 and 03:45), and on the repeated hour it runs wildcard-hour schedules twice but
 * fixed-hour ones once. leasebeat therefore uses cron-parser only to parse expressions and to match
 * days, and computes the instants itself.
 *
 * Cron `H` fields are hashed with the job name as the seed, so every instance picks the same value.
 *
 * ## Instants are whole milliseconds
 *
 * Ticks are whole milliseconds, and every exported function floors the instants it is given: for a
 * whole-millisecond tick, `tick > x` iff `tick > floor(x)`, so flooring changes no answer. It keeps the
 * cron series, which rounds to seconds on the wall clock, from disagreeing with itself about an
 * instant a fraction of a millisecond before a tick (that once planned a skip from :41 back to :40).
 */
import { createHash } from 'node:crypto';
import { CronCalendar } from './cron.js';
import type { OverlapPolicy, ScheduledJob } from './define-job.js';
import { TimeZone } from './time-zone.js';

/** How many ticks {@link ticksInRange} lists before it summarises the rest. */
export const MAX_LISTED_TICKS = 1_000;

/** Consecutive ticks, summarised: the first and last (inclusive) and how many there are. */
export interface TickSpan {
  from: number;
  to: number;
  count: number;
}

/**
 * Why ticks did not run. `missed-window`: older than the catch-up window when a leader took over.
 * `catchup-limit`: inside the window but beyond what `catchup.mode`/`max` allows. `paused`: the job
 * is paused. `overlap`: the previous run was still unfinished. `no-handler`: a runtime schedule's job
 * type is gone. `rescheduled`, `removed`: owed by a runtime schedule's version that an edit replaced or a
 * removal removed before any leader recorded them (and, for staged runs taken back, the same).
 */
export type SkipReason = 'missed-window' | 'catchup-limit' | 'paused' | 'overlap' | 'no-handler' | 'rescheduled' | 'removed';

export interface SkippedTicks extends TickSpan {
  reason: SkipReason;
}

/** The nominal ticks of a job. */
interface TickSeries {
  /** The first tick later than `instant`. */
  after(instant: number): number | undefined;
  /** The last tick at or before `instant`. */
  atOrBefore(instant: number): number | undefined;
  /** How many ticks lie in `(from, to]`. */
  countIn(from: number, to: number): number;
}

/** `every` ticks: `anchor + k * period` for every integer k. */
class IntervalSeries implements TickSeries {
  constructor(
    private readonly anchor: number,
    private readonly period: number,
  ) {}

  after(instant: number): number {
    return this.anchor + (this.steps(instant) + 1) * this.period;
  }

  atOrBefore(instant: number): number {
    return this.anchor + this.steps(instant) * this.period;
  }

  countIn(from: number, to: number): number {
    return Math.max(0, this.steps(to) - this.steps(from));
  }

  private steps(instant: number): number {
    return Math.floor((instant - this.anchor) / this.period);
  }
}

/**
 * Cron ticks: wall times from the calendar mapped to instants by the zone. Both mappings are
 * monotonic, so searching happens on the wall clock; only spring-forward gaps make several wall
 * times share an instant, which {@link countIn} corrects for.
 */
class CronSeries implements TickSeries {
  constructor(
    private readonly calendar: CronCalendar,
    private readonly zone: TimeZone,
  ) {}

  after(instant: number): number | undefined {
    const wall = this.calendar.firstAtOrAfter(this.zone.firstWallAfter(instant));
    return wall === undefined ? undefined : this.zone.instantOf(wall);
  }

  atOrBefore(instant: number): number | undefined {
    const wall = this.calendar.lastAtOrBefore(this.zone.firstWallAfter(instant) - 1);
    return wall === undefined ? undefined : this.zone.instantOf(wall);
  }

  countIn(from: number, to: number): number {
    if (to <= from) return 0;
    let count = this.calendar.countIn(this.zone.firstWallAfter(from), this.zone.firstWallAfter(to));
    for (const { at, before, after } of this.zone.transitionsIn(from, to)) {
      if (after <= before) continue;
      // Every matching wall time in the gap fires at the transition instant, the same instant as the
      // wall time right after the gap.
      const inGap = this.calendar.countIn(at + before, at + after);
      if (inGap > 0) count -= this.calendar.includes(at + after) ? inGap : inGap - 1;
    }
    return count;
  }
}

/** Restricts a series to `[startAt, endAt]`. */
class BoundedSeries implements TickSeries {
  constructor(
    private readonly inner: TickSeries,
    private readonly startAt = -Infinity,
    private readonly endAt = Infinity,
  ) {}

  after(instant: number): number | undefined {
    const tick = this.inner.after(Math.max(instant, this.startAt - 1));
    return tick !== undefined && tick <= this.endAt ? tick : undefined;
  }

  atOrBefore(instant: number): number | undefined {
    const tick = this.inner.atOrBefore(Math.min(instant, this.endAt));
    return tick !== undefined && tick >= this.startAt ? tick : undefined;
  }

  countIn(from: number, to: number): number {
    const low = Math.max(from, this.startAt - 1);
    const high = Math.min(to, this.endAt);
    return high > low ? this.inner.countIn(low, high) : 0;
  }
}

/** A one-shot schedule's single tick (`at`), or no tick at all for a job type. */
class SingleTickSeries implements TickSeries {
  constructor(private readonly tick: number | undefined) {}

  after(instant: number): number | undefined {
    return this.tick !== undefined && this.tick > instant ? this.tick : undefined;
  }

  atOrBefore(instant: number): number | undefined {
    return this.tick !== undefined && this.tick <= instant ? this.tick : undefined;
  }

  countIn(from: number, to: number): number {
    return this.tick !== undefined && this.tick > from && this.tick <= to ? 1 : 0;
  }
}

const seriesByJob = new WeakMap<ScheduledJob, TickSeries>();

function seriesOf(job: ScheduledJob): TickSeries {
  let series = seriesByJob.get(job);
  if (!series) {
    series = buildSeries(job);
    seriesByJob.set(job, series);
  }
  return series;
}

function buildSeries(job: ScheduledJob): TickSeries {
  const { trigger } = job;
  const ticks =
    trigger.kind === 'every'
      ? new IntervalSeries(job.startAt ?? 0, trigger.everyMs)
      : trigger.kind === 'cron'
        ? new CronSeries(CronCalendar.compile(trigger.expression, job.name), TimeZone.of(job.timezone))
        : new SingleTickSeries(trigger.kind === 'once' ? trigger.at : undefined);
  // A schedule's version owes no tick from before it was written; unlike startAt, that bound does not
  // move an interval's alignment.
  const from = job.owedAfter === undefined ? job.startAt : Math.max(job.startAt ?? -Infinity, job.owedAfter + 1);
  return from === undefined && job.endAt === undefined ? ticks : new BoundedSeries(ticks, from, job.endAt);
}

const withEarlierTicksByJob = new WeakMap<ScheduledJob, ScheduledJob>();

/**
 * `job` as a backfill walks it: a runtime schedule's ticks from before its creation too, which no live tick
 * owes but an operator may ask for (the time it was scheduled elsewhere, before a move from BullMQ), within
 * its own startAt and endAt. A file job is itself.
 */
export function withTicksBeforeCreation(job: ScheduledJob): ScheduledJob {
  if (job.owedAfter === undefined) return job;
  let unbounded = withEarlierTicksByJob.get(job);
  if (!unbounded) {
    const { owedAfter: _created, ...rest } = job;
    unbounded = rest;
    withEarlierTicksByJob.set(job, unbounded);
  }
  return unbounded;
}

/**
 * The first nominal tick later than `after`, within `startAt`/`endAt`; undefined once the schedule
 * has ended (or a cron expression has no match within about 8 years). `every` ticks are multiples of
 * the interval since the Unix epoch, or since `startAt` when it is set.
 */
export function nextTick(job: ScheduledJob, after: number): number | undefined {
  return seriesOf(job).after(Math.floor(after));
}

/**
 * {@link nextTick} of a job looked at once and dropped (a schedule checked before it is written): its
 * series is not kept. A weak entry for a job that dies young costs the collector more than the series.
 */
export function nextTickOnce(job: ScheduledJob, after: number): number | undefined {
  return (seriesByJob.get(job) ?? buildSeries(job)).after(Math.floor(after));
}

/**
 * How far ahead a listing of next ticks (describe, the status page) and a schedule's `limit` look. A walk
 * costs per day it crosses, not per tick: 1,000 ticks of `0 0 29 2 *` span 4,000 years and took half a
 * second of the leader's event loop. Ten years (3,653 days) hold every tick of any cron that fires at all (the longest
 * gap is 29 February across a skipped leap year, 8 years).
 */
export const LOOKAHEAD_MS = 3_653 * 86_400_000;

/**
 * The next `count` nominal ticks later than `after`, oldest first: fewer if the schedule ends, or if they
 * would be later than `until` (none later is listed).
 */
export function nextTicks(job: ScheduledJob, after: number, count: number, until = Infinity): number[] {
  const ticks: number[] = [];
  for (let tick = nextTick(job, after); tick !== undefined && tick <= until && ticks.length < count; tick = nextTick(job, tick)) {
    ticks.push(tick);
  }
  return ticks;
}

/**
 * The next ticks a describe lists, as ISO instants: at most {@link MAX_LISTED_TICKS} of them, and none
 * beyond {@link LOOKAHEAD_MS}, whatever was asked, so that no request walks a calendar for long.
 */
export function listedTicks(job: ScheduledJob, after: number, count: number): string[] {
  const capped = Math.max(0, Math.min(Math.floor(count), MAX_LISTED_TICKS));
  return nextTicks(job, after, capped, after + LOOKAHEAD_MS).map((tick) => new Date(tick).toISOString());
}

/**
 * The nominal ticks in `(from, to]`: the first `limit` listed, oldest first, and any beyond that only
 * summarised in `rest`, so a per-second job over a day costs no more than `limit` ticks.
 */
export function ticksInRange(
  job: ScheduledJob,
  from: number,
  to: number,
  limit = MAX_LISTED_TICKS,
): { ticks: number[]; rest: TickSpan | undefined } {
  const series = seriesOf(job);
  [from, to] = [Math.floor(from), Math.floor(to)];
  const ticks: number[] = [];
  for (let tick = series.after(from); tick !== undefined && tick <= to && ticks.length < limit; tick = series.after(tick)) {
    ticks.push(tick);
  }
  return { ticks, rest: ticks.length === limit ? spanOf(series, ticks[limit - 1]!, to) : undefined };
}

/** What to do after a period in which no leader enqueued this job's ticks. */
export interface CatchupPlan {
  /** Missed ticks to enqueue now, oldest first. */
  enqueue: number[];
  /** Missed ticks that will not run, oldest first. */
  skipped: SkippedTicks[];
}

/**
 * Decides, when a leader takes over at `now`, what happens to the ticks in `(lastTick, now]` that
 * nobody enqueued. `lastTick` is the newest tick any leader scheduled; for a job never scheduled it
 * is undefined, and nothing is backfilled: the job starts with its first tick after `now`.
 *
 * Ticks older than `now - catchup.window` are skipped as `missed-window`. Of the rest, mode `none`
 * enqueues nothing, `latest` the newest one, and `all` up to `catchup.max` of the newest; the others
 * are skipped as `catchup-limit`. A paused job skips all of them as `paused`. Counting never
 * enumerates the skipped ticks.
 *
 * `paused` is whether the job is paused at `now`: its definition's `paused`, or a pause set at run time
 * (`leasebeat pause`, kept in Redis), which the caller reads. The pause at the takeover decides for the
 * whole missed span: a job paused now runs none of its missed ticks, so none of them is a `catchup-limit`
 * or `missed-window` loss. A pause lifted before the takeover left no record (resume deletes it), so those
 * ticks follow the catch-up policy like any missed ticks: a resumed job is meant to run again.
 */
export function planCatchup(job: ScheduledJob, lastTick: number | undefined, now: number, paused = job.paused): CatchupPlan {
  if (lastTick === undefined) return { enqueue: [], skipped: [] };
  [lastTick, now] = [Math.floor(lastTick), Math.floor(now)];
  if (now <= lastTick) return { enqueue: [], skipped: [] };
  const series = seriesOf(job);
  if (paused) return { enqueue: [], skipped: compact([skipped(series, lastTick, now, 'paused')]) };

  const { windowMs, mode, max } = job.catchup;
  const recentAfter = Math.max(lastTick, now - windowMs - 1);
  const keep = mode === 'none' ? 0 : mode === 'latest' ? 1 : max;
  const enqueue: number[] = [];
  for (let tick = series.atOrBefore(now); tick !== undefined && tick > recentAfter && enqueue.length < keep; ) {
    enqueue.unshift(tick);
    tick = series.atOrBefore(tick - 1);
  }
  const oldestEnqueued = enqueue[0] ?? now + 1;
  return {
    enqueue,
    skipped: compact([
      skipped(series, lastTick, recentAfter, 'missed-window'),
      skipped(series, recentAfter, oldestEnqueued - 1, 'catchup-limit'),
    ]),
  };
}

/** When a takeover decides the runs earlier terms staged (see {@link planLateStaged}). */
export interface LateStagedTakeover {
  /** The instant the takeover read the job's ledger: the catch-up plan counts the ticks missed up to it. */
  now: number;
  /**
   * When this term raised the fence. From then on workers held the earlier terms' staged runs for this
   * term's review alone: a run that came due after it was not missed while no leader ran.
   */
  fencedAt: number;
  /** The job is paused (by its definition, or at run time). */
  paused: boolean;
}

/**
 * What a leader taking a job over does with runs an earlier term staged that no worker has started
 * although they are due (`lateTicks`). All are taken back when the job is paused. A run that came due
 * after this term raised its fence is the term's own tick, due under a live leader (the one that staged
 * it, then this one): it is kept, whatever the catch-up policy, and counts toward no limit. The others came
 * due while no leader ran and are decided as such ticks are, so staging changes nothing the catch-up
 * policy would decide: the policy keeps the newest ones within the window, counting the ticks `plan` runs
 * first (they are newer), and takes back the rest: those outside the window as `missed-window`, those past
 * the policy's count as `catchup-limit`. Returns the ticks to take back, with why.
 */
export function planLateStaged(
  job: ScheduledJob,
  lateTicks: number[],
  plan: CatchupPlan,
  { now, fencedAt, paused }: LateStagedTakeover,
): Array<{ tick: number; reason: 'paused' | 'missed-window' | 'catchup-limit' }> {
  if (paused) return lateTicks.map((tick) => ({ tick, reason: 'paused' }));
  const { windowMs, mode, max } = job.catchup;
  const keep = mode === 'none' ? 0 : mode === 'latest' ? 1 : max;
  // The window's edge as planCatchup draws it.
  const windowStart = Math.floor(now) - windowMs - 1;
  let kept = plan.enqueue.length;
  const takeBack: Array<{ tick: number; reason: 'missed-window' | 'catchup-limit' }> = [];
  for (const tick of [...lateTicks].sort((a, b) => b - a)) {
    // Came due after the fence moved: held for this term's review alone, so not missed.
    if (tick + jitterMs(job, tick) > fencedAt) continue;
    if (tick <= windowStart) takeBack.push({ tick, reason: 'missed-window' });
    else if (kept >= keep) takeBack.push({ tick, reason: 'catchup-limit' });
    else kept++;
  }
  return takeBack.sort((a, b) => a.tick - b.tick);
}

/**
 * The ticks `replaced` (a version an edit replaced, or a removal removed) owed in `(after, upTo]`, as one
 * skipped span: no leader recorded them while it stood, and it stands no more.
 */
function ticksOfReplaced(replaced: ScheduledJob, after: number, upTo: number, reason: 'rescheduled' | 'removed'): SkippedTicks | undefined {
  return skipped(seriesOf(replaced), Math.floor(after), Math.floor(upTo), reason);
}

/** A version of a runtime schedule that a write ended (an edit replaced it, or a removal removed it). */
export interface EndedVersion {
  /** When the write that replaced or removed it was made (Redis time, ms). */
  endedAt: number;
  removed: boolean;
  /** When it was itself written. */
  definedAt: number;
  /** Its definition, compiled against the job files as they are; undefined when it no longer compiles. */
  job: ScheduledJob | undefined;
}

/**
 * The ticks the ended versions (oldest first) owed after `watermark` (every tick up to it is recorded)
 * and up to `upTo`, each by its own definition, as skipped spans in tick order: `rescheduled` for a
 * version an edit replaced, `removed` for one a removal removed. A version owes the ticks after its write
 * up to its end; the oldest one still owing counts from the watermark (a version before it was not kept).
 */
export function spansOfEnded(versions: readonly EndedVersion[], watermark: number, upTo: number): SkippedTicks[] {
  const spans: SkippedTicks[] = [];
  let after: number | undefined;
  for (const version of versions.filter(({ endedAt }) => endedAt > watermark)) {
    const from = after === undefined ? watermark : Math.max(after, version.definedAt);
    after = from;
    // Its ticks are not known any more (it no longer compiles): the next version counts from its own write.
    const span = version.job && ticksOfReplaced(version.job, from, Math.min(version.endedAt, upTo), version.removed ? 'removed' : 'rescheduled');
    if (!span) continue;
    spans.push(span);
    after = span.to;
  }
  return spans;
}

/**
 * The ticks after `after` that a leader still owes but that are already older than the catch-up window
 * at `now` (ticks it could not record in time, e.g. while Redis was unreachable): one `missed-window`
 * span, or undefined when the oldest owed tick is still inside the window. Uses the same window edge as
 * {@link planCatchup}.
 */
export function missedWindow(job: ScheduledJob, after: number, now: number): SkippedTicks | undefined {
  [after, now] = [Math.floor(after), Math.floor(now)];
  return skipped(seriesOf(job), after, now - job.catchup.windowMs - 1, 'missed-window');
}

/**
 * The deterministic delay of one tick: a hash of (job name, tick) scaled below both `jitter` and the
 * gap to the next tick, so every leader computes the same run time and a run never slides past the
 * next tick. 0 for a job without jitter.
 */
export function jitterMs(job: ScheduledJob, tick: number): number {
  if (job.maxJitterMs <= 0) return 0;
  const next = nextTick(job, tick);
  const bound = next === undefined ? job.maxJitterMs : Math.min(job.maxJitterMs, next - tick);
  const hash = createHash('sha256').update(`${job.name}\n${tick}`).digest().readUIntBE(0, 6);
  return hash % bound;
}

/** The state of the newest run of a job enqueued before this tick. */
export type RunState = 'none' | 'waiting' | 'delayed' | 'active' | 'finished';

/**
 * `cancel`: ask the previous run to stop, and buffer the tick until it has; `terminate`: fail the previous
 * run at once, and enqueue the tick.
 */
export type OverlapDecision = 'enqueue' | 'buffer' | 'skip' | 'cancel' | 'terminate';

/**
 * What to do with a new tick given the job's previous run. `allow` always enqueues. While the previous
 * run is unfinished (waiting, delayed or active), `skip` skips the tick (reason `overlap`), `bufferOne`
 * and `bufferAll` hold it to run after the previous one, `cancelOther` cancels the previous run and holds
 * the tick until it has stopped, and `terminateOther` terminates the previous run and enqueues the tick.
 * A tick buffered behind the run goes first: while one is buffered, a new tick may neither overtake it
 * nor run beside it, whatever the previous run's state, so `bufferAll` buffers it behind the others and
 * the other policies skip it. `bufferFull` (while a tick is buffered): no more ticks may wait (bufferAll:
 * its `bufferMax` are); a tick beyond the bound is skipped. (The producer releases a buffered tick before
 * it decides the next one.)
 */
export function decideOverlap(policy: OverlapPolicy, previous: RunState, bufferedPending: boolean, bufferFull = bufferedPending): OverlapDecision {
  if (policy === 'allow') return 'enqueue';
  if (bufferedPending) return policy === 'bufferAll' && !bufferFull ? 'buffer' : 'skip';
  const unfinished = previous === 'waiting' || previous === 'delayed' || previous === 'active';
  if (!unfinished) return 'enqueue';
  switch (policy) {
    case 'skip':
      return 'skip';
    case 'cancelOther':
      return 'cancel';
    case 'terminateOther':
      return 'terminate';
    default:
      return 'buffer';
  }
}

/** The ticks in `(from, to]` as one span; undefined when there are none, so a span is never inverted or empty. */
function spanOf(series: TickSeries, from: number, to: number): TickSpan | undefined {
  const first = series.after(from);
  const last = series.atOrBefore(to);
  if (first === undefined || last === undefined || first > last) return undefined;
  const count = series.countIn(first - 1, last);
  return count >= 1 ? { from: first, to: last, count } : undefined;
}

function skipped(series: TickSeries, from: number, to: number, reason: SkipReason): SkippedTicks | undefined {
  const span = spanOf(series, from, to);
  return span && { ...span, reason };
}

function compact<T>(items: Array<T | undefined>): T[] {
  return items.filter((item): item is T => item !== undefined);
}
