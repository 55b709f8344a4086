import { isDeepStrictEqual } from 'node:util';
import type { JobSchedulerJson, Queue } from 'bullmq';
import { formatDuration } from '../scheduling/duration.js';
import { MAX_NOTE_LENGTH, SCHEDULE_ID_PATTERN, type ScheduleSpec, type StoredSpec } from '../schedules/spec.js';
import { ScheduleError, type Schedules, type ScheduleView } from './schedules.js';

/**
 * What happened to one BullMQ Job Scheduler: `created`, `updated` or `unchanged` as a leasebeat schedule;
 * `unmapped` when it could not be one (`reason` says why); in a dry run `would-create` or `would-update`
 * (and `unchanged` when the stored schedule is already the one it maps to).
 */
export type BullmqImportOutcome = 'created' | 'updated' | 'unchanged' | 'unmapped' | 'would-create' | 'would-update';

export interface BullmqImportRow {
  /** The Job Scheduler's id in BullMQ. */
  key: string;
  /** The schedule id it maps to: the id prefix, then the key. */
  id: string;
  outcome: BullmqImportOutcome;
  /** Why it is unmapped, or why a mapped one was left in BullMQ under `remove`. */
  reason?: string;
  /** What the scheduler has that the schedule does not carry, each as `<option>: <value>`. */
  dropped: string[];
  /** The spec written, or that a dry run would write; absent when unmapped. */
  spec?: ScheduleSpec;
  removedFromBullmq: boolean;
}

export interface BullmqImportReport {
  queue: string;
  job: string;
  dryRun: boolean;
  /** One per Job Scheduler, in key order. */
  rows: BullmqImportRow[];
  /** Rows by outcome. */
  counts: Record<BullmqImportOutcome, number>;
  /** Schedulers left out by `name`, by key. */
  filteredOut: string[];
}

export interface BullmqImportOptions {
  /** The job type (a definition in jobs/ without schedule or every) that runs every imported schedule. */
  job: string;
  /** Remove each BullMQ scheduler once its schedule is written (never an unmapped one). */
  remove?: boolean;
  /** Put before each scheduler key to make the schedule id, e.g. `bull.`. */
  idPrefix?: string;
  /** Check and report, writing and removing nothing. */
  dryRun?: boolean;
  /** Who the writes are recorded as; default the admin's. */
  by?: string;
  /** Only the schedulers whose jobs have this BullMQ job name (for a queue whose worker switches on `job.name`). */
  name?: string;
}

/**
 * Why an import was refused before anything was written: `invalid-job` (not a job type), `invalid-id-prefix`,
 * `unreadable` (BullMQ cannot read the queue's schedulers).
 */
export type BullmqImportErrorCode = 'invalid-job' | 'invalid-id-prefix' | 'unreadable';

/** A refused import: `option` is the option at fault (`job`, `idPrefix`, `queue`), `problem` what is wrong and the fix. */
export class BullmqImportError extends Error {
  override readonly name = 'BullmqImportError';
  constructor(
    readonly code: BullmqImportErrorCode,
    readonly option: 'job' | 'idPrefix' | 'queue',
    readonly value: string,
    readonly problem: string,
  ) {
    super(`${option} ${JSON.stringify(value)}: ${problem}`);
  }
}

/** Schedulers read per call; BullMQ reads each one's hash, so a page is that many round trips' worth. */
const PAGE = 500;
/** Reads of the whole set: pages are ranks by next run, which move while BullMQ runs them (see readKeys). */
const MAX_PASSES = 3;
/** The id the job type is checked under; nothing is ever written to it. */
const PROBE_ID = 'leasebeat-import-check';

/**
 * Imports the Job Schedulers of a BullMQ queue as runtime schedules of one job type, one by one: each is
 * written (compare-and-set against what was read) and, with `remove`, removed from BullMQ only once that
 * write resolved, which on a replicated topology means replicas hold it. Running it again changes only what
 * changed in BullMQ. Throws `BullmqImportError` (and `ScheduleError` `no-definitions`) before writing
 * anything. The mapping, and what is dropped: docs/migrating-from-bullmq.md.
 */
