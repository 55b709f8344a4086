import { describeTrigger, type ScheduledJob } from '../scheduling/define-job.js';
import { listedTicks } from '../scheduling/plan.js';
import type { RecentRun, TriggerResult } from './run-views.js';
import { compileRecord, compileSpec, type ScheduleProblem } from '../schedules/catalog.js';
import { checkScheduleSpec, firstReviewAt, type JobTypes, type ScheduleSpec, type StoredSpec } from '../schedules/spec.js';
import { ScheduleVersionConflict, type ScheduleRecord, type ScheduleStore } from '../schedules/store.js';
import { DurabilityError } from '../redis/durability.js';

/**
 * Why a schedules call was refused, so callers can branch without parsing messages:
 * - `invalid`: the spec or id is wrong; `errors` has one line per problem, each naming the field and the fix.
 * - `not-found`: no schedule has that id.
 * - `name-taken`: a `jobs/` definition has that name (a name is a file job or a schedule, never both).
 * - `version-conflict`: `expectedVersion` was given and another write came first; read it again and retry.
 * - `no-definitions`: the job types cannot be checked (no jobs folder is configured or loaded).
 * - `unconfirmed`: on Sentinel or Cluster, too few replicas acknowledged the write in time. It may stand on
 *   the primary or be lost in a failover, so it counts as not written; repeat the same call (an upsert of
 *   the spec already stored is a no-op, acknowledged like any write).
 */
export type ScheduleErrorCode = 'invalid' | 'not-found' | 'name-taken' | 'version-conflict' | 'no-definitions' | 'unconfirmed';

export class ScheduleError extends Error {
  override readonly name = 'ScheduleError';
  constructor(
    readonly code: ScheduleErrorCode,
    message: string,
    /** One line per problem (for `invalid`); the message joins them. */
    readonly errors: readonly string[] = [message],
  ) {
    super(message);
  }
}

/** A stored schedule as clients see it. */
export interface ScheduleView {
  id: string;
  version: number;
  /** The spec as stored (instants as ISO strings), with `limitEndsAt` when a limit applies. */
  spec: StoredSpec;
  /** `0 9 * * *`, `every 5m` or `at <ISO>`. */
  trigger: string;
  updatedAt: string;
  /** When it was created (the first write, or the first after a removal); edits keep it. */
  createdAt: string;
  updatedBy: string;
  /** Paused by its spec or at run time (`pause(id)`), and the run-time pause's note. */
  paused: boolean;
  pauseNote: string | null;
  /** Why it does not run as written (its job type is gone, a file job has its name), or null. */
  problem: ScheduleProblem | null;
  /**
   * From a running instance's admin (`scheduler.schedules`): the version this instance runs by (an edit is
   * live here once this is its version), or null while it runs none. Null from `createAdmin`.
   */
  live: number | null;
}

export interface ScheduleDescription extends ScheduleView {
  /** The next ticks in its time zone, as ISO instants. */
  next: string[];
  timezone: string;
  /** The newest runs, newest first, as `Admin.runs` gives them for a job. */
  runs: RecentRun[];
  /** Ticks skipped so far, by reason. */
  skipped: Record<string, number>;
  enqueued: number;
}

export interface UpsertResult {
  id: string;
  version: number;
  /** False when the stored spec was already this one: no new version was written. */
  changed: boolean;
}

/** The runtime schedules API: `scheduler.schedules` and `createAdmin().schedules` (docs/schedules.md). */
export interface Schedules {
  /**
   * Creates or replaces a schedule; the leader applies it from its next tick after the write is
   * acknowledged. Writing the spec already stored is a no-op (`changed` false). Throws `invalid`,
   * `name-taken`, `no-definitions`, or `version-conflict` when `expectedVersion` (0: must not exist) is not
   * the stored version.
   */
  upsert(id: string, spec: ScheduleSpec, options?: { expectedVersion?: number; by?: string }): Promise<UpsertResult>;
  /**
   * Checks a spec as `upsert` would, and writes nothing: the spec in stored form, or `invalid`,
   * `name-taken` or `no-definitions` as `upsert` throws them (for dry runs and editors).
   */
  check(id: string, spec: ScheduleSpec): Promise<StoredSpec>;
  /** Removes a schedule (its staged runs are taken back); false when there was none. */
  remove(id: string, options?: { expectedVersion?: number; by?: string }): Promise<boolean>;
  get(id: string): Promise<ScheduleView | undefined>;
  /**
   * A page of schedules in id order, from after `cursor`: at most `limit` (default 100, at most 1,000),
   * only those of job type `job` and whose id contains `search` when given. `cursor` of the answer is
   * where the next page starts, undefined after the last. A filtered page looks at no more than 5,000
   * stored ids (`MAX_SCANNED`), so it may hold fewer than `limit` (none, even) and still have a cursor.
   */
  list(options?: { job?: string; search?: string; cursor?: string; limit?: number }): Promise<{ schedules: ScheduleView[]; cursor: string | undefined; total: number }>;
  /**
   * The schedule with its next `ticks` (default 5; at most 1,000, and none more than 10 years ahead) and
   * newest `runs` (default 10). Throws `not-found`.
   */
  describe(id: string, options?: { ticks?: number; runs?: number }): Promise<ScheduleDescription>;
  /** Pauses at run time, with a note; its staged runs are taken back. Throws `not-found`. */
  pause(id: string, note?: string, options?: { by?: string }): Promise<void>;
  /** Ends a run-time pause; false when it was not paused. Throws `not-found`. */
  resume(id: string, options?: { by?: string }): Promise<boolean>;
  /** Runs it now, outside its ticks, as `Admin.trigger` does. Throws `not-found`. */
  trigger(id: string, options?: { by?: string }): Promise<TriggerResult>;
}

