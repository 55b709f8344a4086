import { CronExpressionParser, type CronExpression } from 'cron-parser';
import { BoundedCache } from '../util/bounded-cache.js';

const DAY_MS = 86_400_000;
const DAY_SECONDS = 86_400;
/** How far a search for the next matching day goes: far enough for 29 February across a skipped leap year. */
const MAX_SEARCH_DAYS = 366 * 8 + 1;
const MAX_CACHED_DAYS = 4096;

const FIELD_NAMES = ['second', 'minute', 'hour', 'day of month', 'month', 'day of week'] as const;
const SHORTCUTS = [
  '@yearly',
  '@annually',
  '@monthly',
  '@weekly',
  '@daily',
  '@hourly',
  '@minutely',
  '@secondly',
  '@weekdays',
  '@weekends',
];

type Split = { fields: string[] } | { shortcut: string } | { problem: string };

/** Splits an expression into six fields (seconds first; a 5-field expression gets second 0). */
function split(expression: string): Split {
  const text = expression.trim();
  if (text === '') return { problem: 'is empty; write 5 fields like "0 3 * * *" (03:00 every day)' };
  if (text.startsWith('@')) {
    return SHORTCUTS.includes(text.toLowerCase())
      ? { shortcut: text.toLowerCase() }
      : { problem: `unknown shortcut; use one of ${SHORTCUTS.join(', ')}` };
  }
  const fields = text.split(/\s+/);
  if (fields.length === 5) return { fields: ['0', ...fields] };
  if (fields.length === 6) return { fields };
  return {
    problem:
      `has ${fields.length} field${fields.length === 1 ? '' : 's'}; use 5 (minute hour day-of-month month ` +
      'day-of-week) or 6 (second first)',
  };
}

/** Rewrites cron-parser's messages, which do not say which field they are about, into user terms. */
const FIELD_ERRORS: Array<[RegExp, (field: string, value: string, match: RegExpMatchArray) => string]> = [
  [/got value (.+?) expected range (\d+)-(\d+)/, (f, _v, m) => `${f} must be ${m[2]}-${m[3]} (got ${m[1]})`],
  [
    /(?:got range (\S+) expected range|Invalid range: (\S+), outside the) (\d+)-(\d+)/,
    (f, _v, m) => `${f} range ${m[1] ?? m[2]} must stay within ${m[3]}-${m[4]}`,
  ],
  [/Invalid range: (\d+)-(\d+), min/, (f, _v, m) => `${f} range ${m[1]}-${m[2]} runs backwards; put the smaller number first`],
  [/no usable value/, (f, v) => `${f} "${v}" contains no valid value`],
  [/cannot repeat at every|must be positive/, (f, v) => `${f} step in "${v}" must be a positive number`],
  [/wider than the (\d+)-(\d+) range/, (f, v, m) => `${f} step in "${v}" is wider than the ${m[1]}-${m[2]} range`],
  [/cannot resolve alias "(.+)"/, (f, _v, m) => `${f} "${m[1]}" is not a month or weekday name (use e.g. JAN or MON)`],
  [/occurrence number/, (f, v) => `${f} "${v}": the number after # must be 1-5 (1#2 is the second Monday)`],
  [/standalone L/, (f) => `${f} "L" needs a weekday before it, like 5L for the last Friday`],
  [
    /Invalid characters|Invalid wildcard|Invalid list|Invalid repeat|Invalid range/,
    (f, v) => `${f} "${v}" is not valid; use numbers, ranges (1-5), lists (1,3), steps (*/15) or *`,
  ],
];

function describeFieldError(field: string, value: string, message: string): string {
  for (const [pattern, describe] of FIELD_ERRORS) {
    const match = pattern.exec(message);
    if (match) return describe(field, value, match);
  }
  return `${field} "${value}" is not valid (${message})`;
}

/**
 * A fixed start date: without one cron-parser builds "now" in the zone for every parse, which was most of
 * the cost (0.6 ms a parse, so 20 s for 10,000 schedules). Only the fields and `includesDate` are used here.
 */
const PARSE_EPOCH = new Date(0);

function parse(text: string, hashSeed: string): CronExpression {
  return CronExpressionParser.parse(text, { tz: 'UTC', hashSeed, currentDate: PARSE_EPOCH });
}

/**
 * What is wrong with a cron expression, as messages that name the field and the fix, e.g.
 * `minute must be 0-59 (got 61)`; empty when it is valid. Each field is checked on its own so that
 * all mistakes are reported at once.
 */
export function cronProblems(expression: string): string[] {
  return [...checked.getOrCompute(expression, findProblems)];
}

/**
 * Expressions already checked, and their problems: thousands of schedules written together mostly repeat
 * a few (100,000 daily schedules spread over the day have 1,440 minutes). A few hundred KiB when full.
 */