export async function importBullmqSchedulers(schedules: Schedules, queue: Queue, options: BullmqImportOptions): Promise<BullmqImportReport> {
  const idPrefix = options.idPrefix ?? '';
  if (idPrefix !== '' && !SCHEDULE_ID_PATTERN.test(idPrefix)) {
    throw new BullmqImportError(
      'invalid-id-prefix',
      'idPrefix',
      idPrefix,
      'must be the start of a schedule id: letters, digits, ".", "_" and "-", starting with a letter or digit, like "bull."',
    );
  }
  await checkJobType(schedules, options.job);
  const keys = await readKeys(queue);
  const existing = await existingSchedules(schedules, idPrefix);
  const rows: BullmqImportRow[] = [];
  const filteredOut: string[] = [];
  for (const key of keys) {
    const scheduler = await queue.getJobScheduler(key);
    if (!scheduler) continue; // removed since it was listed
    if (options.name !== undefined && scheduler.name !== options.name) {
      filteredOut.push(key);
      continue;
    }
    rows.push(await importOne(schedules, queue, scheduler, existing.get(idPrefix + key), { ...options, idPrefix }));
  }
  const counts: Record<BullmqImportOutcome, number> = { created: 0, updated: 0, unchanged: 0, unmapped: 0, 'would-create': 0, 'would-update': 0 };
  for (const row of rows) counts[row.outcome]++;
  return { queue: queue.name, job: options.job, dryRun: options.dryRun === true, rows, counts, filteredOut };
}

async function importOne(
  schedules: Schedules,
  queue: Queue,
  scheduler: JobSchedulerJson,
  existing: ScheduleView | undefined,
  options: BullmqImportOptions & { idPrefix: string },
): Promise<BullmqImportRow> {
  const id = options.idPrefix + scheduler.key;
  const row: BullmqImportRow = { key: scheduler.key, id, outcome: 'unmapped', dropped: [], removedFromBullmq: false };
  const unmapped = (reason: string): BullmqImportRow => ({ ...row, outcome: 'unmapped', reason });
  if (!SCHEDULE_ID_PATTERN.test(id)) {
    return unmapped(
      `key ${JSON.stringify(scheduler.key)}: ${JSON.stringify(id)} is not a schedule id (letters, digits, ".", "_" and "-", starting with a ` +
        'letter or digit, at most 128 long); write this one by hand under an id of your choice',
    );
  }
  const note = `imported from BullMQ queue ${JSON.stringify(queue.name)}, scheduler ${JSON.stringify(scheduler.key)}`.slice(0, MAX_NOTE_LENGTH);
  const mapping = mapScheduler(scheduler, options.job, note, scheduler.limit === undefined ? 0 : await runsMade(queue, scheduler), Date.now());
  row.dropped = mapping.dropped;
  if (!mapping.ok) return unmapped(mapping.reason);
  const spec = mapping.spec;
  // Only a schedule this import wrote (its job type and note) is replaced: never one made another way.
  if (existing && (existing.spec.job !== options.job || existing.spec.note !== note)) {
    return unmapped(
      `id ${JSON.stringify(id)}: already a schedule this import did not write (${existing.trigger}, job type "${existing.spec.job}", ` +
        `by ${existing.updatedBy}); import under another id prefix, or remove that schedule first`,
    );
  }
  try {
    if (options.dryRun) {
      await schedules.check(id, spec);
      row.outcome = !existing ? 'would-create' : sameSpec(existing.spec, spec) ? 'unchanged' : 'would-update';
    } else {
      const result = await schedules.upsert(id, spec, { expectedVersion: existing?.version ?? 0, ...(options.by !== undefined ? { by: options.by } : {}) });
      row.outcome = !result.changed ? 'unchanged' : existing ? 'updated' : 'created';
    }
  } catch (error) {
    if (error instanceof ScheduleError && (error.code === 'invalid' || error.code === 'name-taken')) return unmapped(error.errors[0] ?? error.message);
    if (error instanceof ScheduleError && error.code === 'version-conflict') {
      return unmapped(`id ${JSON.stringify(id)}: written by someone else during the import; run the import again`);
    }
    throw error;
  }
  row.spec = spec;
  if (options.remove && !options.dryRun) Object.assign(row, await removeFromBullmq(queue, scheduler));
  return row;
}

