/**
 * Wall-clock arithmetic for one IANA time zone, built on `Intl` so that every instance computes the
 * same instants. "Wall" values are local date-times written as if they were UTC epoch milliseconds
 * (the local 2026-03-29 02:30 is `Date.UTC(2026, 2, 29, 2, 30)`), which lets cron matching run on plain
 * numbers. See `plan.ts` for the daylight-saving rule this module implements.
 */

const HOUR_MS = 3_600_000;
/**
 * Offsets are resolved per fixed 12-hour cell. The zone database never changes a zone's offset twice
 * within 12 hours, so a cell holds at most one transition, found once by bisection and then cached.
 */
const CELL_MS = 12 * HOUR_MS;
/** Real offsets lie within UTC-12 and UTC+14, so the instants that can show one wall time span 26 hours. */
const MAX_EAST_MS = 14 * HOUR_MS;
const MAX_WEST_MS = 12 * HOUR_MS;
const MAX_CACHED_CELLS = 4096;

/** A change of a zone's UTC offset at instant `at`; offsets are in milliseconds (`wall - instant`). */
export interface OffsetTransition {
  at: number;
  before: number;
  after: number;
}

interface Cell {
  offset: number;
  transition: OffsetTransition | undefined;
}

/** Zones already found valid: thousands of definitions share a handful, and each check builds a formatter. */
const knownZones = new Set<string>();

/** Whether `name` is a time zone `Intl` knows (IANA names such as `Europe/Berlin`, or `UTC`). */
export function isTimeZone(name: string): boolean {
  if (knownZones.has(name)) return true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
  } catch {
    return false;
  }
  knownZones.add(name);
  return true;
}

/** The IANA zone names this runtime supports. */
export function timeZoneNames(): string[] {
  return Intl.supportedValuesOf('timeZone');
}

/** One time zone's offsets and the mapping between wall times and instants. Get one with {@link TimeZone.of}. */
export class TimeZone {
  private static readonly zones = new Map<string, TimeZone>();
  private readonly cells = new Map<number, Cell>();
  private readonly format: Intl.DateTimeFormat;
  private readonly fixedOffset: number | undefined;

  private constructor(name: string) {
    this.format = new Intl.DateTimeFormat('en-US', {
      timeZone: name,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    this.fixedOffset = this.format.resolvedOptions().timeZone === 'UTC' ? 0 : undefined;
  }

  /** The shared instance for a zone name; throws a RangeError for a name `Intl` does not know. */
  static of(name: string): TimeZone {
    let zone = TimeZone.zones.get(name);
    if (!zone) {
      zone = new TimeZone(name);
      TimeZone.zones.set(name, zone);
    }
    return zone;
  }

  /** The UTC offset in effect at `instant`, in milliseconds. */
  offsetAt(instant: number): number {
    if (this.fixedOffset !== undefined) return this.fixedOffset;
    const { offset, transition } = this.cell(Math.floor(instant / CELL_MS));
    if (!transition) return offset;
    return instant < transition.at ? transition.before : transition.after;
  }

  /** The wall time the zone's clocks show at `instant`. */
  wallAt(instant: number): number {
    return instant + this.offsetAt(instant);
  }

  /** Offset changes at instants in `(from, to]`, oldest first. */
  transitionsIn(from: number, to: number): OffsetTransition[] {
    if (this.fixedOffset !== undefined || to <= from) return [];
    const found: OffsetTransition[] = [];
    for (let index = Math.floor((from + 1) / CELL_MS); index <= Math.floor(to / CELL_MS); index++) {
      const { transition } = this.cell(index);
      if (transition && transition.at > from && transition.at <= to) found.push(transition);
    }
    return found;
  }

  /**
   * The instant a wall time fires at. A wall time the clocks skip resolves to the first instant after
   * the gap (the transition itself); one they show twice resolves to its first, earlier, occurrence.
   */
  instantOf(wall: number): number {
    if (this.fixedOffset !== undefined) return wall - this.fixedOffset;
    const early = this.offsetAt(wall - MAX_EAST_MS);
    const late = this.offsetAt(wall + MAX_WEST_MS);
    const earlyInstant = wall - early;
    if (early === late) return earlyInstant;
    const lateInstant = wall - late;
    const earlyValid = this.offsetAt(earlyInstant) === early;
    const lateValid = this.offsetAt(lateInstant) === late;
    if (earlyValid && lateValid) return Math.min(earlyInstant, lateInstant);
    if (earlyValid) return earlyInstant;
    if (lateValid) return lateInstant;
    // Neither offset shows this wall time: it lies in a spring-forward gap between the two instants.
    const [gap] = this.transitionsIn(lateInstant, earlyInstant);
    return gap ? gap.at : earlyInstant;
  }

  /**
   * The smallest wall time whose instant (per {@link instantOf}) is later than `instant`. Usually the
   * next millisecond on the clock; but during the second pass through a repeated hour, the repeated
   * wall times already fired on the first pass, so the answer is the end of the repeated stretch.
   */
  firstWallAfter(instant: number): number {
    const wall = this.wallAt(instant);
    if (this.fixedOffset === undefined) {
      const fallBack = this.transitionsIn(instant - CELL_MS, instant).pop();
      if (fallBack && fallBack.before > fallBack.after && wall < fallBack.at + fallBack.before) {
        return fallBack.at + fallBack.before;
      }
    }
    return wall + 1;
  }

  private cell(index: number): Cell {
    let cell = this.cells.get(index);
    if (cell) return cell;
    // The cell holds the instants [start, start + 12h); a transition exactly at `start` belongs to it.
    const start = index * CELL_MS;
    const last = start + CELL_MS - 1000;
    const before = this.intlOffset(start - 1000);
    const after = this.intlOffset(last);
    cell = { offset: after, transition: before === after ? undefined : this.bisect(start - 1000, last, before, after) };
    if (this.cells.size >= MAX_CACHED_CELLS) this.cells.clear();
    this.cells.set(index, cell);
    return cell;
  }

  /** Finds the whole second in `(low, high]` where the offset turns from `before` to `after`. */
  private bisect(low: number, high: number, before: number, after: number): OffsetTransition {
    while (high - low > 1000) {
      const middle = low + Math.floor((high - low) / 2000) * 1000;
      if (this.intlOffset(middle) === before) low = middle;
      else high = middle;
    }
    return { at: high, before, after };
  }

  /** The offset at a whole second, read from `Intl` (which resolves seconds, like the zone database). */
  private intlOffset(instant: number): number {
    const second = Math.floor(instant / 1000) * 1000;
    const parts: Record<string, number> = {};
    for (const part of this.format.formatToParts(second)) {
      if (part.type !== 'literal') parts[part.type] = Number(part.value);
    }
    const wall = Date.UTC(parts.year!, parts.month! - 1, parts.day, parts.hour, parts.minute, parts.second);
    return wall - second;
  }
}
