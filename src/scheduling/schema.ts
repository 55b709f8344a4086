import { z } from 'zod';
import { cronProblems } from './cron.js';
import type { CatchupMode, OverlapPolicy, ScheduledJob, Trigger } from './define-job.js';
import { formatDuration, parseDuration } from './duration.js';
import { isTimeZone, timeZoneNames } from './time-zone.js';

/** Job names become part of BullMQ job ids and Redis keys, where `:` separates the parts. */
export const JOB_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Defaults applied to every definition that leaves a field out. */
export const JOB_DEFAULTS = {
  timezone: 'UTC',
  queue: 'leasebeat',
  concurrency: 1,
  /** A handler past its deadline has this long to honour its signal; Kubernetes' default grace is 30 s. */
  timeoutGraceMs: 10_000,
  overlap: 'allow' as OverlapPolicy,
  /** bufferAll's bound: enough to ride out a few slow runs, few enough that a stuck job does not pile up a backlog. */
  bufferMax: 10,
  /**
   * A leader outage of up to 5 minutes (a failover, a rolling deploy) still runs the newest missed
   * tick; anything older is reported as missed rather than run long after its time.
   */
  catchup: { windowMs: 5 * 60_000, mode: 'latest' as CatchupMode, max: 10 },
  paused: false,
};

const MIN_EVERY_MS = 1_000;
const MAX_CATCHUP = 1_000;
/** bufferAll's bound at most: each buffered tick is held by the lane and re-read at every takeover. */
const MAX_BUFFER = 1_000;
const MAX_PRIORITY = 2_097_152;
const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/** What a field must look like, used for every mistake zod itself detects (wrong type, out of range…). */
const EXPECTED: Record<string, string> = {
  '': 'a job definition object: export default defineJob({ name, schedule, handler })',
  name: 'a unique name such as "nightly-report"',
  schedule: 'a cron expression such as "0 3 * * *"',
  timezone: 'an IANA time zone name such as "Europe/Berlin"',
  queue: 'a queue name such as "reports"',
  concurrency: 'a positive integer (runs at once on each instance), e.g. 2',
  attempts: 'a positive integer, e.g. 3',
  pauseOnFailure: 'a positive integer: the failed runs in a row that pause the job, e.g. 3',
  backoff: 'milliseconds, or { type: "fixed" | "exponential", delay: milliseconds }',
  removeOnComplete: 'true, false, a number of jobs to keep, or { age: seconds, count }',
  removeOnFail: 'true, false, a number of jobs to keep, or { age: seconds, count }',
  priority: `an integer from 0 (none) through 1 (highest) to ${MAX_PRIORITY} (lowest)`,
  overlap: '"allow", "skip", "bufferOne", "bufferAll", "cancelOther" or "terminateOther"',
  bufferMax: `an integer from 1 to ${MAX_BUFFER}: the ticks that may wait behind an unfinished run, e.g. 10`,
  catchup: 'an object { window, mode, max }',
  'catchup.mode': '"latest", "all" or "none"',
  'catchup.max': `an integer from 1 to ${MAX_CATCHUP}`,
  paused: 'true or false',
  handler: 'a function (job, ctx) => …',
  flow: 'a function ({ tick, data }) => flow',
};

function custom(ctx: z.RefinementCtx, message: string): void {
  ctx.addIssue({ code: 'custom', message });
}

/** Node's timers fire at once past 2^31 - 1 ms: a run's deadline (and its grace) stays below. */
const MAX_TIMER_MS = 24 * 86_400_000;

const durationField = (minMs: number, maxMs = Infinity) =>
  z.unknown().transform((value, ctx) => {
    const ms = parseDuration(value);
    if (ms === undefined) {
      custom(ctx, 'is not a duration; use milliseconds or a string like "30s", "5m" or "1h30m"');
      return z.NEVER;
    }
    if (ms < minMs) {
      const hint = typeof value === 'number' ? `; numbers are milliseconds — did you mean "${value}s"?` : '';
      custom(ctx, `must be at least ${formatDuration(minMs)}${hint}`);
      return z.NEVER;
    }
    if (ms > maxMs) {
      custom(ctx, `must be at most ${formatDuration(maxMs)}`);
      return z.NEVER;
    }
    return ms;
  });