const checked = new BoundedCache<string, readonly string[]>(8192);

function findProblems(expression: string): string[] {
  const parts = split(expression);
  if ('problem' in parts) return [parts.problem];
  if ('shortcut' in parts) return [];
  // The common case, a valid expression, costs one parse; the field-by-field probes only explain a failure.
  if (parses(parts.fields.join(' '))) return [];
  const problems: string[] = [];
  parts.fields.forEach((value, index) => {
    const probe = ['0', '*', '*', '*', '*', '*'];
    probe[index] = value;
    try {
      parse(probe.join(' '), 'probe');
    } catch (error) {
      problems.push(describeFieldError(FIELD_NAMES[index]!, value, (error as Error).message));
    }
  });
  if (problems.length > 0) return problems;
  try {
    parse(parts.fields.join(' '), 'probe');
  } catch (error) {
    const message = (error as Error).message;
    problems.push(
      /explicit day of month/.test(message)
        ? `day of month ${parts.fields[3]} never occurs in month ${parts.fields[4]}, so it would never run`
        : message,
    );
  }
  return problems;
}

function parses(text: string): boolean {
  try {
    parse(text, 'probe');
    return true;
  } catch {
    return false;
  }
}

/**
 * The wall-clock times a cron expression matches, with no time zone: times are local date-times
 * written as UTC epoch milliseconds (see `time-zone.ts`). cron-parser parses the expression and
 * decides which days match; the times within a day are the product of the hour, minute and second
 * sets, so finding and counting them is arithmetic rather than iteration.
 */
export class CronCalendar {
  private readonly levels: [number[], number[], number[]];
  private readonly months: ReadonlySet<number>;
  /** The parsed expression, to match days by; undefined when every day of the month and week matches. */
  private readonly days: CronExpression | undefined;
  private readonly dayCache = new Map<number, boolean>();

  private constructor(expression: CronExpression) {
    const { second, minute, hour, month, dayOfMonth, dayOfWeek } = expression.fields;
    const sorted = (values: readonly unknown[]): number[] =>
      values.filter((v): v is number => typeof v === 'number').sort((a, b) => a - b);
    this.levels = [sorted(hour.values), sorted(minute.values), sorted(second.values)];
    this.months = new Set(sorted(month.values));
    // Not kept when no day is excluded: the parsed expression is most of a calendar's 4 KB.
    this.days = dayOfMonth.isWildcard && dayOfWeek.isWildcard ? undefined : expression;
  }

  /**
   * Calendars are immutable, so jobs with the same schedule share one: a parsed expression costs about
   * 4 KB, which at 100,000 schedules was most of the leader's memory. Held weakly, so that the calendars of
   * schedules that hot reload removed go away.
   */
  private static readonly shared = new Map<string, WeakRef<CronCalendar>>();
  private static readonly unused = new FinalizationRegistry<string>((key) => {
    if (CronCalendar.shared.get(key)?.deref() === undefined) CronCalendar.shared.delete(key);
  });
  /**
   * The calendars compiled last, held strongly: a burst of upserts compiles each schedule once to check it
   * and drops it, and a weakly held calendar does not outlive the next collection, so without these every
   * upsert parsed its expression again. At most 16 MiB, far less for expressions that match every day.
   */
  private static readonly recent = new BoundedCache<string, CronCalendar>(4096);

  /**
   * Compiles a valid expression (check it with {@link cronProblems} first). `hashSeed` makes `H`
   * fields pick the same value on every instance; use the job name.
   */
  static compile(expression: string, hashSeed: string): CronCalendar {
    const parts = split(expression);
    if ('problem' in parts) throw new Error(`cron expression "${expression}" ${parts.problem}`);
    const text = 'shortcut' in parts ? parts.shortcut : parts.fields.join(' ');
    // Letters may be `H`, whose value depends on the seed: such an expression is named by what it parses to.
    const parsed = /[a-z]/i.test(text) ? parse(text, hashSeed) : undefined;
    const key = parsed ? parsed.stringify(true) : text;
    let calendar = CronCalendar.recent.get(key) ?? CronCalendar.shared.get(key)?.deref();
    if (!calendar) {
      calendar = new CronCalendar(parsed ?? parse(text, hashSeed));
      CronCalendar.shared.set(key, new WeakRef(calendar));
      CronCalendar.unused.register(calendar, key);
    }
    CronCalendar.recent.set(key, calendar);
    return calendar;
  }