type Mapping = { ok: true; spec: ScheduleSpec; dropped: string[] } | { ok: false; reason: string; dropped: string[] };

/** The spec a scheduler maps to, with `made` runs of its limit used, or why it cannot be one. */
function mapScheduler(scheduler: JobSchedulerJson, job: string, note: string, made: number, now: number): Mapping {
  const dropped: string[] = [];
  // Unset, BullMQ names each job by its scheduler's key; a name of its own is what a worker may switch on.
  if (scheduler.name !== scheduler.key) dropped.push(`name: ${scheduler.name}`);
  for (const [option, value] of Object.entries(scheduler.template?.opts ?? {})) {
    if (value !== undefined) dropped.push(`${option}: ${shown(value)}`);
  }
  const spec: ScheduleSpec = { job };
  if (scheduler.pattern !== undefined) {
    spec.schedule = scheduler.pattern;
    if (scheduler.tz !== undefined) spec.timezone = scheduler.tz;
    if (scheduler.startDate !== undefined) spec.startAt = iso(scheduler.startDate);
  } else if (scheduler.every !== undefined) {
    spec.every = formatDuration(scheduler.every);
    // An interval is the same in every zone; leasebeat refuses the field rather than ignore it.
    if (scheduler.tz !== undefined) dropped.push(`tz: ${scheduler.tz}`);
    const startAt = intervalStart(scheduler.every, scheduler.offset ?? scheduler.next ?? 0, scheduler.startDate);
    if (startAt !== undefined) spec.startAt = iso(startAt);
  } else {
    return { ok: false, reason: 'neither pattern nor every is set: BullMQ cannot run it either; remove it from BullMQ', dropped };
  }
  if (scheduler.template?.data !== undefined) spec.data = scheduler.template.data;
  if (scheduler.endDate !== undefined) {
    if (scheduler.endDate <= now) return { ok: false, reason: `endDate ${iso(scheduler.endDate)}: has passed, so it has no runs left; remove it from BullMQ`, dropped };
    spec.endAt = iso(scheduler.endDate);
  }
  if (scheduler.limit !== undefined) {
    const left = scheduler.limit - made;
    if (left <= 0) return { ok: false, reason: `limit ${scheduler.limit}: already used up by BullMQ, so it has no runs left; remove it from BullMQ`, dropped };
    spec.limit = left;
  }
  spec.note = note;
  return { ok: true, spec, dropped };
}

/**
 * Where a leasebeat interval must start to tick when BullMQ does. BullMQ runs `every` at a fixed phase
 * (its `offset`: when it was created, or its startDate) and leasebeat aligns intervals to the epoch or to
 * `startAt`, so the phase becomes a `startAt`: the first instant with it at or after startDate, or
 * without one, in the first interval after the epoch. Undefined when the epoch already has the phase.
 */
function intervalStart(every: number, phaseOf: number, startDate: number | undefined): number | undefined {
  const phase = modulo(phaseOf, every);
  if (startDate !== undefined) return startDate + modulo(phase - startDate, every);
  return phase === 0 ? undefined : phase;
}

/**
 * How many of its `limit` runs the scheduler used: BullMQ counts the run it created next (`iterationCount`
 * includes it), but while that one still waits as a delayed job, removing the scheduler takes it back.
 */
async function runsMade(queue: Queue, scheduler: JobSchedulerJson): Promise<number> {
  const created = scheduler.iterationCount ?? 0;
  // `next` is null for a scheduler BullMQ has no next run of.
  if (created === 0 || typeof scheduler.next !== 'number') return created;
  // BullMQ's id for a scheduler's run at `next` (JobScheduler.getSchedulerNextJobId).
  return (await queue.getJobState(`repeat:${scheduler.key}:${scheduler.next}`)) === 'delayed' ? created - 1 : created;
}