/** Epoch ms of a Date or an ISO 8601 string with an explicit zone, or undefined. */
function parseDate(value: unknown): number | undefined {
  const ms = value instanceof Date ? value.getTime() : typeof value === 'string' && ISO_DATE.test(value) ? Date.parse(value) : NaN;
  return Number.isNaN(ms) ? undefined : ms;
}

const dateField = z.unknown().transform((value, ctx) => {
  const ms = parseDate(value);
  if (ms === undefined) {
    custom(
      ctx,
      'must be a Date or an ISO 8601 string like "2026-01-01" or "2026-01-01T09:00:00+01:00"; a time needs "Z" or ' +
        'an offset so that every instance reads it the same',
    );
    return z.NEVER;
  }
  return ms;
});

const functionField = (expected: string) =>
  z.custom<(...args: never[]) => unknown>((value) => typeof value === 'function', { error: `must be ${expected}` });

const retentionField = z.union([
  z.boolean(),
  z.int().nonnegative(),
  z.strictObject({ age: z.int().nonnegative(), count: z.int().nonnegative().optional() }),
  z.strictObject({ count: z.int().nonnegative() }),
]);

const definitionSchema = z.strictObject({
  name: z.string().superRefine((name, ctx) => {
    if (!JOB_NAME_PATTERN.test(name)) {
      custom(
        ctx,
        'may contain only letters, digits, ".", "_" and "-", must start with a letter or digit and be at most 128 ' +
          `long (${JOB_NAME_PATTERN.source}), because it becomes part of BullMQ job ids and Redis keys, where ":" ` +
          'separates the parts',
      );
    }
  }),
  schedule: z
    .string()
    .superRefine((expression, ctx) => {
      const unsupported = unsupportedCronForm(expression);
      if (unsupported) return custom(ctx, unsupported);
      cronProblems(expression).forEach((problem) => custom(ctx, withDayForms(problem)));
    })
    .optional(),
  every: durationField(MIN_EVERY_MS).optional(),
  timezone: z
    .string()
    .superRefine((zone, ctx) => {
      if (isTimeZone(zone)) return;
      const guess = closest(zone, timeZoneNames());
      custom(ctx, `unknown time zone; use an IANA name like "Europe/Berlin"${guess ? ` (did you mean "${guess}"?)` : ''}`);
    })
    .optional(),
  data: z
    .unknown()
    .superRefine((data, ctx) => {
      const problem = jsonProblem(data, 'data', new Set());
      if (problem) custom(ctx, `must be JSON-serialisable: ${problem}`);
    })
    .optional(),
  handler: functionField(EXPECTED.handler!).optional(),
  flow: functionField(EXPECTED.flow!).optional(),
  queue: z
    .string()
    .min(1)
    .superRefine((queue, ctx) => {
      if (queue.includes(':')) custom(ctx, 'must not contain ":" (BullMQ uses it to separate the parts of its Redis keys)');
    })
    .optional(),
  concurrency: z.int().positive().optional(),
  timeout: durationField(1_000, MAX_TIMER_MS).optional(),
  timeoutGrace: durationField(0, MAX_TIMER_MS).optional(),
  pauseOnFailure: z.int().positive().optional(),
  lateAfter: durationField(0).optional(),
  attempts: z.int().positive().optional(),
  backoff: z
    .union([
      z.int().nonnegative(),
      z.strictObject({ type: z.enum(['fixed', 'exponential']), delay: z.int().nonnegative() }),
    ])
    .optional(),
  removeOnComplete: retentionField.optional(),
  removeOnFail: retentionField.optional(),
  priority: z.int().min(0).max(MAX_PRIORITY).optional(),
  overlap: z.enum(['allow', 'skip', 'bufferOne', 'bufferAll', 'cancelOther', 'terminateOther']).optional(),
  bufferMax: z.int().min(1).max(MAX_BUFFER).optional(),
  catchup: z
    .strictObject({
      window: durationField(0).optional(),
      mode: z.enum(['latest', 'all', 'none']).optional(),
      max: z.int().min(1).max(MAX_CATCHUP).optional(),
    })
    .optional(),
  jitter: durationField(0).optional(),
  paused: z.boolean().optional(),
  startAt: dateField.optional(),
  endAt: dateField.optional(),
});

type ParsedDefinition = z.output<typeof definitionSchema>;