  /** The first matching wall time at or after `wall`, or undefined if none within about 8 years. */
  firstAtOrAfter(wall: number): number | undefined {
    const day = Math.floor(wall / DAY_MS);
    const second = Math.ceil((wall - day * DAY_MS) / 1000);
    for (let d = day; d <= day + MAX_SEARCH_DAYS; d++) {
      if (!this.dayMatches(d)) continue;
      const time = this.firstTimeAtOrAfter(d === day ? second : 0);
      if (time !== undefined) return d * DAY_MS + time * 1000;
    }
    return undefined;
  }

  /** The last matching wall time at or before `wall`, or undefined if none within about 8 years. */
  lastAtOrBefore(wall: number): number | undefined {
    const day = Math.floor(wall / DAY_MS);
    const second = Math.floor((wall - day * DAY_MS) / 1000);
    for (let d = day; d >= day - MAX_SEARCH_DAYS; d--) {
      if (!this.dayMatches(d)) continue;
      const time = this.lastTimeAtOrBefore(d === day ? second : DAY_SECONDS - 1);
      if (time !== undefined) return d * DAY_MS + time * 1000;
    }
    return undefined;
  }

  /** How many matching wall times lie in `[from, to)`, without enumerating them. */
  countIn(from: number, to: number): number {
    const first = Math.ceil(from / 1000);
    const end = Math.ceil(to / 1000);
    let count = 0;
    for (let d = Math.floor(first / DAY_SECONDS); d <= Math.floor((end - 1) / DAY_SECONDS); d++) {
      if (!this.dayMatches(d)) continue;
      const start = d * DAY_SECONDS;
      count += this.timesBefore(Math.min(end - start, DAY_SECONDS)) - this.timesBefore(Math.max(first - start, 0));
    }
    return Math.max(count, 0);
  }

  /** Whether `wall` is itself a matching time. */
  includes(wall: number): boolean {
    return this.countIn(wall, wall + 1) === 1;
  }

  private dayMatches(day: number): boolean {
    if (!this.months.has(new Date(day * DAY_MS).getUTCMonth() + 1)) return false;
    if (!this.days) return true;
    let matches = this.dayCache.get(day);
    if (matches === undefined) {
      // includesDate checks the time fields too, so ask about the day's first matching time.
      const [hours, minutes, seconds] = this.levels;
      matches = this.days.includesDate(new Date(Date.UTC(1970, 0, 1 + day, hours[0], minutes[0], seconds[0])));
      if (this.dayCache.size >= MAX_CACHED_DAYS) this.dayCache.clear();
      this.dayCache.set(day, matches);
    }
    return matches;
  }

  private firstTimeAtOrAfter(second: number): number | undefined {
    return toSeconds(firstTupleAtOrAfter(this.levels, toTuple(second), 0));
  }

  private lastTimeAtOrBefore(second: number): number | undefined {
    return toSeconds(lastTupleAtOrBefore(this.levels, toTuple(second), 0));
  }

  /** How many matching times of day lie before second-of-day `second` (0..86400). */
  private timesBefore(second: number): number {
    const target = toTuple(second);
    let count = 0;
    let weight = this.levels[1].length * this.levels[2].length;
    for (let depth = 0; depth < 3; depth++) {
      const values = this.levels[depth]!;
      const wanted = target[depth]!;
      count += values.filter((v) => v < wanted).length * weight;
      if (!values.includes(wanted)) break;
      weight /= this.levels[depth + 1]?.length ?? 1;
    }
    return count;
  }
}

function toTuple(second: number): number[] {
  return [Math.floor(second / 3600), Math.floor(second / 60) % 60, second % 60];
}

function toSeconds(tuple: number[] | undefined): number | undefined {
  return tuple && tuple[0]! * 3600 + tuple[1]! * 60 + tuple[2]!;
}

/** The smallest (hour, minute, second) from the sorted sets that is at or after `target`. */
function firstTupleAtOrAfter(levels: number[][], target: number[], depth: number): number[] | undefined {
  for (const value of levels[depth]!) {
    if (value < target[depth]!) continue;
    if (value > target[depth]!) return [value, ...levels.slice(depth + 1).map((level) => level[0]!)];
    if (depth === levels.length - 1) return [value];
    const rest = firstTupleAtOrAfter(levels, target, depth + 1);
    if (rest) return [value, ...rest];
  }
  return undefined;
}

/** The largest (hour, minute, second) from the sorted sets that is at or before `target`. */
function lastTupleAtOrBefore(levels: number[][], target: number[], depth: number): number[] | undefined {
  const values = levels[depth]!;
  for (let i = values.length - 1; i >= 0; i--) {
    const value = values[i]!;
    if (value > target[depth]!) continue;
    if (value < target[depth]!) return [value, ...levels.slice(depth + 1).map((level) => level[level.length - 1]!)];
    if (depth === levels.length - 1) return [value];
    const rest = lastTupleAtOrBefore(levels, target, depth + 1);
    if (rest) return [value, ...rest];
  }
  return undefined;
}
