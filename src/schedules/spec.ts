import { z } from 'zod';
import type { Duration } from '../scheduling/duration.js';
import type { CatchupMode, OverlapPolicy, ScheduledJob } from '../scheduling/define-job.js';
import { LOOKAHEAD_MS, nextTickOnce, nextTicks } from '../scheduling/plan.js';
import { closest, JOB_NAME_PATTERN, validateJobDefinition } from '../scheduling/schema.js';
import { CompiledShapes, isPlainJson, isPlainRecord } from './compiled-shapes.js';

/**
 * A runtime schedule as a client writes it: which job type runs, when (exactly one of `schedule`,
 * `every` and `at`), and the same tick rules a file job has. Stored as data in Redis, versioned.
 */
export interface ScheduleSpec<TData = unknown> {
  /** The job type (a definition in `jobs/`) whose handler or flow runs each tick. */
  job: string;
  /** Cron: 5 fields, or 6 with seconds first, read in `timezone`. */
  schedule?: string;
  /** An interval, aligned to the Unix epoch (or to `startAt`). */
  every?: Duration;
  /** One run at this instant (a Date, epoch ms, or an ISO 8601 string with a zone); must be in the future. */
  at?: Date | string | number;
  timezone?: string;
  /** Passed to every run instead of the job type's `data`. */
  data?: TData;
  overlap?: OverlapPolicy;
  /** With overlap `bufferAll`: how many ticks may wait at once (default 10). */
  bufferMax?: number;
  catchup?: { window?: Duration; mode?: CatchupMode; max?: number };
  jitter?: Duration;
  startAt?: Date | string;
  endAt?: Date | string;
  /**
   * How many ticks the schedule has left from the moment it is written (skipped ticks count): it ends
   * after the `limit`-th. Rewriting the schedule starts the count again.
   */
  limit?: number;
  paused?: boolean;
  /** Free text shown with the schedule (why it exists, who owns it). */
  note?: string;
}

/** Ids are job names: they become part of BullMQ job ids and of Redis keys. */
export const SCHEDULE_ID_PATTERN = JOB_NAME_PATTERN;
/** The largest spec, as JSON, that is stored: a schedule is a pointer to work, not a payload store. */
export const MAX_SPEC_BYTES = 16 * 1024;
/** The most ticks `limit` may count: the end of the schedule is found by walking that many ticks. */
export const MAX_LIMIT = 10_000;
export const MAX_NOTE_LENGTH = 500;

const SPEC_FIELDS = ['job', 'schedule', 'every', 'at', 'timezone', 'data', 'overlap', 'bufferMax', 'catchup', 'jitter', 'startAt', 'endAt', 'limit', 'paused', 'note'] as const;
/** The fields a spec shares with a file definition: validated by the very same rules and messages. */
const DEFINITION_FIELDS = ['schedule', 'every', 'timezone', 'data', 'overlap', 'bufferMax', 'catchup', 'jitter', 'startAt', 'endAt', 'paused'] as const;
/** What a one-shot schedule cannot have: it has a single tick, fixed by `at`. */
const NOT_WITH_AT = ['schedule', 'every', 'timezone', 'jitter', 'startAt', 'endAt', 'limit'] as const;

/**
 * A spec as it is stored: the client's fields in JSON form (instants as ISO strings), plus `limitEndsAt`,
 * the last tick `limit` allows, fixed when the spec was written so that it does not move afterwards.
 */
export interface StoredSpec extends Omit<ScheduleSpec, 'at' | 'startAt' | 'endAt' | 'every'> {
  at?: string;
  startAt?: string;
  endAt?: string;
  every?: string | number;
  limitEndsAt?: number;
}

/** The job types schedules may name: the definitions loaded from `jobs/`, by name. */
export type JobTypes = ReadonlyMap<string, ScheduledJob>;

/** A valid spec: in stored form, as the JSON text stored, and the schedule it compiles to. */
export type SpecCheck = { ok: true; spec: StoredSpec; json: string; job: ScheduledJob } | { ok: false; errors: string[] };