/** A valid definition, with `warnings` for what is legal but likely not meant (each prefixed like errors). */
export type ValidationResult = { ok: true; job: ScheduledJob; warnings: string[] } | { ok: false; errors: string[] };

/**
 * Validates what a job file default-exported. Every problem in the file is reported, each as
 * `<displayFile>: <field> <value>: <what is wrong and how to fix it>`.
 */
export function validateJobDefinition(value: unknown, file: string, displayFile = file, now = Date.now()): ValidationResult {
  const result = definitionSchema.safeParse(value);
  const errors = [
    ...(result.success ? [] : result.error.issues.flatMap((issue) => describeIssue(issue, value))),
    ...crossFieldProblems(value),
  ];
  if (!result.success || errors.length > 0) return { ok: false, errors: errors.map((e) => `${displayFile}: ${e}`) };
  const job = normalize(result.data, file);
  return { ok: true, job, warnings: definitionWarnings(job, now).map((w) => `${displayFile}: ${w}`) };
}

/** The fields of a cron expression that are day of month and day of week, by field count. */
function dayFields(fields: string[]): { dom: number; dow: number } | undefined {
  if (fields.length === 5) return { dom: 2, dow: 4 };
  if (fields.length === 6) return { dom: 3, dow: 5 };
  return undefined;
}

/**
 * Cron forms other schedulers accept that this one does not, named as such: cron-parser's own message
 * for `15W` only says "not valid".
 */
function unsupportedCronForm(expression: string): string | undefined {
  const fields = expression.trim().split(/\s+/);
  const days = dayFields(fields);
  if (!days) return undefined;
  const dom = fields[days.dom]!;
  if (/W/i.test(dom)) {
    return (
      `day of month "${dom}": W (nearest weekday) is not supported; use numbers, ranges (1-5), lists (1,15), steps (*/2) ` +
      'or L (the last day of the month); day of week also takes 5L (the last Friday) and 1#2 (the second Monday)'
    );
  }
  return undefined;
}

const GENERIC_FORMS = 'use numbers, ranges (1-5), lists (1,3), steps (*/15) or *';

/** The day fields take more forms than the generic hint lists: name them where they apply. */
function withDayForms(problem: string): string {
  if (!problem.endsWith(GENERIC_FORMS)) return problem;
  if (problem.startsWith('day of month')) return `${problem.slice(0, -' or *'.length)}, * or L (the last day of the month)`;
  if (problem.startsWith('day of week')) return `${problem.slice(0, -' or *'.length)}, *, 5L (the last Friday) or 1#2 (the second Monday)`;
  return problem;
}

/** What is legal in a definition but almost certainly not what its author meant. */
function definitionWarnings(job: ScheduledJob, now: number): string[] {
  const warnings: string[] = [];
  if (job.endAt !== undefined && job.endAt <= now) {
    warnings.push(`endAt ${new Date(job.endAt).toISOString()}: is in the past, so the job never runs again; remove endAt or move it forward`);
  }
  if (job.trigger.kind === 'cron') {
    const fields = job.trigger.expression.split(/\s+/);
    const days = dayFields(fields);
    const names = fields.length === 6 ? ['second', 'minute', 'hour', 'day of month', 'month', 'day of week'] : ['minute', 'hour', 'day of month', 'month', 'day of week'];
    fields.forEach((field, index) => {
      // `?` means "no specific value" only in the day fields; elsewhere the parser reads it as `*`.
      if (field.includes('?') && index !== days?.dom && index !== days?.dow) {
        warnings.push(`schedule "${job.trigger.kind === 'cron' ? job.trigger.expression : ''}": "?" in the ${names[index]} field is read as * (every ${names[index]}); write * if that is meant`);
      }
    });
  }
  return warnings;
}

/** Fields that shape a definition's own ticks, meaningless on a job type (no schedule, no every). */
const TICK_ONLY_FIELDS = ['timezone', 'overlap', 'bufferMax', 'catchup', 'jitter', 'startAt', 'endAt', 'paused'] as const;