/** What the schedules API needs of the admin: the job types, and the operations every job has. */
export interface ScheduleDesk {
  store: ScheduleStore;
  /** The `jobs/` definitions (job types among them); undefined when none are configured. */
  types(): Promise<JobTypes | undefined>;
  /** How this instance compiled and judged a schedule, when it runs one (a scheduler's own admin). */

  /** The version of a schedule the running instance runs by (a scheduler's own admin). */
  applied?(record: ScheduleRecord): boolean;
  redisNow(): Promise<number>;
  /** The newest runs of a name; none (not an error) for a schedule no leader has recorded yet. */
  runs(name: string, limit: number): Promise<RecentRun[]>;
  jobCounts(name: string): Promise<{ enqueued: number; skipped: Record<string, number> }>;
  pausedJobs(): Promise<ReadonlyMap<string, { note: string }>>;
  pause(name: string, note: string, by: string | undefined): Promise<void>;
  resume(name: string, by: string | undefined): Promise<boolean>;
  trigger(name: string, by: string | undefined): Promise<TriggerResult>;
  /** Who writes, when the caller does not say: the CLI's user@host. */
  who: string;
}

const DEFAULT_PAGE = 100;
const MAX_PAGE = 1_000;
/** The most stored ids one `list` looks at while filtering (see `list`). */
export const MAX_SCANNED = 5_000;

export function createSchedules(desk: ScheduleDesk): Schedules {
  return new ScheduleApi(desk);
}

/** A write the replicas did not acknowledge, as the schedules API's typed refusal; any other error as it is. */
function unconfirmedOr(id: string, error: unknown): unknown {
  if (!(error instanceof DurabilityError)) return error;
  return new ScheduleError('unconfirmed', `schedule "${id}": the write was not acknowledged by the replicas (${error.why}); it may or may not stand: repeat the same call once they answer`);
}

class ScheduleApi implements Schedules {
  constructor(private readonly desk: ScheduleDesk) {}

  async upsert(id: string, spec: ScheduleSpec, options: { expectedVersion?: number; by?: string } = {}): Promise<UpsertResult> {
    const { spec: stored, json, job, now } = await this.checked(id, spec);
    try {
      const outcome = await this.desk.store.upsert(id, stored, options.by ?? this.desk.who, {
        ...(options.expectedVersion === undefined ? {} : { expectedVersion: options.expectedVersion }),
        reviewAt: firstReviewAt(job, now),
        json,
      });
      return { id, ...outcome };
    } catch (error) {
      if (error instanceof ScheduleVersionConflict) throw new ScheduleError('version-conflict', error.message);
      throw unconfirmedOr(id, error);
    }
  }

  async check(id: string, spec: ScheduleSpec): Promise<StoredSpec> {
    return (await this.checked(id, spec)).spec;
  }

  /** The spec as it would be stored, compiled, and the time it was checked at. */
  private async checked(id: string, spec: ScheduleSpec): Promise<{ spec: StoredSpec; json: string; job: ScheduledJob; now: number }> {
    const types = await this.requireTypes();
    const existing = types.get(id);
    if (existing && existing.type === undefined) {
      throw new ScheduleError('name-taken', `schedule "${id}": id: is the name of the file job in ${existing.file}; a name is a file job or a schedule, never both: choose another id`);
    }
    // Redis' clock decides whether `at` is past and where `limit` ends; other specs do not read the time,
    // and skip the round trip.
    const timed = typeof spec === 'object' && spec !== null && (spec.at !== undefined || spec.limit !== undefined);
    const now = timed ? await this.desk.redisNow() : Date.now();
    const check = checkScheduleSpec(id, spec, types, now);
    if (!check.ok) throw new ScheduleError('invalid', check.errors.join('\n'), check.errors);
    return { spec: check.spec, json: check.json, job: check.job, now };
  }

  async remove(id: string, options: { expectedVersion?: number; by?: string } = {}): Promise<boolean> {
    try {
      const removed = await this.desk.store.remove(id, options.by ?? this.desk.who, options.expectedVersion === undefined ? {} : { expectedVersion: options.expectedVersion });
      return removed !== undefined;
    } catch (error) {
      if (error instanceof ScheduleVersionConflict) throw new ScheduleError('version-conflict', error.message);
      throw unconfirmedOr(id, error);
    }
  }

