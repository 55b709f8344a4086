import type { Logger } from 'pino';
import type { ScheduledJob } from '../scheduling/define-job.js';
import { compileSchedule } from './spec.js';
import type { ScheduleRecord } from './store.js';

/** Why a stored schedule does not run as written. */
export type ScheduleProblem =
  /** Its job type is not defined in `jobs/`: its ticks are recorded as skipped `no-handler`. */
  | { kind: 'orphaned'; detail: string }
  /** A file definition has its id: the file job runs, the schedule does not. */
  | { kind: 'shadowed'; detail: string }
  /** It no longer compiles (a job type changed under it): it does not run. */
  | { kind: 'invalid'; detail: string };

interface Compiled {
  record: ScheduleRecord;
  /** The job type it was compiled against (undefined: orphaned): a new type object means compiling again. */
  type: ScheduledJob | undefined;
  job: ScheduledJob | undefined;
  problem: ScheduleProblem | undefined;
}

/**
 * Every definition an instance knows, by name: the `jobs/` files' (scheduled jobs and job types) and the
 * runtime schedules, each compiled against its job type. A name is a file job or a schedule, never both:
 * a file definition wins, and the schedule is reported as shadowed. Kept as one map that is updated in
 * place per changed schedule, so that an upsert costs one compile, not one per schedule.
 */
export class JobCatalog {
  private readonly merged = new Map<string, ScheduledJob>();
  private readonly compiled = new Map<string, Compiled>();

  constructor(
    private readonly files: () => ReadonlyMap<string, ScheduledJob>,
    private readonly schedules: () => ReadonlyMap<string, ScheduleRecord>,
    private readonly log: Logger,
  ) {}

  /** File definitions and runnable schedules, by name. */
  get jobs(): ReadonlyMap<string, ScheduledJob> {
    return this.merged;
  }

  /** What keeps a stored schedule from running as written, if anything. */
  problemOf(id: string): ScheduleProblem | undefined {
    return this.compiled.get(id)?.problem;
  }

  /** The version of schedule `id` this instance runs by, or undefined when it runs none of it. */
  liveVersion(id: string): number | undefined {
    const compiled = this.compiled.get(id);
    return compiled?.job ? compiled.record.version : undefined;
  }

  /** The schedules as this instance compiled them, by id (orphans included, shadowed and invalid not). */
  schedule(id: string): ScheduledJob | undefined {
    return this.compiled.get(id)?.job;
  }

  /** After the job files changed: every schedule is compiled again against the new types. */
  filesChanged(): void {
    this.merged.clear();
    for (const [name, job] of this.files()) this.merged.set(name, job);
    this.compiled.clear();
    for (const id of this.schedules().keys()) this.update(id);
  }

  /** After the feed reported `ids` changed (written or removed). */
  schedulesChanged(ids: readonly string[]): void {
    for (const id of ids) this.update(id);
  }

  private update(id: string): void {
    const record = this.schedules().get(id);
    const files = this.files();
    const previous = this.compiled.get(id);
    if (!record) {
      this.compiled.delete(id);
      if (!files.has(id)) this.merged.delete(id);
      return;
    }
    const type = files.get(record.spec.job);
    const usable = type?.trigger.kind === 'none' ? type : undefined;
    if (previous && previous.record.version === record.version && previous.record.updatedAt === record.updatedAt && previous.type === usable) return;
    const entry = this.compile(id, record, usable, files);
    this.compiled.set(id, entry);
    if (files.has(id)) return;
    if (entry.job) this.merged.set(id, entry.job);
    else this.merged.delete(id);
  }

  private compile(id: string, record: ScheduleRecord, type: ScheduledJob | undefined, files: ReadonlyMap<string, ScheduledJob>): Compiled {
    const problem = judgeSchedule(id, record.spec.job, files);
    if (problem?.kind === 'shadowed') return { record, type, job: undefined, problem };
    const result = compileSchedule(id, record.spec, type, record.createdAt, record.updatedAt);
    if (!result.ok) {
      this.log.error({ schedule: id, errors: result.errors }, `schedule "${id}" does not compile and does not run: ${result.errors.join('; ')}`);
      return { record, type, job: undefined, problem: { kind: 'invalid', detail: result.errors.join('; ') } };
    }
    return { record, type, job: result.job, problem };
  }
}

/**
 * What the job files say of schedule `id` of job type `job`: shadowed when a file definition has its
 * name, orphaned when its job type is not among them (or is no job type).
 */
export function judgeSchedule(id: string, job: string, files: ReadonlyMap<string, ScheduledJob>): ScheduleProblem | undefined {
  const shadow = files.get(id);
  if (shadow && shadow.type === undefined) {
    return { kind: 'shadowed', detail: `the file job "${id}" (${shadow.file}) has the same name and runs instead; rename one of them` };
  }
  if (files.get(job)?.trigger.kind !== 'none') {
    return { kind: 'orphaned', detail: `its job type "${job}" is not defined in jobs/: its ticks are skipped as no-handler` };
  }
  return undefined;
}