/** Rules that involve several fields, checked on the raw input so that they are reported alongside field errors. */
function crossFieldProblems(raw: unknown): string[] {
  if (!isRecord(raw)) return [];
  const has = (key: string): boolean => raw[key] !== undefined;
  const problems: string[] = [];
  if (has('schedule') && has('every')) {
    problems.push('schedule/every: set either schedule (cron) or every (an interval), not both');
  }
  if (!has('schedule') && !has('every')) {
    // A job type: every field that only shapes ticks would be silently ignored, so it is refused.
    for (const field of TICK_ONLY_FIELDS) {
      if (has(field)) {
        problems.push(
          `${label(field, raw[field])}: only applies to a definition that ticks; set schedule (a cron expression like "0 3 * * *") ` +
            'or every (an interval like "5m"), or remove it to define a job type that runtime schedules run',
        );
      }
    }
  }
  if (has('bufferMax') && raw.overlap !== 'bufferAll') {
    problems.push(`${label('bufferMax', raw.bufferMax)}: only applies to overlap "bufferAll"; set overlap: "bufferAll" or remove bufferMax`);
  }
  if (has('every') && has('timezone')) {
    problems.push(
      `${label('timezone', raw.timezone)}: has no effect on every, which is aligned to the Unix epoch; ` +
        'for local times use a schedule like "0 0 * * *" with the timezone',
    );
  }
  if (!has('handler') && !has('flow')) {
    problems.push('handler: missing; export a handler(job, ctx) function, a flow({ tick, data }) function, or both');
  }
  const startAt = parseDate(raw.startAt);
  const endAt = parseDate(raw.endAt);
  if (startAt !== undefined && endAt !== undefined && endAt <= startAt) {
    problems.push(`${label('endAt', raw.endAt)}: must be later than startAt`);
  }
  return problems;
}

/** Shared by every definition that sets none, so 10,000 schedules do not hold 10,000 copies of the defaults. */
const DEFAULT_CATCHUP: ScheduledJob['catchup'] = Object.freeze({ ...JOB_DEFAULTS.catchup });
const NO_JOB_OPTIONS: ScheduledJob['jobOptions'] = Object.freeze({});
const JOB_TYPE_TRIGGER: Trigger = Object.freeze({ kind: 'none' });

/** How many ticks may wait behind an unfinished run (see ScheduledJob.bufferMax). */
function bufferMaxOf(parsed: ParsedDefinition): number {
  if (parsed.overlap === 'bufferAll') return parsed.bufferMax ?? JOB_DEFAULTS.bufferMax;
  // cancelOther holds the new tick until the run it cancelled has stopped.
  return parsed.overlap === 'bufferOne' || parsed.overlap === 'cancelOther' ? 1 : 0;
}

function normalize(parsed: ParsedDefinition, file: string): ScheduledJob {
  const trigger: Trigger =
    parsed.schedule !== undefined
      ? { kind: 'cron', expression: parsed.schedule.trim() }
      : parsed.every !== undefined
        ? { kind: 'every', everyMs: parsed.every }
        : JOB_TYPE_TRIGGER;
  const { attempts, backoff, removeOnComplete, removeOnFail, priority } = parsed;
  const options = Object.entries({ attempts, backoff, removeOnComplete, removeOnFail, priority }).filter(([, v]) => v !== undefined);
  const jobOptions = options.length === 0 ? NO_JOB_OPTIONS : Object.fromEntries(options);
  return {
    name: parsed.name,
    file,
    trigger,
    timezone: parsed.timezone ?? JOB_DEFAULTS.timezone,
    data: parsed.data,
    handler: parsed.handler as ScheduledJob['handler'],
    flow: parsed.flow as ScheduledJob['flow'],
    queue: parsed.queue ?? JOB_DEFAULTS.queue,
    concurrency: parsed.concurrency ?? JOB_DEFAULTS.concurrency,
    timeoutMs: parsed.timeout,
    timeoutGraceMs: parsed.timeoutGrace ?? JOB_DEFAULTS.timeoutGraceMs,
    pauseOnFailure: parsed.pauseOnFailure,
    lateAfterMs: parsed.lateAfter,
    jobOptions,
    overlap: parsed.overlap ?? JOB_DEFAULTS.overlap,
    bufferMax: bufferMaxOf(parsed),
    catchup:
      parsed.catchup === undefined
        ? DEFAULT_CATCHUP
        : {
            windowMs: parsed.catchup.window ?? JOB_DEFAULTS.catchup.windowMs,
            mode: parsed.catchup.mode ?? JOB_DEFAULTS.catchup.mode,
            max: parsed.catchup.max ?? JOB_DEFAULTS.catchup.max,
          },
    maxJitterMs: parsed.jitter ?? 0,
    paused: parsed.paused ?? JOB_DEFAULTS.paused,
    startAt: parsed.startAt,
    endAt: parsed.endAt,
  };
}