  async get(id: string): Promise<ScheduleView | undefined> {
    const record = await this.desk.store.get(id);
    if (!record) return undefined;
    const [types, paused] = await Promise.all([this.desk.types(), this.desk.pausedJobs()]);
    return this.view(record, types, paused);
  }

  async list(options: { job?: string; search?: string; cursor?: string; limit?: number } = {}): Promise<{ schedules: ScheduleView[]; cursor: string | undefined; total: number }> {
    const limit = Math.min(Math.max(1, Math.floor(options.limit ?? DEFAULT_PAGE)), MAX_PAGE);
    const [types, paused, total] = await Promise.all([this.desk.types(), this.desk.pausedJobs(), this.desk.store.count()]);
    const schedules: ScheduleView[] = [];
    let after = options.cursor;
    let scanned = 0;
    // Filters are applied to pages read in id order: a page is read until it is full, the ids end, or it
    // has looked at MAX_SCANNED ids; then it ends early with a cursor, so that a filter matching little
    // among a million schedules costs each request a bounded read, not all of them.
    for (;;) {
      if (scanned >= MAX_SCANNED) return { schedules, cursor: after, total };
      const ids = await this.desk.store.ids(after, limit);
      scanned += ids.length;
      if (ids.length === 0) return { schedules, cursor: undefined, total };
      const wanted = options.search === undefined ? ids : ids.filter((id) => id.includes(options.search!));
      const records = await this.desk.store.getMany(wanted, () => undefined);
      for (const record of records) {
        if (!record || (options.job !== undefined && record.spec.job !== options.job)) continue;
        schedules.push(this.view(record, types, paused));
        if (schedules.length === limit) return { schedules, cursor: record.id, total };
      }
      after = ids.at(-1);
      if (ids.length < limit) return { schedules, cursor: undefined, total };
    }
  }

  async describe(id: string, options: { ticks?: number; runs?: number } = {}): Promise<ScheduleDescription> {
    const record = await this.requireSchedule(id);
    const [types, paused, runs, counts, now] = await Promise.all([
      this.desk.types(),
      this.desk.pausedJobs(),
      this.desk.runs(id, options.runs ?? 10),
      this.desk.jobCounts(id),
      this.desk.redisNow(),
    ]);
    const view = this.view(record, types, paused);
    const compiled = compileSpec(record, types);
    const job = compiled.ok ? compiled.job : undefined;
    return {
      ...view,
      next: job ? listedTicks(job, now, options.ticks ?? 5) : [],
      timezone: job?.timezone ?? record.spec.timezone ?? 'UTC',
      runs,
      skipped: counts.skipped,
      enqueued: counts.enqueued,
    };
  }

  async pause(id: string, note = '', options: { by?: string } = {}): Promise<void> {
    await this.requireSchedule(id);
    try {
      await this.desk.pause(id, note, options.by);
    } catch (error) {
      throw unconfirmedOr(id, error);
    }
  }

  async resume(id: string, options: { by?: string } = {}): Promise<boolean> {
    await this.requireSchedule(id);
    try {
      return await this.desk.resume(id, options.by);
    } catch (error) {
      throw unconfirmedOr(id, error);
    }
  }

  async trigger(id: string, options: { by?: string } = {}): Promise<TriggerResult> {
    await this.requireSchedule(id);
    return this.desk.trigger(id, options.by);
  }

  private async requireSchedule(id: string): Promise<ScheduleRecord> {
    const record = await this.desk.store.get(id);
    if (!record) throw new ScheduleError('not-found', `no schedule has id "${id}": \`leasebeat schedules ls\` lists them`);
    return record;
  }

  private async requireTypes(): Promise<JobTypes> {
    const types = await this.desk.types();
    if (!types) {
      throw new ScheduleError(
        'no-definitions',
        'the job types cannot be checked: no jobs folder is loaded; point LEASEBEAT_JOBS_DIR (or --jobs-dir) at the folder the instances load',
      );
    }
    return types;
  }

  private view(record: ScheduleRecord, types: JobTypes | undefined, paused: ReadonlyMap<string, { note: string }>): ScheduleView {
    const compiled = types ? compileRecord(record, types) : undefined;
    const standalone = compiled ? undefined : compileSpec(record, undefined);
    const job = compiled ? compiled.job : standalone?.ok ? standalone.job : undefined;
    return {
      id: record.id,
      version: record.version,
      spec: record.spec,
      trigger: job ? describeTrigger(job) : (record.spec.schedule ?? (record.spec.every !== undefined ? `every ${record.spec.every}` : `at ${record.spec.at}`)),
      updatedAt: new Date(record.updatedAt).toISOString(),
      createdAt: new Date(record.createdAt).toISOString(),
      updatedBy: record.updatedBy,
      paused: record.spec.paused === true || paused.has(record.id),
      pauseNote: paused.get(record.id)?.note ?? null,
      problem: compiled?.problem ?? null,
      // Live once this instance has taken the write on and it runs (a shadowed or invalid schedule runs no version).
      live: this.desk.applied?.(record) && job && compiled?.problem?.kind !== 'shadowed' ? record.version : null,
    };
  }
}