/**
 * How far the clock of a writer may be ahead of Redis' for {@link firstReviewAt}: a tick this much before
 * the writer's now is counted as the first, so the due index is never later than it.
 */
const WRITER_CLOCK_MARGIN_MS = 60_000;

/**
 * By when a leader must first look at a version written at `now` (the writer's clock): its first tick
 * (none: now). The due index holds it until then, so a million schedules written at once are not all
 * looked at by the leader at once.
 */
export function firstReviewAt(job: ScheduledJob, now: number): number {
  return nextTickOnce(job, now - WRITER_CLOCK_MARGIN_MS) ?? now;
}

/** A schedule's ticks when its job type is gone: recorded as skipped `no-handler`, never run. */
const NO_WORK = undefined;

/**
 * Validates a spec a client wrote at `now` and returns it in stored form, with the schedule it compiles
 * to. Every problem is one line: `schedule "<id>": <field> <value>: <what is wrong and the fix>`.
 */
export function checkScheduleSpec(id: string, input: unknown, types: JobTypes, now: number): SpecCheck {
  const check = checkCommonSpec(id, input, types, now) ?? checkSpec(id, input, types, now);
  // A field name or job type the client wrote is part of the line: a line break in it must not split it.
  return check.ok ? check : { ok: false, errors: check.errors.map(oneLine) };
}

/** `text` with its line breaks escaped as JSON escapes them. */
function oneLine(text: string): string {
  return text.replace(/[\n\r\u2028\u2029]/g, (c) => ({ '\n': '\\n', '\r': '\\r' })[c] ?? `\\u${c.charCodeAt(0).toString(16)}`);
}

function checkSpec(id: string, input: unknown, types: JobTypes, now: number): SpecCheck {
  const shown = `schedule ${JSON.stringify(id)}`;
  const errors = [...idProblems(id), ...shapeProblems(input)].map((e) => `${shown}: ${e}`);
  if (errors.length > 0) return { ok: false, errors };
  const spec = input as ScheduleSpec;
  const type = types.get(spec.job);
  if (!type) return { ok: false, errors: [`${shown}: ${unknownTypeProblem(spec.job, types)}`] };
  if (type.trigger.kind !== 'none') {
    return { ok: false, errors: [`${shown}: job "${spec.job}": is a scheduled file job, not a job type; name a definition in jobs/ without schedule or every`] };
  }
  const stored = toStored(spec);
  if (stored.at !== undefined && Date.parse(stored.at) <= now) {
    return { ok: false, errors: [`${shown}: at "${stored.at}": is in the past; give a future instant, or trigger(id) to run now`] };
  }
  const compiled = compileSchedule(id, stored, type);
  if (!compiled.ok) return compiled;
  const from = firstTickAfter(compiled.job, now);
  const never = neverRuns(compiled.job, from);
  if (never) return { ok: false, errors: [`${shown}: ${never}`] };
  const json = JSON.stringify(stored);
  if (Buffer.byteLength(json, 'utf8') > MAX_SPEC_BYTES) {
    return { ok: false, errors: [`${shown}: data: the spec is over ${MAX_SPEC_BYTES / 1024} KiB as JSON; keep large payloads elsewhere and pass a reference in data`] };
  }
  if (spec.limit !== undefined) {
    const until = from + LOOKAHEAD_MS;
    const ticks = nextTicks(compiled.job, from, spec.limit, until);
    if (ticks.length < spec.limit && nextTickOnce(compiled.job, ticks.at(-1) ?? from) !== undefined) {
      return { ok: false, errors: [`${shown}: limit ${spec.limit}: its last tick would come after ${isoDay(until)}, more than ${LOOKAHEAD_YEARS} years ahead (as far as leasebeat plans); lower the limit, or end the schedule with endAt`] };
    }
    // Fewer ticks than the limit: the schedule ends on its own first, and the limit changes nothing.
    if (ticks.length === spec.limit) {
      stored.limitEndsAt = ticks.at(-1)!;
      const limited = compileSchedule(id, stored, type);
      if (!limited.ok) return limited;
      return { ok: true, spec: stored, json: JSON.stringify(stored), job: limited.job };
    }
  }
  return { ok: true, spec: stored, json, job: compiled.job };
}