function describeIssue(issue: z.core.$ZodIssue, input: unknown): string[] {
  const path = issue.path.map(String);
  const key = path.join('.');
  if (issue.code === 'unrecognized_keys') {
    const known = knownKeys(key);
    return issue.keys.map((unknownKey) => {
      const guess = closest(unknownKey, known);
      const field = [...path, unknownKey].join('.');
      return guess
        ? `${field}: unknown field; did you mean "${guess}"?`
        : `${field}: unknown field; known fields are ${known.join(', ')}`;
    });
  }
  // `data` is shown by its problem alone: its JSON text is what misleads (NaN prints as null, a BigInt cannot print).
  if (issue.code === 'custom') return [`${key === 'data' ? 'data' : label(key, valueAt(input, path))}: ${issue.message}`];
  // Describe the innermost field that has an expectation: for `removeOnComplete.age`, that is `removeOnComplete`.
  let depth = path.length;
  while (depth > 0 && EXPECTED[path.slice(0, depth).join('.')] === undefined) depth--;
  const field = path.slice(0, depth).join('.');
  const value = valueAt(input, path.slice(0, depth));
  const expected = EXPECTED[field] ?? issue.message;
  if (value === undefined) return [`${field}: missing; must be ${expected}`];
  return [`${label(field, value)}: must be ${expected}`];
}

function knownKeys(path: string): string[] {
  if (path === '') return Object.keys(definitionSchema.shape);
  if (path === 'catchup') return ['window', 'mode', 'max'];
  return [];
}

/** `field "value"` for messages; functions and long values are shortened. */
function label(field: string, value: unknown): string {
  const name = field === '' ? 'default export' : field;
  if (value === undefined) return name;
  if (typeof value === 'function') return `${name} (a function)`;
  const shown = show(value);
  return `${name} ${shown.length > 60 ? `${shown.slice(0, 57)}...` : shown}`;
}

function show(value: unknown): string {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? 'Invalid Date' : value.toISOString();
  if (typeof value === 'symbol' || typeof value === 'bigint') return value.toString();
  try {
    // A BigInt anywhere inside would make JSON.stringify throw: show it as written, `5n`.
    const text = JSON.stringify(value, (_key, inner: unknown) => (typeof inner === 'bigint' ? `\u0000${inner}n\u0000` : inner));
    return text === undefined ? typeof value : text.replace(/"\\u0000(-?\d+n)\\u0000"/g, '$1');
  } catch {
    return 'an object that refers back to itself';
  }
}

function valueAt(input: unknown, path: readonly string[]): unknown {
  let current = input;
  for (const key of path) {
    if (!isRecord(current)) return undefined;
    current = current[key];
  }
  return current;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Why `value` would not survive JSON.stringify/parse unchanged, or undefined if it would. */
function jsonProblem(value: unknown, path: string, ancestors: Set<object>): string | undefined {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `${path} is ${value}, which JSON turns into null`;
  if (typeof value === 'bigint') return `${path} is a BigInt (${value}n), which JSON cannot encode; use a number or a string`;
  if (typeof value !== 'object') return `${path} is ${typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`}`;
  if (ancestors.has(value)) return `${path} refers back to itself`;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) {
    return `${path} is a ${value.constructor?.name ?? 'non-plain object'}; use plain objects, arrays, strings, numbers, booleans and null`;
  }
  ancestors.add(value);
  // Array.from visits an array's holes (map skips them): a hole is undefined to JSON, and named as such.
  const entries = Array.isArray(value) ? Array.from(value, (v, i) => [`${path}[${i}]`, v] as const) : Object.entries(value).map(([k, v]) => [`${path}.${k}`, v] as const);
  for (const [childPath, child] of entries) {
    const problem = jsonProblem(child, childPath, ancestors);
    if (problem) return problem;
  }
  ancestors.delete(value);
  return undefined;
}

/** The candidate closest to `word` by edit distance, if it is close enough to be a likely typo. */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  const limit = Math.max(2, Math.floor(word.length / 4));
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (distance <= limit && (!best || distance < best.distance)) best = { candidate, distance };
  }
  return best?.candidate;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}