/** Removes the scheduler from BullMQ unless it changed since it was read (the schedule would not be it). */
async function removeFromBullmq(queue: Queue, read: JobSchedulerJson): Promise<Pick<BullmqImportRow, 'removedFromBullmq' | 'reason'>> {
  const now = await queue.getJobScheduler(read.key);
  if (!now) return { removedFromBullmq: false, reason: 'already gone from BullMQ' };
  if (!isDeepStrictEqual(settingsOf(now), settingsOf(read))) {
    return { removedFromBullmq: false, reason: 'left in BullMQ: it changed during the import; run the import again' };
  }
  return { removedFromBullmq: await queue.removeJobScheduler(read.key) };
}

/** What a scheduler is configured to do, without what running it changes. */
function settingsOf(scheduler: JobSchedulerJson): Omit<JobSchedulerJson, 'next' | 'iterationCount'> {
  const { next: _next, iterationCount: _count, ...settings } = scheduler;
  return settings;
}

/** Fails with `invalid-job` unless `job` names a job type, writing nothing. */
async function checkJobType(schedules: Schedules, job: string): Promise<void> {
  try {
    await schedules.check(PROBE_ID, { job, every: '1h' });
  } catch (error) {
    if (!(error instanceof ScheduleError) || error.code === 'no-definitions') throw error;
    // The probe's own id is a file job's name: the job type is then checked with each schedule.
    if (error.code === 'name-taken') return;
    const line = error.errors[0] ?? error.message;
    const head = [`job ${JSON.stringify(job)}: `, 'job: ', ''].map((rest) => `schedule ${JSON.stringify(PROBE_ID)}: ${rest}`).find((h) => line.startsWith(h)) ?? '';
    throw new BullmqImportError('invalid-job', 'job', job, line.slice(head.length));
  }
}

/**
 * Every Job Scheduler key of the queue, in key order. Pages are ranks by next run time, and a scheduler
 * that runs moves back, shifting the rest forward past a page already read: the set is read again until a
 * pass finds all that BullMQ counts.
 */
async function readKeys(queue: Queue): Promise<string[]> {
  const keys = new Set<string>();
  try {
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      const total = await queue.getJobSchedulersCount();
      for (let start = 0; start < total; start += PAGE) {
        for (const scheduler of await queue.getJobSchedulers(start, start + PAGE - 1, true)) keys.add(scheduler.key);
      }
      if (keys.size >= total) break;
    }
  } catch (error) {
    // BullMQ 6 refuses to read repeatable jobs of BullMQ 5 and earlier, with how to migrate them.
    throw new BullmqImportError('unreadable', 'queue', queue.name, `its Job Schedulers cannot be read: ${(error as Error).message.split('\n')[0]}`);
  }
  return [...keys].sort();
}

/** The stored schedules an import may meet, by id: those whose id contains the prefix. */
async function existingSchedules(schedules: Schedules, idPrefix: string): Promise<Map<string, ScheduleView>> {
  const byId = new Map<string, ScheduleView>();
  let cursor: string | undefined;
  do {
    const page = await schedules.list({ limit: 1_000, ...(idPrefix !== '' ? { search: idPrefix } : {}), ...(cursor !== undefined ? { cursor } : {}) });
    for (const view of page.schedules) byId.set(view.id, view);
    cursor = page.cursor;
  } while (cursor !== undefined);
  return byId;
}

/**
 * Whether writing `spec` would leave `stored` as it is. A limit's end is found again from the time of the
 * write, which a dry run cannot know: a spec with one is reported as an update.
 */
function sameSpec(stored: StoredSpec, spec: ScheduleSpec): boolean {
  if (spec.limit !== undefined) return false;
  const { limitEndsAt: _ends, ...fields } = stored;
  return isDeepStrictEqual(fields, spec);
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function modulo(value: number, by: number): number {
  return ((value % by) + by) % by;
}

function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