const LOOKAHEAD_YEARS = Math.round(LOOKAHEAD_MS / (365.25 * 86_400_000));
/** How far one search for a cron's next match goes (scheduling/cron.ts): 8 years. */
const SEARCH_YEARS = 8;
const isoDay = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

/** Where a schedule written at `now` starts counting its ticks: now, or just before its `startAt`. */
const firstTickAfter = (job: ScheduledJob, now: number): number => Math.max(now, job.startAt === undefined ? now : job.startAt - 1);

/**
 * Why a schedule would never run from `from` on, or undefined when it has a tick: a spec that is accepted
 * and then silently never fires is worse than a refusal.
 */
function neverRuns(job: ScheduledJob, from: number): string | undefined {
  if (nextTickOnce(job, from) !== undefined) return undefined;
  if (job.endAt !== undefined && job.endAt - from < SEARCH_YEARS * 365 * 86_400_000) {
    return `endAt: it has no tick from ${new Date(from).toISOString()} to its endAt ${new Date(job.endAt).toISOString()} and would never run; move endAt later`;
  }
  return `schedule: it has no tick in the ${SEARCH_YEARS} years after ${isoDay(from)} and would never run; check its day-of-month, month and day-of-week fields (say, a 5th Monday in February, or 30 February)`;
}

/**
 * The fields of the common spec, the shape bulk writes repeat: a job type on a cron or an interval, with
 * data and a few tick rules. What it leaves out (at, limit) depends on the time of the write, or (catchup)
 * is an object, and goes through the full check each time.
 */
const COMMON_FIELDS: ReadonlySet<string> = new Set(['job', 'schedule', 'every', 'timezone', 'data', 'overlap', 'bufferMax', 'jitter', 'startAt', 'endAt', 'paused', 'note']);
/** The common fields that decide how a schedule compiles (all but its data and note), in SPEC_FIELDS order. */
const SHAPE_FIELDS = ['job', 'schedule', 'every', 'timezone', 'overlap', 'bufferMax', 'jitter', 'startAt', 'endAt', 'paused'] as const;

const compiledShapes = new CompiledShapes();

/**
 * The check of a common spec (see COMMON_FIELDS) whose shape, its fields other than data and note, was
 * compiled before: the full check's result for that shape, with this spec's id and data. Undefined for
 * anything else, or anything in doubt, which {@link checkSpec} then checks in full (and compiles the
 * shape, when valid, for the next spec like it). The same result as the full check, at a fraction of
 * its cost: the id, the field names, the data and the size are checked here; the rest is the shape's.
 */
function checkCommonSpec(id: string, input: unknown, types: JobTypes, now: number): SpecCheck | undefined {
  if (!isPlainRecord(input) || !SCHEDULE_ID_PATTERN.test(id)) return undefined;
  for (const key of Object.keys(input)) if (!COMMON_FIELDS.has(key)) return undefined;
  const { job, note, data } = input;
  if (typeof job !== 'string' || job === '' || (input.schedule === undefined) === (input.every === undefined)) return undefined;
  if (note !== undefined && (typeof note !== 'string' || note.length > MAX_NOTE_LENGTH)) return undefined;
  if (data !== undefined && !isPlainJson(data)) return undefined;
  const type = types.get(job);
  if (type?.trigger.kind !== 'none') return undefined;
  // Text, finite numbers and booleans only: as JSON, two shapes have the same key only if they are equal.
  const shape: unknown[] = [];
  for (const field of SHAPE_FIELDS) {
    const value = input[field];
    if (!(value === undefined || typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value)))) return undefined;
    shape.push(value ?? null);
  }
  const stored = toStored(input as unknown as ScheduleSpec);
  const json = JSON.stringify(stored);
  if (Buffer.byteLength(json, 'utf8') > MAX_SPEC_BYTES) return undefined;
  const key = JSON.stringify(shape);
  const compiled = compiledShapes.get(type, key);
  if (compiled) return { ok: true, spec: stored, json, job: { ...compiled, name: id, data: data !== undefined ? data : type.data } };
  const first = compileSchedule(id, stored, type);
  // A shape that never runs is refused by the full check; one kept here had a tick when it was compiled.
  if (!first.ok || neverRuns(first.job, firstTickAfter(first.job, now))) return undefined;
  // Kept without the data: it is this spec's, and may be large.
  compiledShapes.set(type, key, { ...first.job, data: undefined });
  return { ok: true, spec: stored, json, job: first.job };
}

/**
 * The schedule a stored spec runs as: a ScheduledJob named by the schedule's id that does its job type's
 * work (handler or flow, queue, concurrency, BullMQ options) on its own ticks. With the job type gone
 * (`type` undefined) it has neither handler nor flow: its ticks are recorded as skipped `no-handler`.
 * `createdAt`, `updatedAt` and `version` are the record's: see ScheduledJob.owedAfter, definedAt and revision.
 */
export function compileSchedule(
  id: string,
  spec: StoredSpec,
  type: ScheduledJob | undefined,
  createdAt?: number,
  updatedAt?: number,
  version?: number,
): { ok: true; job: ScheduledJob } | { ok: false; errors: string[] } {
  const definition: Record<string, unknown> = { name: id };
  for (const field of DEFINITION_FIELDS) if (spec[field] !== undefined) definition[field] = spec[field];
  // A one-shot schedule is checked as an interval (its overlap and catch-up rules are the same), then
  // given its single tick.
  if (spec.at !== undefined) definition.every = '1s';
  // The limit ends the schedule at its last allowed tick, unless endAt ends it sooner.
  if (spec.limitEndsAt !== undefined && (spec.endAt === undefined || Date.parse(spec.endAt) > spec.limitEndsAt)) {
    // 1 ms past the last tick: endAt must be later than startAt, which a limit of 1 could make it equal
    // to, and no two ticks are less than a second apart.
    definition.endAt = new Date(spec.limitEndsAt + 1).toISOString();
  }
  definition.handler = type?.handler ?? type?.flow ?? checkOnly;
  const result = validateJobDefinition(definition, type?.file ?? '', `schedule ${JSON.stringify(id)}`);
  if (!result.ok) return result;
  const job: ScheduledJob = {
    ...result.job,
    trigger: spec.at !== undefined ? { kind: 'once', at: Date.parse(spec.at) } : result.job.trigger,
    handler: type ? type.handler : NO_WORK,
    flow: type ? type.flow : NO_WORK,
    data: spec.data !== undefined ? spec.data : type?.data,
    queue: type?.queue ?? result.job.queue,
    concurrency: type?.concurrency ?? result.job.concurrency,
    timeoutMs: type ? type.timeoutMs : result.job.timeoutMs,
    timeoutGraceMs: type?.timeoutGraceMs ?? result.job.timeoutGraceMs,
    pauseOnFailure: type ? type.pauseOnFailure : result.job.pauseOnFailure,
    lateAfterMs: type ? type.lateAfterMs : result.job.lateAfterMs,
    jobOptions: type?.jobOptions ?? result.job.jobOptions,
    type: spec.job,
    ...(createdAt === undefined ? {} : { owedAfter: createdAt }),
    ...(updatedAt === undefined ? {} : { definedAt: updatedAt }),
    ...(updatedAt === undefined || version === undefined ? {} : { revision: scheduleRevision(version, updatedAt) }),
  };
  return { ok: true, job };
}

/**
 * The revision of a schedule's stored version (see ScheduledJob.revision): as upsertSchedule.lua writes
 * it into the job's state, so that the two compare as strings.
 */
export function scheduleRevision(version: number, updatedAt: number): string {
  return `${version}|${updatedAt}`;
}

/** Stands in for an orphaned schedule's missing handler while its fields are checked; never called. */
function checkOnly(): never {
  throw new Error('unreachable: an orphaned schedule has no handler');
}

function idProblems(id: string): string[] {
  if (SCHEDULE_ID_PATTERN.test(id)) return [];
  return [
    `id: may contain only letters, digits, ".", "_" and "-", must start with a letter or digit and be at most 128 long ` +
      `(${SCHEDULE_ID_PATTERN.source}), because it becomes part of BullMQ job ids and Redis keys`,
  ];
}

const shape = z.record(z.string(), z.unknown());

/** The spec's own fields: the keys, `job`, `at`, `limit` and `note`; the rest is checked as a definition's. */
function shapeProblems(input: unknown): string[] {
  if (!shape.safeParse(input).success || Array.isArray(input)) return ['spec: must be an object like { "job": "send-report", "schedule": "0 9 * * *" }'];
  const spec = input as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(spec)) {
    if ((SPEC_FIELDS as readonly string[]).includes(key)) continue;
    const guess = closest(key, [...SPEC_FIELDS]);
    problems.push(guess ? `${key}: unknown field; did you mean "${guess}"?` : `${key}: unknown field; known fields are ${SPEC_FIELDS.join(', ')}`);
  }
  if (typeof spec.job !== 'string' || spec.job === '') problems.push('job: missing; name the job type (a definition in jobs/ without schedule or every) that runs the ticks');
  const timings = (['schedule', 'every', 'at'] as const).filter((field) => spec[field] !== undefined);
  if (timings.length === 0) problems.push('schedule: missing; set schedule (a cron expression like "0 3 * * *"), every (an interval like "5m") or at (an instant)');
  if (timings.length > 1 && timings.includes('at')) problems.push(`at: is a one-shot run; set at alone, without ${timings.filter((t) => t !== 'at').join(' or ')}`);
  if (spec.at !== undefined) {
    if (instantOf(spec.at) === undefined) problems.push(`at ${JSON.stringify(spec.at)}: must be a Date, epoch ms, or an ISO 8601 string with "Z" or an offset`);
    for (const field of NOT_WITH_AT) {
      if (field !== 'schedule' && field !== 'every' && spec[field] !== undefined) problems.push(`${field}: has no effect on a one-shot schedule (at); remove it`);
    }
  }
  if (spec.limit !== undefined && (!Number.isInteger(spec.limit) || (spec.limit as number) < 1 || (spec.limit as number) > MAX_LIMIT)) {
    problems.push(`limit ${JSON.stringify(spec.limit)}: must be a whole number from 1 to ${MAX_LIMIT} (the ticks the schedule has left)`);
  }
  if (spec.note !== undefined && (typeof spec.note !== 'string' || spec.note.length > MAX_NOTE_LENGTH)) {
    problems.push(`note: must be text of at most ${MAX_NOTE_LENGTH} characters`);
  }
  return problems;
}

function unknownTypeProblem(job: string, types: JobTypes): string {
  const names = [...types.values()].filter((t) => t.trigger.kind === 'none').map((t) => t.name);
  const guess = closest(job, names);
  const known = names.length === 0 ? 'no job type is defined; add a definition without schedule or every to jobs/' : `job types are ${names.slice(0, 10).join(', ')}${names.length > 10 ? ', …' : ''}`;
  return `job "${job}": unknown job type; ${guess ? `did you mean "${guess}"? ` : ''}${known}`;
}

function instantOf(value: unknown): number | undefined {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? undefined : value.getTime();
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value === 'string' && /(?:Z|[+-]\d{2}:?\d{2})$/i.test(value)) {
    const ms = Date.parse(value);
    return Number.isNaN(ms) ? undefined : ms;
  }
  return undefined;
}

/** The spec in JSON form: instants as ISO strings (what `JSON.stringify` of a Date gives), fields in a fixed order. */
function toStored(spec: ScheduleSpec): StoredSpec {
  const stored: Record<string, unknown> = {};
  for (const field of SPEC_FIELDS) {
    const value = spec[field];
    if (value === undefined) continue;
    if (field === 'at') stored.at = new Date(instantOf(value)!).toISOString();
    else if (value instanceof Date) stored[field] = value.toISOString();
    else stored[field] = value;
  }
  return stored as unknown as StoredSpec;
}
